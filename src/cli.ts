#!/usr/bin/env node
/**
 * The command line: `glassbox run`, `chat`, `tools`, `sessions`, `reset`, `erase`, `trace`, `pipeline`, `replay`, `eval`,
 * `usage`, `init`. Each command is a module of src/cli/, loaded only when it runs, so `--help` starts
 * without the model client, SQLite or the tool engine (bench/cli-startup.ts measures it).
 */
import { parseArgs } from "node:util";
import type { Command, CommandInput } from "./cli/command.js";
import { HELP, UsageError } from "./cli/help.js";
import { loadEnvFile, unknownSettings } from "./settings.js";

const COMMANDS: Record<string, () => Promise<{ default: Command }>> = {
  run: () => import("./cli/run.js"),
  pipeline: () => import("./cli/pipeline.js"),
  chat: () => import("./cli/chat.js"),
  tools: () => import("./cli/tools.js"),
  sessions: () => import("./cli/sessions.js"),
  reset: () => import("./cli/reset.js"),
  erase: () => import("./cli/erase.js"),
  trace: () => import("./cli/trace.js"),
  usage: () => import("./cli/usage.js"),
  replay: async () => ({ default: (await import("./cli/replay.js")).replayCommand }),
  eval: () => import("./cli/eval.js"),
  init: () => import("./cli/init.js"),
};

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: {
      tools: { type: "string", multiple: true, default: [] },
      session: { type: "string" },
      user: { type: "string" },
      channel: { type: "string" },
      workspace: { type: "string" },
      "max-steps": { type: "string" },
      approve: { type: "string", default: "ask" },
      json: { type: "boolean", default: false },
      model: { type: "string" },
      "system-prompt": { type: "string" },
      feedback: { type: "string" },
      cases: { type: "string", multiple: true, default: [] },
      dir: { type: "string" },
      platform: { type: "string" },
      "slack-mode": { type: "string" },
      "public-url": { type: "string" },
      "model-url": { type: "string" },
      shape: { type: "string" },
      force: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  const load = command === undefined ? undefined : COMMANDS[command];
  if (load === undefined && command !== undefined && !["help", "--help", "-h"].includes(command)) {
    throw new UsageError(`There is no command '${command}'; the commands are below.`);
  }
  if (load === undefined || values.help) {
    process.stdout.write(`${HELP}\n`);
    return 0;
  }
  // As `npm start` does, but quietly: a command's output may be read by a program.
  loadEnvFile();
  for (const sentence of unknownSettings(process.env)) process.stderr.write(`glassbox: warning: ${sentence}\n`);
  const { help: _help, ...options } = values;
  const input: CommandInput = { positionals, options };
  return (await load()).default(input);
}

/**
 * Every failure a person sees is one sentence; a stack trace helps nobody here. With --json it is
 * the one JSON object on stdout: {"error": {"code", "message"}}.
 */
export function reportFailure(error: unknown, json: boolean): number {
  const code = (error as { code?: unknown } | undefined)?.code;
  const usage = error instanceof UsageError || (typeof code === "string" && code.startsWith("ERR_PARSE_ARGS_"));
  const message =
    code === "ERR_PARSE_ARGS_UNKNOWN_OPTION"
      ? unknownOption(error as Error)
      : error instanceof Error
        ? error.message
        : String(error);
  if (json) {
    process.stdout.write(
      `${JSON.stringify({ error: { code: usage ? "usage" : typeof code === "string" ? code : "internal", message } })}\n`,
    );
    return 2;
  }
  process.stderr.write(`glassbox: ${message}\n`);
  if (usage) process.stderr.write(`${HELP}\n`);
  return 2;
}

/** parseArgs' message, which also explains `--` at length, as one sentence. */
function unknownOption(error: Error): string {
  const option = /'([^']+)'/.exec(error.message)?.[1];
  return option ? `There is no option ${option}; the options are below.` : error.message;
}

// Piped into `head` and the like: a closed stdout is a normal end, not a crash.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code === "EPIPE") process.exit(0);
  throw error;
});

const argv = process.argv.slice(2);
main(argv).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.exitCode = reportFailure(error, argv.includes("--json"));
  },
);
