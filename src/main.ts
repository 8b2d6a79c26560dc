/**
 * `npm start`: runs the bot with the adapters that are configured. Until the chat platforms are
 * wired in, that is an interactive chat in this terminal on the same agent loop, remembered in
 * SQLite between starts.
 */
import { startTerminalChat } from "./adapters/terminal.js";
import { loadConfig } from "./config.js";
import { createLogger } from "./logger.js";
import { createAgentConfig } from "./setup.js";

async function start(): Promise<void> {
  const config = loadConfig();
  const log = createLogger({ level: "warn" });
  const agent = await createAgentConfig(config, log);
  const sessionId = "cli:terminal";
  await startTerminalChat(agent, { input: process.stdin, output: process.stdout, sessionId, reset: () => agent.store.resetSession(sessionId) });
  agent.store.close();
}

start().catch((error: unknown) => {
  process.stderr.write(`glassbox: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
