// Reliability of memory in SQLite, end to end on the real stack (openSqliteStore + createMemory +
// the real token counter + the openai SDK against the scripted model server + runAgent):
//  - a process killed with SIGKILL in the middle of a long session loses nothing it had committed,
//    leaves a sound database, and the session goes on — three kills in a row;
//  - many sessions run side by side while runs of one session wait their turn, with nothing lost
//    or interleaved, and no SQLITE_BUSY even while another process writes the same file.
// Every wait is on an event or a printed line; nothing asserts on timing.
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { RunResult } from "../../../src/agent/run.js";
import { runAgent } from "../../../src/agent/loop.js";
import { createMemory, SUMMARY_PROMPT } from "../../../src/agent/memory.js";
import { openSqliteStore, type SqliteStore } from "../../../src/store/sqlite-store.js";
import { createTokenCounter } from "../../../src/agent/tokens.js";
import type { Message } from "../../../src/agent/types.js";
import type {
  ChatCompletionRequestBody,
  Script,
  ScriptedModelServer,
} from "../../../src/testing/scripted-model-server.js";
import { createToolRegistry } from "../../../src/tools/registry.js";
import type { ToolDefinition } from "../../../src/tools/types.js";
import { call, closeServers, deferred, modelFor, startServer, textOf } from "../../helpers/agent.js";
import { answerText, BUDGET_TOKENS, reportTool, requestText, SESSION_ID, USER_ID } from "../fixtures/report-tool.js";
import { sqlitePortOf } from "../../../src/store/sqlite.js";
import { startPipeline } from "../../helpers/pipeline.js";

const ROOT = fileURLToPath(new URL("../../..", import.meta.url));
const FIXTURES = fileURLToPath(new URL("../fixtures/", import.meta.url));
const BUSY = /SQLITE_BUSY|database is locked/i;

type SentMessage = ChatCompletionRequestBody["messages"][number];
type AgentConfig = Parameters<typeof runAgent>[0];

// ---- child processes -----------------------------------------------------------------------

interface Line {
  type: string;
  [key: string]: unknown;
}
interface CommittedLine extends Line {
  type: "committed";
  id: number;
  runId: string;
  message: Message;
}

interface Child {
  process: ChildProcessWithoutNullStreams;
  lines: Line[];
  stderr(): string;
  /** Resolves with the last line once `predicate` holds for the lines so far; rejects if the child ends first. */
  waitFor(predicate: (lines: Line[]) => boolean, what: string): Promise<Line>;
  closed: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const children = new Set<ChildProcessWithoutNullStreams>();
const directories: string[] = [];

function spawnFixture(script: string, args: string[]): Child {
  const child = spawn(process.execPath, ["--import", "tsx", join(FIXTURES, script), ...args], {
    cwd: ROOT,
    stdio: ["pipe", "pipe", "pipe"],
  });
  children.add(child);
  const lines: Line[] = [];
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  const waiters = new Set<{
    predicate: (lines: Line[]) => boolean;
    resolve: (line: Line) => void;
    reject: (error: Error) => void;
    what: string;
  }>();
  createInterface({ input: child.stdout }).on("line", (text) => {
    let line: Line;
    try {
      line = JSON.parse(text) as Line;
    } catch {
      line = { type: "unparsed", text }; // a line cut by the kill is not a report
    }
    lines.push(line);
    for (const waiter of waiters) {
      if (!waiter.predicate(lines)) continue;
      waiters.delete(waiter);
      waiter.resolve(line);
    }
  });
  const closed = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on("close", (code, signal) => {
      children.delete(child);
      for (const waiter of waiters)
        waiter.reject(
          new Error(`${script} ended (code ${code}, signal ${signal}) before ${waiter.what}; stderr:\n${stderr}`),
        );
      waiters.clear();
      resolve({ code, signal });
    });
  });
  return {
    process: child,
    lines,
    stderr: () => stderr,
    closed,
    waitFor(predicate, what) {
      if (predicate(lines)) return Promise.resolve(lines.at(-1) as Line);
      if (child.exitCode !== null || child.signalCode !== null)
        return Promise.reject(new Error(`${script} already ended before ${what}; stderr:\n${stderr}`));
      return new Promise((resolve, reject) => void waiters.add({ predicate, resolve, reject, what }));
    },
  };
}

async function killHard(child: Child): Promise<void> {
  child.process.kill("SIGKILL");
  const exit = await child.closed; // also: every line printed before the kill has been read
  expect(exit.signal).toBe("SIGKILL");
}

function tempDatabase(): string {
  const directory = mkdtempSync(join(tmpdir(), "glassbox-reliability-"));
  directories.push(directory);
  return join(directory, "glassbox.db");
}

afterEach(async () => {
  for (const child of children) child.kill("SIGKILL"); // only the processes this file started
  children.clear();
  await closeServers();
});
afterAll(() => {
  for (const directory of directories.splice(0)) rmSync(directory, { recursive: true, force: true });
});

// ---- checks on what the model was sent ----------------------------------------------------

/** What breaks the Chat Completions protocol in a request: tool results must follow their call, in order, once. */
function protocolProblems(messages: SentMessage[]): string[] {
  const problems: string[] = [];
  if (messages[0]?.role !== "system") problems.push("the first message is not the system prompt");
  const seen = new Set<string>();
  for (let index = 0; index < messages.length; index++) {
    const message = messages[index] as SentMessage;
    if (message.role === "tool") {
      problems.push(`#${index}: a tool message (${message.tool_call_id}) that does not follow its assistant message`);
      continue;
    }
    if (message.role !== "assistant" || !message.tool_calls?.length) continue;
    const calls = message.tool_calls as Array<{ id: string }>;
    calls.forEach((toolCall, offset) => {
      const result = messages[index + 1 + offset];
      if (seen.has(toolCall.id)) problems.push(`#${index}: tool call ${toolCall.id} appears twice`);
      seen.add(toolCall.id);
      if (result?.role !== "tool" || result.tool_call_id !== toolCall.id) {
        problems.push(
          `#${index}: call ${toolCall.id} is not followed by its result (found ${result?.role} ${result?.tool_call_id ?? ""})`,
        );
      }
    });
    index += calls.length;
  }
  return problems;
}

/** Messages sent twice in one request (every message of these conversations is unique). */
function duplicates(messages: SentMessage[]): string[] {
  const seen = new Set<string>();
  const twice: string[] = [];
  for (const message of messages) {
    const key = JSON.stringify([
      message.role,
      message.content ?? null,
      message.tool_calls ?? null,
      message.tool_call_id ?? null,
    ]);
    if (seen.has(key))
      twice.push(`${message.role}: ${textOf(message).slice(0, 60) || JSON.stringify(message.tool_calls).slice(0, 60)}`);
    seen.add(key);
  }
  return twice;
}

const allText = (messages: SentMessage[]) =>
  messages.map((message) => `${textOf(message)}\n${JSON.stringify(message.tool_calls ?? [])}`).join("\n");
const isSummaryRequest = (body: ChatCompletionRequestBody) => textOf(body.messages[0]) === SUMMARY_PROMPT;

/** The run's own position in a request: its input (the last user message) and how many model steps it already took. */
function runPosition(messages: SentMessage[]): { input: string; step: number } {
  const last = messages.findLastIndex((message) => message.role === "user");
  return {
    input: textOf(messages[last]),
    step: messages.slice(last + 1).filter((message) => message.role === "assistant").length,
  };
}

// ---- 1. SIGKILL in the middle of a long session -------------------------------------------

interface KillControl {
  /** The next run's first tool step holds one of its calls forever (the test kills the child meanwhile). */
  holdToolNext: boolean;
  /** The next second-step model request hangs; `hung` resolves when it arrived. */
  hangNext: boolean;
  hung: ReturnType<typeof deferred<number>>;
}

/**
 * The model of the long session: each run fetches report parts a and b in parallel, then part c,
 * then answers. Summary requests are answered with the latest answer they saw, so a test can find
 * earlier context whether it is still in view or folded into the summary.
 */
function longSessionScript(control: KillControl): Script {
  return (body) => {
    if (isSummaryRequest(body)) {
      const answers = [...textOf(body.messages[1]).matchAll(/Answer to request #\d+: [^\n]*?\./g)].map(
        (match) => match[0],
      );
      return { content: `The user asks for weekly reports. Latest answer: ${answers.at(-1) ?? "(none yet)"}` };
    }
    const { input, step } = runPosition(body.messages);
    const n = Number(/request #(\d+)/.exec(input)?.[1]);
    if (step === 0) {
      const hold = control.holdToolNext;
      control.holdToolNext = false;
      return {
        toolCalls: [
          call("fetch_report", { request: n, part: "a" }),
          call("fetch_report", { request: n, part: "b", ...(hold ? { hold: true } : {}) }),
        ],
      };
    }
    if (step === 1) {
      if (control.hangNext) {
        control.hangNext = false;
        control.hung.resolve(n);
        return { hang: true };
      }
      return { toolCalls: [call("fetch_report", { request: n, part: "c" })] };
    }
    return { content: answerText(n) };
  };
}

const committedOf = (lines: Line[]) => lines.filter((line): line is CommittedLine => line.type === "committed");

interface MessageRow {
  id: number;
  run_id: string | null;
  role: string;
  content: string | null;
  tool_calls: string | null;
  tool_call_id: string | null;
}

const asRow = (message: Message) => ({
  role: message.role,
  content: message.content ?? null,
  tool_calls: message.role === "assistant" && message.tool_calls?.length ? message.tool_calls : null,
  tool_call_id: message.role === "tool" ? message.tool_call_id : null,
});

interface AfterKill {
  /** The run the kill cut off, if the child had started one it did not end. */
  cutRunId: string | undefined;
  /** The number of the run this check ran in the test process. */
  n: number;
}

/**
 * After a kill: the file is sound, every message the child reported committed is there unchanged,
 * the cut-off run is left "running", and the next run of the session — in this process, on the
 * same file — ends normally with a valid request that carries the earlier context.
 */
async function checkAfterKill(
  dbPath: string,
  child: Child,
  server: ScriptedModelServer,
  knownCuts: string[],
): Promise<AfterKill> {
  const store = openSqliteStore(dbPath);
  try {
    expect(store.db.pragma("integrity_check", { simple: true })).toBe("ok");

    // Nothing acknowledged is lost: same ids, same content, same run.
    const committed = committedOf(child.lines);
    expect(committed.length).toBeGreaterThan(0);
    const rowById = store.db.prepare(
      "SELECT id, run_id, role, content, tool_calls, tool_call_id FROM messages WHERE id = ?",
    );
    for (const line of committed) {
      const row = rowById.get(line.id) as MessageRow | undefined;
      expect(row, `message ${line.id} was reported committed`).toBeDefined();
      const { id, run_id, tool_calls, ...rest } = row as MessageRow;
      expect({ id, run_id, ...rest, tool_calls: tool_calls ? JSON.parse(tool_calls) : null }).toEqual({
        id: line.id,
        run_id: line.runId,
        ...asRow(line.message),
      });
    }
    // ...and the child's reports were the session's rows one by one (no gap the pairing skipped).
    const sessionIds = store.db
      .prepare("SELECT id FROM messages WHERE session_id = ? AND id BETWEEN ? AND ? ORDER BY id")
      .pluck()
      .all(SESSION_ID, committed[0]?.id, committed.at(-1)?.id) as number[];
    expect(sessionIds).toEqual(committed.map((line) => line.id));

    // Runs the child ended are final; the one it did not end is left running, and nothing else is.
    const ended = new Set(child.lines.filter((line) => line.type === "run_end").map((line) => line.runId as string));
    const started = child.lines.filter((line) => line.type === "run_start").map((line) => line.runId as string);
    const statusOf = store.db.prepare("SELECT status FROM runs WHERE id = ?").pluck();
    for (const runId of ended) expect(statusOf.get(runId)).toBe("final");
    const unfinished = started.filter((runId) => !ended.has(runId));
    expect(unfinished.length).toBeLessThanOrEqual(1);
    const running = store.db
      .prepare("SELECT id FROM runs WHERE session_id = ? AND status = 'running' ORDER BY started_at")
      .pluck()
      .all(SESSION_ID) as string[];
    const newlyRunning = running.filter((runId) => !knownCuts.includes(runId));
    expect(knownCuts.every((runId) => running.includes(runId))).toBe(true);
    expect(newlyRunning.length).toBeLessThanOrEqual(1); // a kill right after startRun may not have been reported yet
    if (unfinished[0]) expect(newlyRunning).toEqual(unfinished);
    const cutRunId = newlyRunning[0];

    // Calls of the cut run whose results were never written (the memory must answer them itself).
    const cutRows = cutRunId
      ? (store.db
          .prepare(
            "SELECT id, run_id, role, content, tool_calls, tool_call_id FROM messages WHERE run_id = ? ORDER BY id",
          )
          .all(cutRunId) as MessageRow[])
      : [];
    const lastCutRow = cutRows.at(-1);
    const dangling =
      lastCutRow?.role === "assistant" && lastCutRow.tool_calls
        ? (JSON.parse(lastCutRow.tool_calls) as Array<{ id: string }>).map((c) => c.id)
        : [];

    // The next run of the session, here, on the same file.
    const lastAnswer = [...committed]
      .reverse()
      .find((line) => line.message.role === "assistant" && !line.message.tool_calls?.length)?.message.content;
    expect(lastAnswer).toMatch(/^Answer to request #\d+/);
    const n = Math.max(...child.lines.filter((line) => line.type === "run_start").map((line) => line.n as number)) + 1;
    const summary = store.latestSummary(SESSION_ID, store.epoch(SESSION_ID));
    expect(summary, "older turns of the long session were folded into a summary").toBeDefined();
    const before = server.requests.length;
    const counter = await createTokenCounter("cl100k_base");
    const model = modelFor(server);
    const memory = createMemory({ store: sqlitePortOf(store), model, counter, budgetTokens: BUDGET_TOKENS });
    const result = await runAgent(
      { model, tools: createToolRegistry([reportTool()]), memory },
      { input: requestText(n), sessionId: SESSION_ID, userId: USER_ID },
    );
    expect(result).toMatchObject({ stopReason: "final", output: answerText(n) });
    expect(statusOf.get(result.runId)).toBe("final");

    const sent = server.requests
      .slice(before)
      .map((request) => request.body)
      .filter((body) => !isSummaryRequest(body));
    expect(sent.map((body) => runPosition(body.messages))).toEqual(
      [0, 1, 2].map((step) => ({ input: requestText(n), step })),
    );
    for (const body of sent) expect(protocolProblems(body.messages), `request for ${requestText(n)}`).toEqual([]);
    const first = (sent[0] as ChatCompletionRequestBody).messages;
    expect(allText(first)).toContain(lastAnswer); // in view, or carried by the summary
    expect(textOf(first[0])).toMatch(
      /\(summary\)\nThe user asks for weekly reports\. Latest answer: Answer to request #\d+/,
    );
    for (const id of dangling) {
      const result = first.find((message) => message.role === "tool" && message.tool_call_id === id);
      expect(result, `a result for the interrupted call ${id}`).toBeDefined();
      expect(JSON.parse(textOf(result))).toMatchObject({ status: "error", error: { type: "execution_error" } });
    }
    return { cutRunId, n };
  } finally {
    store.close();
  }
}

describe("a process killed mid-run (SIGKILL)", () => {
  it("loses nothing it committed, leaves a sound file, and the session goes on — three kills in a row", {
    timeout: 120_000,
  }, async () => {
    const dbPath = tempDatabase();
    const control: KillControl = { holdToolNext: false, hangNext: false, hung: deferred<number>() };
    const server = await startServer({ latencyMs: 20, script: longSessionScript(control) });
    const cuts: string[] = [];
    const startChild = (first: number) => spawnFixture("long-session.ts", [dbPath, server.url, String(first), "1000"]);
    const committedAtLeast = (count: number) => (lines: Line[]) => committedOf(lines).length >= count;

    // Kill 1: while a tool call runs — the assistant's tool_calls are committed, their results never will be.
    const first = startChild(1);
    await first.waitFor(committedAtLeast(30), "30 committed messages");
    control.holdToolNext = true;
    const holding = await first.waitFor((lines) => lines.at(-1)?.type === "holding", "a held tool call");
    await killHard(first);
    const afterFirst = await checkAfterKill(dbPath, first, server, cuts);
    expect(afterFirst.cutRunId).toBe(holding.runId);
    const lastOfCut = committedOf(first.lines)
      .filter((line) => line.runId === holding.runId)
      .at(-1)?.message;
    expect(lastOfCut?.role === "assistant" && lastOfCut.tool_calls?.map((c) => c.id)).toContain(holding.toolCallId);
    cuts.push(afterFirst.cutRunId as string);

    // Kill 2: while the model is answering the step after the tool results.
    const second = startChild(afterFirst.n + 1);
    await second.waitFor(committedAtLeast(20), "20 committed messages");
    control.hung = deferred<number>();
    control.hangNext = true;
    const hungRun = await Promise.race([
      control.hung.promise,
      second.closed.then(() => Promise.reject(new Error(`the child ended early:\n${second.stderr()}`))),
    ]);
    await killHard(second);
    const afterSecond = await checkAfterKill(dbPath, second, server, cuts);
    expect(afterSecond.cutRunId).toBe(
      second.lines.find((line) => line.type === "run_start" && line.n === hungRun)?.runId,
    );
    cuts.push(afterSecond.cutRunId as string);

    // Kill 3: wherever the child happens to be just after it reported a tool result.
    const third = startChild(afterSecond.n + 1);
    await third.waitFor(
      (lines) => committedOf(lines).length >= 20 && (lines.at(-1) as CommittedLine).message?.role === "tool",
      "20 committed messages ending with a tool result",
    );
    await killHard(third);
    const afterThird = await checkAfterKill(dbPath, third, server, cuts);
    if (afterThird.cutRunId) cuts.push(afterThird.cutRunId);

    // Every request of the session, from the children and from here, was a valid conversation
    // that carried each message once.
    const chats = server.requests.map((request) => request.body).filter((body) => !isSummaryRequest(body));
    for (const body of chats) {
      expect(protocolProblems(body.messages), `request for ${runPosition(body.messages).input}`).toEqual([]);
      expect(duplicates(body.messages), `request for ${runPosition(body.messages).input}`).toEqual([]);
    }

    // The long session really was long: older turns were folded into summaries along the way.
    const store = openSqliteStore(dbPath);
    try {
      expect(
        store.db.prepare("SELECT count(*) FROM summaries WHERE session_id = ?").pluck().get(SESSION_ID),
      ).toBeGreaterThan(0);
      const statuses = store.db.prepare("SELECT id, status FROM runs WHERE session_id = ?").all(SESSION_ID) as Array<{
        id: string;
        status: string;
      }>;
      expect(
        statuses
          .filter((run) => run.status === "running")
          .map((run) => run.id)
          .sort(),
      ).toEqual([...cuts].sort());
      expect(statuses.every((run) => run.status === "final" || run.status === "running")).toBe(true);
    } finally {
      store.close();
    }
  });
});

// ---- 2. Many sessions at once ------------------------------------------------------------

const MANY = 20;
const SINGLE_RUNS = 5;
const answerFor = (input: string) =>
  `answer for ${input}: value ${[...input].reduce((sum, char) => sum + char.charCodeAt(0), 0)}`;

const lookupTool: ToolDefinition = {
  name: "lookup",
  description: "Looks a key up.",
  parameters: {
    type: "object",
    properties: { key: { type: "string" } },
    required: ["key"],
    additionalProperties: false,
  },
  handler: (args) => ({ key: (args as { key: string }).key, found: true }),
};

interface Workload {
  store: SqliteStore;
  server: ScriptedModelServer;
  results: RunResult[];
  manyInputs: string[];
  singleInputs: string[];
  /** Most distinct many-* sessions with a model request in flight at one moment. */
  maxManyInFlight: number;
  /** Most requests of the single session in flight at one moment. */
  maxSingleInFlight: number;
  warnings: string[];
}

/**
 * 20 sessions with one message each and 5 messages to one session, all sent at once through the
 * pipeline (stored and enqueued as an inbound handler does; the in-process queue and the worker). The model holds the first request of every many-* session until all 20
 * are in flight together (a barrier: serial sessions could never pass it), then answers.
 */
async function runWorkload(dbPath: string, onRequest: () => void = () => {}): Promise<Workload> {
  const store = openSqliteStore(dbPath);
  const inFlight = new Map<string, number>();
  let maxManyInFlight = 0;
  let maxSingleInFlight = 0;
  let arrived = 0;
  const barrier = deferred();
  const safety = setTimeout(() => barrier.resolve(), 20_000); // only so a failure is reported, not hung
  const server = await startServer({
    script: async (body) => {
      onRequest();
      const { input, step } = runPosition(body.messages);
      const tag = input.split(" ")[0] ?? "";
      inFlight.set(tag, (inFlight.get(tag) ?? 0) + 1);
      maxManyInFlight = Math.max(
        maxManyInFlight,
        [...inFlight].filter(([key, count]) => key.startsWith("many-") && count > 0).length,
      );
      maxSingleInFlight = Math.max(maxSingleInFlight, inFlight.get("single") ?? 0);
      try {
        if (tag.startsWith("many-") && step === 0 && ++arrived === MANY) barrier.resolve();
        if (tag.startsWith("many-") && step === 0) await barrier.promise;
        await new Promise((resolve) => setTimeout(resolve, 20)); // latency, inside the in-flight window
      } finally {
        inFlight.set(tag, (inFlight.get(tag) ?? 1) - 1);
      }
      return step === 0 ? { toolCalls: [call("lookup", { key: input })] } : { content: answerFor(input) };
    },
  });
  const warnings: string[] = [];
  const model = modelFor(server);
  const memory = createMemory({
    store: sqlitePortOf(store),
    model,
    counter: await createTokenCounter("cl100k_base"),
    budgetTokens: 50_000,
    log: { warn: (fields, message) => void warnings.push(`${message} ${JSON.stringify(fields)}`), debug: () => {} },
  });
  const agent: AgentConfig = { model, tools: createToolRegistry([lookupTool]), memory };
  const conversations = await startPipeline({ agent, store: sqlitePortOf(store) });
  const manyInputs = Array.from({ length: MANY }, (_, index) => `many-${index} #1`);
  const singleInputs = Array.from({ length: SINGLE_RUNS }, (_, index) => `single #${index + 1}`);
  try {
    const results = await Promise.all([
      ...manyInputs.map((input, index) => conversations.send({ input, sessionId: `web:many-${index}`, userId: "u" })),
      ...singleInputs.map((input) => conversations.send({ input, sessionId: "web:single", userId: "u" })),
    ]);
    return { store, server, results, manyInputs, singleInputs, maxManyInFlight, maxSingleInFlight, warnings };
  } finally {
    clearTimeout(safety);
    await conversations.close();
  }
}

function checkWorkload(workload: Workload): void {
  const { store, server, results, manyInputs, singleInputs } = workload;
  const inputs = [...manyInputs, ...singleInputs];

  // Every run ended final with its answer; no error anywhere mentions a busy database.
  expect(results.map((result) => [result.stopReason, result.output])).toEqual(
    inputs.map((input) => ["final", answerFor(input)]),
  );
  expect(JSON.stringify(results)).not.toMatch(BUSY);
  const runs = store.db
    .prepare(
      "SELECT id, session_id, status, output, error FROM runs WHERE session_id LIKE 'web:many-%' OR session_id = 'web:single'",
    )
    .all() as Array<{
    id: string;
    status: string;
    output: string;
    error: string | null;
  }>;
  expect(runs).toHaveLength(MANY + SINGLE_RUNS);
  expect(runs.every((run) => run.status === "final" && run.error === null)).toBe(true);
  expect(JSON.stringify(runs)).not.toMatch(BUSY);
  expect(workload.warnings).toEqual([]);

  // No lost message: each run is user, assistant(tool_calls), tool, assistant — in its session, in order.
  const rowsOf = store.db.prepare(
    "SELECT id, run_id, role, content, tool_calls, tool_call_id FROM messages WHERE session_id = ? ORDER BY id",
  );
  const checkTurn = (rows: MessageRow[], runId: string, input: string) => {
    expect(rows.map((row) => row.role)).toEqual(["user", "assistant", "tool", "assistant"]);
    expect(rows.every((row) => row.run_id === runId)).toBe(true);
    expect(rows[0]?.content).toBe(input);
    const calls = JSON.parse(rows[1]?.tool_calls ?? "[]") as Array<{ id: string; function: { name: string } }>;
    expect(calls.map((c) => c.function.name)).toEqual(["lookup"]);
    expect(rows[2]?.tool_call_id).toBe(calls[0]?.id);
    expect(rows[3]?.content).toBe(answerFor(input));
  };
  manyInputs.forEach((input, index) => {
    checkTurn(rowsOf.all(`web:many-${index}`) as MessageRow[], (results[index] as { runId: string }).runId, input);
  });

  // The single session's runs never interleave: each message is stored as it arrives, in the order
  // they were sent, and each run's own messages come after everything of the run before it.
  const singleRows = rowsOf.all("web:single") as MessageRow[];
  expect(singleRows).toHaveLength(4 * SINGLE_RUNS);
  const singleRuns = singleInputs.map((_, index) => (results[MANY + index] as { runId: string }).runId);
  expect(singleRows.filter((row) => row.role === "user").map((row) => row.content)).toEqual(singleInputs);
  singleInputs.forEach((input, index) => {
    const ofRun = singleRows.filter((row) => row.run_id === singleRuns[index]);
    checkTurn(ofRun, singleRuns[index] as string, input);
    const before = singleRows.filter((row) => row.run_id === singleRuns[index - 1]);
    if (before.length > 0)
      expect(Math.min(...ofRun.slice(1).map((row) => row.id))).toBeGreaterThan(
        Math.max(...before.map((row) => row.id)),
      );
  });
  expect(workload.maxSingleInFlight).toBe(1);

  // Every request the model saw is a valid conversation, with no duplicated or invented results.
  const chats = server.requests.map((request) => request.body).filter((body) => !isSummaryRequest(body));
  expect(chats).toHaveLength(2 * (MANY + SINGLE_RUNS));
  for (const body of chats) {
    expect(protocolProblems(body.messages), `request for ${runPosition(body.messages).input}`).toEqual([]);
    expect(duplicates(body.messages), `request for ${runPosition(body.messages).input}`).toEqual([]);
    expect(allText(body.messages)).not.toContain("was not run to the end");
  }
  // Each later run of the single session starts from the previous run's answer.
  singleInputs.forEach((input, index) => {
    const firstRequest = chats.find((body) => {
      const position = runPosition(body.messages);
      return position.input === input && position.step === 0;
    });
    expect(firstRequest, `first request of ${input}`).toBeDefined();
    const messages = (firstRequest as ChatCompletionRequestBody).messages;
    const earlier = singleInputs.slice(0, index);
    expect(messages.filter((message) => message.role === "user").map(textOf)).toEqual([...earlier, input]);
    const previous = singleInputs[index - 1];
    if (previous)
      expect(messages.filter((message) => message.role === "assistant").map(textOf)).toContain(answerFor(previous));
  });

  // The 20 sessions really ran side by side: all their first requests were in flight at once.
  expect(workload.maxManyInFlight).toBe(MANY);
}

describe("many sessions at once (the pipeline over SQLite memory)", () => {
  it("runs 20 sessions concurrently and 5 messages to one session in turn, losing and mixing nothing", {
    timeout: 60_000,
  }, async () => {
    const workload = await runWorkload(tempDatabase());
    try {
      checkWorkload(workload);
      expect(workload.store.db.pragma("integrity_check", { simple: true })).toBe("ok");
    } finally {
      workload.store.close();
    }
  });

  it("surfaces no SQLITE_BUSY while another process holds the write lock over and over (busy_timeout)", {
    timeout: 90_000,
  }, async () => {
    const dbPath = tempDatabase();
    openSqliteStore(dbPath).close(); // create the schema before two processes race to migrate it
    const writer = spawnFixture("busy-writer.ts", [dbPath, "10", "5"]);
    await writer.waitFor((lines) => lines.some((line) => line.type === "tx"), "the writer's first transaction");

    // A connection without busy_timeout sees the lock: the contention is real.
    const probe = new Database(dbPath);
    probe.pragma("busy_timeout = 0");
    const lockedByWriter = (): boolean => {
      try {
        probe.exec("BEGIN IMMEDIATE");
        probe.exec("ROLLBACK");
        return false;
      } catch (error) {
        if ((error as { code?: string }).code === "SQLITE_BUSY") return true;
        throw error;
      }
    };
    try {
      while (!lockedByWriter()) await new Promise((resolve) => setImmediate(resolve));
      const probes: boolean[] = [];
      const workload = await runWorkload(dbPath, () => probes.push(lockedByWriter()));
      try {
        expect(probes.some(Boolean)).toBe(true); // the writer held the lock while the runs wrote
        checkWorkload(workload);
      } finally {
        workload.store.close();
      }
    } finally {
      probe.close();
    }

    writer.process.stdin.write("stop\n");
    const done = await writer.waitFor(
      (lines) => lines.some((line) => line.type === "done" || line.type === "error"),
      "the writer to stop",
    );
    expect(done, writer.stderr()).toMatchObject({ type: "done" });
    expect((await writer.closed).code).toBe(0);
    expect(writer.stderr()).not.toMatch(BUSY);

    // The writer's rows are all there too.
    const transactions = writer.lines.filter((line) => line.type === "tx") as Array<Line & { ids: [number, number] }>;
    expect(transactions.length).toBe(done.transactions);
    const store = openSqliteStore(dbPath);
    try {
      expect(store.db.pragma("integrity_check", { simple: true })).toBe("ok");
      const ids = store.db
        .prepare("SELECT id FROM messages WHERE session_id = 'web:writer' ORDER BY id")
        .pluck()
        .all() as number[];
      expect(ids).toHaveLength(5 * transactions.length);
      for (const {
        ids: [low, high],
      } of transactions)
        expect(ids.filter((id) => id >= low && id <= high)).toHaveLength(5);
    } finally {
      store.close();
    }
  });
});
