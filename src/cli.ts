#!/usr/bin/env node
/** The command line: `glassbox run`, `chat`, `tools`, `sessions`, `reset`, `trace`, `usage`. */
import { randomUUID } from "node:crypto";
import { createInterface } from "node:readline/promises";
import { parseArgs } from "node:util";
import { createTerminalRenderer, startTerminalChat, terminalApprovalGate, type ApproveMode } from "./adapters/terminal.js";
import { runAgent, type AgentConfig, type RunResult } from "./agent/loop.js";
import { databaseExists, openStore, type Store } from "./agent/store.js";
import { createTraceReader } from "./agent/trace.js";
import { formatRunTimeline, formatUsage } from "./adapters/trace-report.js";
import { loadConfig } from "./config.js";
import { createLogger } from "./logger.js";
import { createAgentConfig, describeTools } from "./setup.js";

const USAGE = `Usage:
  glassbox run "<task>" [--tools module.mjs]... [--session ID] [--max-steps N] [--approve yes|no|ask] [--json]
  glassbox chat [--tools module.mjs]... [--session ID]
  glassbox tools [--tools module.mjs]... [--json]
  glassbox sessions [--json]
  glassbox reset --session ID
  glassbox trace <session-or-run-id> [--json]
  glassbox pipeline <name> "<input>" [--session ID] [--approve yes|no|ask] [--json]
  glassbox usage [--json]

The model comes from OPENAI_BASE_URL, OPENAI_API_KEY and LLM_MODEL; conversations are kept in
GLASSBOX_DB (see the README). A session ID without a ':' is a command-line session (cli:ID).`;

const EXIT_CODES: Record<RunResult["stopReason"], number> = { final: 0, max_steps: 0, awaiting_approval: 0, cancelled: 130, error: 1 };

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: {
      tools: { type: "string", multiple: true, default: [] },
      session: { type: "string" },
      "max-steps": { type: "string" },
      approve: { type: "string", default: "ask" },
      json: { type: "boolean", default: false },
    },
  });
  const config = loadConfig();
  const log = createLogger({ level: "error" }); // the command line speaks for itself; LOG_LEVEL=info shows more
  const sessionId = sessionKey(values.session ?? randomUUID());

  switch (command) {
    case "run": {
      const task = positionals.join(" ").trim();
      if (!task) throw new UsageError('Give the task in quotes: glassbox run "what is 2+2?"');
      const approveMode = values.approve;
      if (approveMode !== "yes" && approveMode !== "no" && approveMode !== "ask") throw new UsageError("--approve takes yes, no or ask.");
      const maxSteps = values["max-steps"] === undefined ? undefined : Number(values["max-steps"]);
      if (maxSteps !== undefined && !(Number.isInteger(maxSteps) && maxSteps > 0)) throw new UsageError("--max-steps takes a whole number above 0.");
      // Prompts go to stderr, so stdout stays the answer (or the one JSON object).
      const prompt = process.stdin.isTTY ? createInterface({ input: process.stdin, output: process.stderr }) : undefined;
      const approve = terminalApprovalGate(approveMode, prompt && ((question) => prompt.question(question)));
      const agent = await createAgentConfig(config, log, { toolModules: values.tools, approve, maxSteps });
      try {
        return await runOnce(agent, task, sessionId, values.json);
      } finally {
        prompt?.close();
        await agent.close();
      }
    }
    case "pipeline": {
      const [name, ...words] = positionals;
      const input = words.join(" ").trim();
      if (!name || !input) throw new UsageError('Name the pipeline and give its input: glassbox pipeline <name> "<input>" (pipelines come from GLASSBOX_AGENTS).');
      const approveMode = values.approve;
      if (approveMode !== "yes" && approveMode !== "no" && approveMode !== "ask") throw new UsageError("--approve takes yes, no or ask.");
      const prompt = process.stdin.isTTY ? createInterface({ input: process.stdin, output: process.stderr }) : undefined;
      const approve = terminalApprovalGate(approveMode, prompt && ((question) => prompt.question(question)));
      const agent = await createAgentConfig(config, log, { toolModules: values.tools, approve });
      try {
        const renderer = createTerminalRenderer(process.stderr, process.stderr);
        const ran = await agent.pipelines.run(name, input, { sessionId, userId: "cli", onEvent: values.json ? undefined : (event) => renderer.render(event) });
        if (!ran) throw new UsageError(`There is no pipeline '${name}'; the pipelines are: ${agent.pipelines.names().join(", ") || "none (set GLASSBOX_AGENTS)"}.`);
        const stages = ran.stages.map(({ agent: stage, result }) => ({ agent: stage, output: result.output, stopReason: result.stopReason, steps: result.steps, usage: result.usage }));
        process.stdout.write(values.json ? `${JSON.stringify({ output: ran.output, stages })}\n` : `${values.json ? "" : "\n"}${ran.output}\n`);
        return stages.every((stage) => stage.stopReason === "final" || stage.stopReason === "max_steps") ? 0 : 1;
      } finally {
        prompt?.close();
        await agent.close();
      }
    }
    case "chat": {
      const agent = await createAgentConfig(config, log, { toolModules: values.tools });
      await startTerminalChat(agent, { input: process.stdin, output: process.stdout, sessionId, reset: () => agent.store.resetSession(sessionId) });
      await agent.close();
      return 0;
    }
    case "tools": {
      const tools = await describeTools(config, log, values.tools);
      if (values.json) process.stdout.write(`${JSON.stringify(tools, null, 2)}\n`);
      else for (const tool of tools) process.stdout.write(`${tool.name}  [${tool.from}]${tool.dangerous ? " (dangerous: needs approval)" : ""}\n  ${tool.description}\n  parameters: ${JSON.stringify(tool.parameters)}\n`);
      return 0;
    }
    case "sessions": {
      const store = openForReading(config.databasePath);
      const sessions = store?.listSessions() ?? [];
      store?.close();
      if (values.json) process.stdout.write(`${JSON.stringify(sessions, null, 2)}\n`);
      else if (sessions.length === 0) process.stdout.write(`${nothingRecorded(config.databasePath)}.\n`);
      else for (const session of sessions) process.stdout.write(`${session.id}  ${session.messageCount} messages  ${session.tokens} tokens  ${session.runCount} runs  last ${session.lastActivity}\n`);
      return 0;
    }
    case "trace": {
      const target = positionals[0];
      if (!target) throw new UsageError("Name a session or a run: glassbox trace <session-or-run-id> (see glassbox sessions).");
      const store = openForReading(config.databasePath);
      if (!store) {
        process.stdout.write(`There is no run or session ${target}: no conversations are recorded yet in ${config.databasePath} (GLASSBOX_DB).\n`);
        return 1;
      }
      try {
        const traces = createTraceReader(store);
        const single = traces.run(target);
        // A sub-agent's runs are shown inside the tool calls that started them.
        const runs = single ? [single] : traces.runsOfSession(sessionKey(target)).filter((run) => !run.parentRunId);
        if (runs.length === 0) {
          process.stdout.write(`There is no run or session ${target}; see glassbox sessions.\n`);
          return 1;
        }
        const timelines = runs.map((run) => ({ run, steps: traces.steps(run.runId) }));
        if (values.json) process.stdout.write(`${JSON.stringify(timelines, null, 2)}\n`);
        else process.stdout.write(`${timelines.map(({ run, steps }) => formatRunTimeline(run, steps, traces)).join("\n\n")}\n`);
        return 0;
      } finally {
        store.close();
      }
    }
    case "usage": {
      const store = openForReading(config.databasePath);
      const traces = store && createTraceReader(store);
      const totals = { byDay: traces?.totalsByDay() ?? [], byUser: traces?.totalsByUser() ?? [], bySession: traces?.totalsBySession() ?? [] };
      store?.close();
      if (values.json) process.stdout.write(`${JSON.stringify(totals, null, 2)}\n`);
      else if (!store) process.stdout.write(`${nothingRecorded(config.databasePath)}.\n`);
      else process.stdout.write(`${[formatUsage("By day", totals.byDay), formatUsage("By user", totals.byUser), formatUsage("By session", totals.bySession)].join("\n\n")}\n`);
      return 0;
    }
    case "reset": {
      if (!values.session) throw new UsageError("Name the session to reset: glassbox reset --session ID");
      // Without a database there is no session to reset, and none is made to say so.
      const store = databaseExists(config.databasePath) ? openStore(config.databasePath) : undefined;
      const found = store?.resetSession(sessionId) ?? false;
      store?.close();
      process.stdout.write(found ? `Session ${sessionId} starts afresh; its earlier messages are kept but no longer shown to the model.\n` : `There is no session ${sessionId}; see glassbox sessions.\n`);
      return found ? 0 : 1;
    }
    default:
      process.stdout.write(`${USAGE}\n`);
      return command === undefined || command === "help" || command === "--help" ? 0 : 2;
  }
}

/** The store for a command that only reads; undefined when there is no database yet (none is made). */
function openForReading(path: string): Store | undefined {
  return databaseExists(path) ? openStore(path, { readOnly: true }) : undefined;
}

const nothingRecorded = (path: string) => `No conversations are recorded yet in ${path} (GLASSBOX_DB)`;

/** Full session keys (slack:..., discord:...) pass through; a bare ID is a command-line session. */
function sessionKey(id: string): string {
  return id.includes(":") ? id : `cli:${id}`;
}

async function runOnce(agent: AgentConfig, task: string, sessionId: string, json: boolean): Promise<number> {
  const controller = new AbortController();
  process.once("SIGINT", () => controller.abort());
  const renderer = createTerminalRenderer(process.stdout, process.stderr);
  const result = await runAgent(agent, {
    input: task,
    sessionId,
    userId: "cli",
    signal: controller.signal,
    onEvent: json ? undefined : (event) => renderer.render(event),
  });

  if (json) {
    const { output, stopReason, steps, usage, toolCalls } = result;
    process.stdout.write(`${JSON.stringify({ output, stopReason, steps, usage, toolCalls })}\n`);
  } else if (result.stopReason === "error") {
    process.stderr.write(`${result.output}\n`);
  } else {
    process.stdout.write(renderer.printedAnswer && result.stopReason === "final" ? "\n" : `${result.output}\n`);
  }
  return EXIT_CODES[result.stopReason];
}

class UsageError extends Error {}

/** Every failure a person sees is one sentence; a stack trace helps nobody here. */
export function reportFailure(error: unknown): number {
  const message = error instanceof Error ? error.message : String(error);
  process.stderr.write(`glassbox: ${message}\n`);
  if (error instanceof UsageError || (error as { code?: string }).code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") process.stderr.write(`${USAGE}\n`);
  return 2;
}

// Piped into `head` and the like: a closed stdout is a normal end, not a crash.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code === "EPIPE") process.exit(0);
  throw error;
});

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.exitCode = reportFailure(error);
  },
);
