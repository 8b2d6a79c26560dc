/**
 * Logs for a person at a terminal: each pino record as one readable line ("glassbox: warning: MCP
 * server 'files' could not be reached at startup (...)") instead of a JSON object.
 */
import { PLAIN, withoutControls, type Style } from "./style.js";

const LEVELS: Record<number, string> = {
  10: "trace",
  20: "debug",
  30: "info",
  40: "warning",
  50: "error",
  60: "fatal",
};
// Fields every record has, or that name the process rather than the event.
const FRAME_FIELDS = new Set(["level", "time", "pid", "hostname", "name", "msg", "component"]);
const MAX_FIELD_CHARS = 200;

export interface LogLineOptions {
  style?: Style;
  /**
   * Leaves out warnings about a run (they carry its runId): a failed tool call or run is shown by
   * the command itself, so the log would only say it twice. Errors are always shown.
   */
  skipRunWarnings?: boolean;
}

/** A pino destination that writes `write(line)` for each record, readable and on one line. */
export function readableLogLines(
  write: (line: string) => void,
  options: LogLineOptions = {},
): { write(record: string): void } {
  const { style = PLAIN, skipRunWarnings = false } = options;
  return {
    write(record) {
      for (const json of record.split("\n")) {
        if (!json.trim()) continue;
        let fields: Record<string, unknown>;
        try {
          fields = JSON.parse(json) as Record<string, unknown>;
        } catch {
          write(`glassbox: ${withoutControls(json)}\n`);
          continue;
        }
        const level = typeof fields.level === "number" ? fields.level : 30;
        if (skipRunWarnings && level < 50 && "runId" in fields) continue;
        write(`${formatRecord(fields, level, style)}\n`);
      }
    },
  };
}

function formatRecord(fields: Record<string, unknown>, level: number, style: Style): string {
  const message = oneLine(typeof fields.msg === "string" ? fields.msg : "");
  // What the message does not already say, as "key: value" in brackets.
  const extra = Object.entries(fields)
    .filter(([key, value]) => !FRAME_FIELDS.has(key) && value !== undefined && !message.includes(textOf(value)))
    .map(([key, value]) => `${key}: ${cut(textOf(value))}`);
  const name = LEVELS[level] ?? "log";
  const label = level >= 50 ? style.red(`${name}:`) : level >= 40 ? style.yellow(`${name}:`) : style.dim(`${name}:`);
  return `glassbox: ${label} ${message}${extra.length ? style.dim(` (${extra.join(", ")})`) : ""}`;
}

function textOf(value: unknown): string {
  return oneLine(typeof value === "string" ? value : (JSON.stringify(value) ?? String(value)));
}

const oneLine = (text: string) => withoutControls(text).replace(/\s+/g, " ").trim();
const cut = (text: string) => (text.length > MAX_FIELD_CHARS ? `${text.slice(0, MAX_FIELD_CHARS - 1)}…` : text);
