/**
 * Structured JSON logs (pino) on stderr, so stdout stays for answers; readable lines when stderr is
 * a terminal. Secrets never reach a log: fields that commonly hold them are redacted wherever they
 * appear, and so is anything that looks like a token, or a URL's password, inside a message.
 */
import { pino, type DestinationStream, type Logger } from "pino";
import { redactUrlsIn } from "./redact.js";

export type { Logger };

export const REDACTED_FIELDS = [
  "apiKey",
  "token",
  "authorization",
  "password",
  "secret",
  "signingSecret",
  "botToken",
  "appToken",
];

// OpenAI keys, Slack tokens and Bearer headers, wherever they sit in a log line's text.
const SECRET_PATTERN =
  /\b(sk-[A-Za-z0-9_-]{8,}|xox[abpr]-[A-Za-z0-9-]{8,}|xapp-[A-Za-z0-9-]{8,}|Bearer\s+[A-Za-z0-9._~+/=-]{8,})/g;

export function redactSecrets(text: string): string {
  return redactUrlsIn(text.replace(SECRET_PATTERN, "[redacted]"));
}

export function createLogger(options: { level?: string; destination?: DestinationStream } = {}): Logger {
  const paths = REDACTED_FIELDS.flatMap((field) => [field, `*.${field}`, `*.*.${field}`]);
  const pretty = !options.destination && process.stderr.isTTY;
  return pino(
    {
      name: "glassbox",
      level: process.env.LOG_LEVEL ?? options.level ?? "info",
      redact: { paths, censor: "[redacted]" },
      hooks: {
        // Messages are free text (error messages may quote a request): scrub tokens from them too.
        logMethod(args, method) {
          method.apply(
            this,
            args.map((arg) => (typeof arg === "string" ? redactSecrets(arg) : arg)) as Parameters<typeof method>,
          );
        },
      },
      formatters: {
        log: (object) => JSON.parse(redactSecrets(JSON.stringify(object))) as Record<string, unknown>,
      },
      ...(pretty
        ? {
            transport: {
              target: "pino-pretty",
              options: { destination: 2, colorize: true, translateTime: "HH:MM:ss" },
            },
          }
        : {}),
    },
    pretty ? undefined : (options.destination ?? pino.destination(2)),
  );
}
