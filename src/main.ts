/**
 * `npm start`: runs the bot with the adapters that are configured. Until the chat platforms are
 * wired in, that is an interactive chat in this terminal on the same agent loop.
 */
import { startTerminalChat } from "./adapters/terminal.js";
import { loadConfig } from "./config.js";
import { createAgentConfig } from "./setup.js";

async function start(): Promise<void> {
  const config = loadConfig();
  const agent = await createAgentConfig(config);
  await startTerminalChat(agent, { input: process.stdin, output: process.stdout, sessionId: "cli:terminal" });
}

start().catch((error: unknown) => {
  process.stderr.write(`glassbox: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
