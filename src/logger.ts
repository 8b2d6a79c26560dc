/**
 * Structured JSON logs (pino) on stderr, so stdout stays for answers. Secrets never reach a log:
 * fields that commonly hold them are redacted wherever they appear.
 */
import { pino, type Logger } from "pino";

export type { Logger };

export const REDACTED_FIELDS = ["apiKey", "token", "authorization", "password", "secret", "signingSecret", "botToken", "appToken"];

export function createLogger(options: { level?: string } = {}): Logger {
  const paths = REDACTED_FIELDS.flatMap((field) => [field, `*.${field}`, `*.*.${field}`]);
  return pino(
    {
      name: "glassbox",
      level: process.env.LOG_LEVEL ?? options.level ?? "info",
      redact: { paths, censor: "[redacted]" },
    },
    pino.destination(2),
  );
}
