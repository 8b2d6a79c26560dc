/** `glassbox chat`: a conversation at the terminal, on the same loop and memory as the chat platforms. */
import { startTerminalChat, terminalView } from "../adapters/terminal.js";
import { startAgent } from "./agent.js";
import { sessionOf, type CommandInput } from "./command.js";

export default async function chat({ options }: CommandInput): Promise<number> {
  // Warnings go to stderr; the chat itself, its tool activity and its status line to stdout.
  const agent = await startAgent(terminalView(process.stdout, process.stderr), { toolModules: options.tools });
  const sessionId = sessionOf(options);
  try {
    await startTerminalChat(agent, {
      input: process.stdin,
      output: process.stdout,
      sessionId,
      reset: () => agent.port.resetSession(sessionId),
    });
  } finally {
    await agent.close();
  }
  return 0;
}
