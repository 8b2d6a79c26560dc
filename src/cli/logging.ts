/**
 * The command line's log: warnings and errors (LOG_LEVEL for more), each as one readable line on
 * stderr, above the status line when there is one.
 */
import { readableLogLines } from "../adapters/terminal/log-lines.js";
import type { TerminalView } from "../adapters/terminal.js";
import { createLogger, type Logger } from "../logger.js";

export function createCliLogger(
  view: Pick<TerminalView, "status" | "logStyle">,
  env: NodeJS.ProcessEnv = process.env,
): Logger {
  // Without LOG_LEVEL, a failed tool call or run is left to the command's own output, which shows it already.
  const destination = readableLogLines((line) => view.status.print(line), {
    style: view.logStyle,
    skipRunWarnings: env.LOG_LEVEL === undefined,
  });
  return createLogger({ level: "warn", destination });
}
