/**
 * Conversations spread over worker threads, for a bot with more work than one core can do. Each
 * session belongs to one worker (by a hash of its key), which runs the agent for it with its own
 * store connection, model client and platform client: one session's turns still run one at a time,
 * in order, while different sessions run on different cores. The adapter's thread only receives
 * events, claims them and passes them on; the store (SQLite, WAL) is what the threads share.
 */
import { Worker, parentPort } from "node:worker_threads";
import type { DecisionOutcome } from "../agent/approvals.js";
import type { ConversationService, Conversations } from "../conversations/conversations.js";
import { configurationError, GlassboxError } from "../agent/errors.js";
import type { RunResult } from "../agent/run.js";
import { createLogger, type Logger } from "../logger.js";

/** The worker a session belongs to: FNV-1a of its key, so the same session always lands on the same worker. */
export function shardOf(sessionId: string, count: number): number {
  let hash = 0x811c9dc5;
  for (let index = 0; index < sessionId.length; index++) {
    hash ^= sessionId.charCodeAt(index);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0) % count;
}

/** What every worker is given, besides what its adapter adds. */
export interface ShardData {
  shard: number;
  shards: number;
  /** The adapter's log level: a worker formats no line the adapter would drop. */
  logLevel: string;
}

type Method = "send" | "decide" | "expireApprovals" | "stop" | "busy" | "idle" | "close";
interface Call {
  id: number;
  method: Method;
  argument?: unknown;
}
type FromWorker =
  | { kind: "ready" }
  | { kind: "failed"; message: string; configuration: boolean }
  | { kind: "log"; line: string }
  | { kind: "reply"; id: number; value?: unknown; error?: string };

export interface ConversationWorkers extends ConversationService {
  /** Waits for every run to finish, then closes the workers' stores and ends the threads. */
  close(): Promise<void>;
}

export async function startConversationWorkers(options: {
  /** The worker's module (it calls serveConversations). */
  entry: URL;
  count: number;
  /** Cloned into each worker, with its ShardData. */
  data: object;
  log: Logger;
  /** An approval's session, so a click goes to the worker that runs it. */
  sessionOfApproval: (approvalId: string) => Promise<string | undefined>;
  /** A worker that ended on its own (an uncaught error): its sessions can no longer run. */
  onExit?: (shard: number, exitCode: number) => void;
}): Promise<ConversationWorkers> {
  const { count, log } = options;
  let closing = false;
  const started = await Promise.allSettled(
    Array.from({ length: count }, (_, shard) =>
      startWorker(
        options.entry,
        { ...options.data, shard, shards: count, logLevel: log.level } satisfies ShardData,
        log.child({ worker: shard }),
        (code) => {
          if (!closing) options.onExit?.(shard, code);
        },
      ),
    ),
  );
  const workers = started.flatMap((result) => (result.status === "fulfilled" ? [result.value] : []));
  const failure = started.find((result) => result.status === "rejected");
  if (failure) {
    closing = true;
    await Promise.all(workers.map((worker) => worker.thread.terminate()));
    throw failure.reason;
  }
  const of = (sessionId: string) => workers[shardOf(sessionId, count)] as WorkerHandle;
  const everyWorker = <T>(method: Method, argument?: unknown) =>
    Promise.all(workers.map((worker) => worker.call(method, argument) as Promise<T>));

  return {
    send: (task) => of(task.sessionId).call("send", task) as Promise<RunResult>,
    async decide(decision) {
      // An approval that is not in the store is unknown to every worker; any of them says so.
      const sessionId = await options.sessionOfApproval(decision.approvalId);
      return (sessionId ? of(sessionId) : (workers[0] as WorkerHandle)).call(
        "decide",
        decision,
      ) as Promise<DecisionOutcome>;
    },
    expireApprovals: async (now) =>
      (await everyWorker<number>("expireApprovals", now)).reduce((sum, expired) => sum + expired, 0),
    stop: (sessionId) => of(sessionId).call("stop", sessionId) as Promise<boolean>,
    busy: (sessionId) => of(sessionId).call("busy", sessionId) as Promise<boolean>,
    async idle() {
      await everyWorker("idle");
    },
    async close() {
      closing = true;
      await everyWorker("close");
      await Promise.all(workers.map((worker) => worker.thread.terminate()));
    },
  };
}

interface WorkerHandle {
  thread: Worker;
  call(method: Method, argument?: unknown): Promise<unknown>;
}

/** Starts one worker and resolves once it has built its conversations (or rejects with why it could not). */
function startWorker(entry: URL, data: object, log: Logger, onExit: (code: number) => void): Promise<WorkerHandle> {
  const thread = launch(entry, data);
  const pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  let nextId = 0;
  let ready = false;
  let ended: Error | undefined;
  const handle: WorkerHandle = {
    thread,
    call(method, argument) {
      if (ended) return Promise.reject(ended);
      const id = nextId++;
      return new Promise((resolve, reject) => {
        pending.set(id, { resolve, reject });
        thread.postMessage({ id, method, argument } satisfies Call);
      });
    },
  };
  return new Promise((resolve, reject) => {
    thread.on("message", (message: FromWorker) => {
      if (message.kind === "log") return relayLog(log, message.line);
      if (message.kind === "ready") {
        ready = true;
        return resolve(handle);
      }
      if (message.kind === "failed") {
        reject(message.configuration ? configurationError(message.message) : new Error(message.message));
        return void thread.terminate();
      }
      const waiting = pending.get(message.id);
      pending.delete(message.id);
      if (message.error === undefined) waiting?.resolve(message.value);
      else waiting?.reject(new Error(message.error));
    });
    thread.on("error", (error) => log.error({ error: error.message }, "a conversation worker failed"));
    thread.on("exit", (code) => {
      ended = new Error(`the worker running this conversation stopped (exit code ${code})`);
      for (const waiting of pending.values()) waiting.reject(ended);
      pending.clear();
      reject(ended);
      if (ready) onExit(code);
    });
  });
}

/** From source (tests, `tsx`), the worker loads its TypeScript module through tsx, as this thread did. */
function launch(entry: URL, workerData: object): Worker {
  if (!entry.pathname.endsWith(".ts")) return new Worker(entry, { workerData });
  const api = JSON.stringify(import.meta.resolve("tsx/esm/api"));
  const module = JSON.stringify(entry.href);
  return new Worker(`import(${api}).then(({ tsImport }) => tsImport(${module}, ${module}))`, {
    eval: true,
    workerData,
  });
}

/** A worker's log line, written by the adapter's logger (a test's, or stderr), marked with the worker. */
function relayLog(log: Logger, line: string): void {
  const {
    level,
    msg,
    time: _time,
    pid: _pid,
    hostname: _hostname,
    name: _name,
    ...fields
  } = JSON.parse(line) as Record<string, unknown> & { level: number; msg?: string };
  const label = log.levels.labels[level] as "info" | "warn" | "error" | "fatal" | "debug" | "trace" | undefined;
  log[label ?? "info"](fields, msg ?? "");
}

// ---- in the worker

/** The worker's logger: its lines go to the adapter's thread, which writes them. */
export function workerLogger(level: string): Logger {
  const port = workerPort();
  return createLogger({
    level,
    destination: { write: (line: string) => port.postMessage({ kind: "log", line } satisfies FromWorker) },
  });
}

/** Answers the adapter's calls with these conversations; `close` waits for their runs, then `closeAll`. */
export function serveConversations(conversations: Conversations, closeAll: () => Promise<void>): void {
  const port = workerPort();
  const methods: Record<Method, (argument: never) => unknown> = {
    send: (task: Parameters<Conversations["send"]>[0]) => conversations.send(task),
    decide: async (decision: Parameters<Conversations["decide"]>[0]) => {
      // The resumed run goes on here; the caller only needs the outcome.
      const { resumed: _resumed, ...outcome } = await conversations.decide(decision);
      return outcome;
    },
    expireApprovals: (now?: Date) => conversations.expireApprovals(now),
    stop: (sessionId: string) => conversations.stop(sessionId),
    busy: (sessionId: string) => conversations.busy(sessionId),
    idle: () => conversations.idle(),
    close: async () => {
      await conversations.idle();
      await closeAll();
    },
  };
  port.on("message", async ({ id, method, argument }: Call) => {
    try {
      const value = await methods[method](argument as never);
      port.postMessage({ kind: "reply", id, value } satisfies FromWorker);
    } catch (error) {
      port.postMessage({ kind: "reply", id, error: (error as Error).message } satisfies FromWorker);
    }
  });
  port.postMessage({ kind: "ready" } satisfies FromWorker);
}

/** The worker could not build its conversations: the adapter's start fails with this sentence. */
export function reportStartFailure(error: unknown): void {
  const configuration = error instanceof GlassboxError && error.code === "configuration";
  workerPort().postMessage({
    kind: "failed",
    message: (error as Error).message ?? String(error),
    configuration,
  } satisfies FromWorker);
}

function workerPort() {
  if (!parentPort) throw new Error("this runs in a worker thread only");
  return parentPort;
}
