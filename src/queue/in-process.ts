/**
 * The run queue in this process (the default, beside SQLite): each conversation has a line of turns;
 * a conversation whose first turn can run joins one line of ready conversations, and a worker with a
 * free slot takes the conversation at its head. So a conversation runs one turn at a time, in
 * arrival order, and a busy conversation never holds up another (today's session queue and run slots,
 * behind the port). Nothing here outlives the process: what must survive a restart is in the store.
 */
import { randomUUID } from "node:crypto";
import { DEFAULT_RETRY_DELAYS_MS, runTurn } from "./run-turn.js";
import {
  checkTurn,
  type Enqueued,
  type QueueWorker,
  type RunQueue,
  type StopCause,
  type Turn,
  type TurnHandler,
  type TurnSelection,
  type WorkOptions,
} from "./types.js";

/** The in-process queue's view of the caller's transaction: work to do once it has committed. */
export interface LocalTransaction {
  afterCommit(callback: () => void): void;
}

export interface InProcessQueueOptions {
  /** Waits between attempts of a handler that throws (default DEFAULT_RETRY_DELAYS_MS). */
  retryDelaysMs?: readonly number[];
}

interface LocalWorker {
  id: string;
  handler: TurnHandler;
  options: WorkOptions;
  running: Set<Promise<void>>;
  /** Settles the worker's `stopped` promise. */
  finish: (cause: StopCause) => void;
}

/** The in-process queue, which can also say when it has nothing left to run (tests, a graceful stop). */
export interface InProcessRunQueue extends RunQueue<LocalTransaction> {
  /** Resolves once no turn waits or runs (including turns enqueued while it waits). */
  idle(): Promise<void>;
}

export function createInProcessRunQueue(options: InProcessQueueOptions = {}): InProcessRunQueue {
  const retryDelaysMs = options.retryDelaysMs ?? DEFAULT_RETRY_DELAYS_MS;
  /** Each conversation's waiting turns, oldest first (only conversations with some). */
  const lines = new Map<string, Turn[]>();
  /** Conversations whose first waiting turn may start, in the order they became ready. */
  const ready: string[] = [];
  const runningConversations = new Set<string>();
  /** Keys of turns waiting or running: a second enqueue of one is a no-op. */
  const keys = new Set<string>();
  const workers: LocalWorker[] = [];
  let nextWorker = 0;

  function enqueue(turn: Turn): Enqueued {
    checkTurn(turn);
    if (keys.has(turn.key)) return { enqueued: false };
    keys.add(turn.key);
    const line = lines.get(turn.conversation);
    if (line) line.push(turn);
    else {
      lines.set(turn.conversation, [turn]);
      if (!runningConversations.has(turn.conversation)) ready.push(turn.conversation);
    }
    dispatch();
    return { enqueued: true };
  }

  /** Forgets the waiting turns `selection` names; a running one is its worker's (see RunQueue.forgetIn). */
  function forget({ conversations, payload }: TurnSelection): number {
    const gone = new Set(conversations);
    const values = new Set(payload?.values ?? []);
    const named = (turn: Turn) => {
      const value = payload ? turn.payload[payload.field] : undefined;
      return gone.has(turn.conversation) || (typeof value === "string" && values.has(value));
    };
    let forgotten = 0;
    for (const [conversation, line] of lines) {
      const kept = line.filter((turn) => !named(turn));
      for (const turn of line) if (named(turn)) keys.delete(turn.key);
      forgotten += line.length - kept.length;
      if (kept.length > 0) lines.set(conversation, kept);
      else {
        lines.delete(conversation);
        const waiting = ready.indexOf(conversation);
        if (waiting >= 0) ready.splice(waiting, 1);
      }
    }
    return forgotten;
  }

  /** A worker with a free slot, taking turns among them so that none sits idle while another is full. */
  function freeWorker(): LocalWorker | undefined {
    for (let tried = 0; tried < workers.length; tried++) {
      const worker = workers[(nextWorker + tried) % workers.length] as LocalWorker;
      if (worker.running.size < worker.options.concurrency) {
        nextWorker = (nextWorker + tried + 1) % workers.length;
        return worker;
      }
    }
    return undefined;
  }

  function dispatch(): void {
    for (let worker = freeWorker(); worker && ready.length > 0; worker = freeWorker()) {
      const conversation = ready.shift() as string;
      const line = lines.get(conversation) as Turn[];
      const turn = line.shift() as Turn;
      if (line.length === 0) lines.delete(conversation);
      runningConversations.add(conversation);
      start(worker, turn);
    }
  }

  function start(worker: LocalWorker, turn: Turn): void {
    const context = { signal: new AbortController().signal, delivery: 1, workerId: worker.id };
    const onError = worker.options.onError ?? (() => {});
    const running: Promise<void> = runTurn(worker.handler, turn, context, retryDelaysMs, onError).then(() => {
      worker.running.delete(running);
      keys.delete(turn.key);
      runningConversations.delete(turn.conversation);
      // The conversation's next turn goes to the back of the ready line, behind those already waiting.
      if (lines.has(turn.conversation)) ready.push(turn.conversation);
      dispatch();
    });
    worker.running.add(running);
  }

  const runningTurns = () => workers.flatMap((worker) => [...worker.running]);

  async function stopWorker(worker: LocalWorker): Promise<void> {
    const index = workers.indexOf(worker);
    if (index >= 0) workers.splice(index, 1);
    while (worker.running.size > 0) await Promise.all(worker.running);
    worker.finish("stopped");
  }

  return {
    async enqueue(turn) {
      return enqueue(turn);
    },
    async enqueueIn(transaction, turn) {
      checkTurn(turn);
      transaction.afterCommit(() => void enqueue(turn));
    },
    async forgetIn(_transaction, selection) {
      return forget(selection);
    },
    async work(handler, workOptions) {
      if (!Number.isInteger(workOptions.concurrency) || workOptions.concurrency < 1)
        throw new Error("a worker's concurrency must be a whole number of at least 1");
      let finish: (cause: StopCause) => void = () => {};
      const stopped = new Promise<StopCause>((resolve) => (finish = resolve));
      const worker: LocalWorker = {
        id: `local-${randomUUID()}`,
        handler,
        options: workOptions,
        running: new Set(),
        finish,
      };
      workers.push(worker);
      dispatch();
      const queueWorker: QueueWorker = { id: worker.id, stopped, stop: () => stopWorker(worker) };
      return queueWorker;
    },
    async idle() {
      // A finishing turn starts its conversation's next one before its own promise settles.
      for (let running = runningTurns(); running.length > 0; running = runningTurns())
        await Promise.allSettled(running);
    },
    // Turns never leave this process: nothing to reach.
    ping: async () => {},
    async close() {
      await Promise.all([...workers].map(stopWorker));
    },
  };
}
