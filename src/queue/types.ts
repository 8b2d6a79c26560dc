/**
 * The run queue port: "run one turn of conversation K". Turns of one conversation run one at a time,
 * in the order they were enqueued; turns of different conversations run side by side, and a busy
 * conversation never holds up another. A turn ends when its handler settles (a run that pauses for an
 * approval ends its turn there; the click enqueues the resume as a new turn of the same conversation).
 *
 * Plain data in, plain data out: a turn carries ids, not content (content lives in the store), so
 * the same turn can be stored by a database queue and run by any worker process.
 *
 * Two implementations: in process (the default, one process) and PostgreSQL (a table of turns, the
 * head of each conversation claimed by one worker at a time; worker liveness so that a killed
 * worker's conversations are taken over).
 */

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

export interface Turn {
  /** The conversation (session key) the turn belongs to: its turns run one at a time, in order. */
  conversation: string;
  /**
   * The turn's own id (the platform event id, or `resume:<runId>`). Enqueueing a key that is still
   * waiting or running is a no-op; once that turn has finished the key may be used again, so lasting
   * deduplication of platform events is the store's event claim, made in the same transaction.
   */
  key: string;
  /** What the handler needs to find the work in the store (ids), at most MAX_PAYLOAD_BYTES of JSON. */
  payload: { [key: string]: JsonValue };
}

export interface TurnContext {
  /**
   * Aborts when this worker may no longer run the turn (it lost its liveness lease, so another worker
   * takes the turn over). A handler stops at its next step; its turn will run again elsewhere.
   */
  signal: AbortSignal;
  /** 1 on the first delivery; more when a worker died during an earlier one (handlers must be idempotent). */
  delivery: number;
  /** The worker running the turn. */
  workerId: string;
}

/** Runs one turn. It should not throw (the engine turns failures into a run's end); a throw is retried in place. */
export type TurnHandler = (turn: Turn, context: TurnContext) => Promise<void>;

export interface Enqueued {
  /** False when a turn with the same key was already waiting or running: nothing was added. */
  enqueued: boolean;
}

export interface WorkOptions {
  /** Turns this worker runs at once (each of a different conversation). */
  concurrency: number;
  /** A turn whose handler threw on every attempt: it is given up and reported here. */
  onError?: (error: unknown, turn: Turn) => void;
}

/**
 * Why a worker stopped: "stopped" (its stop() was called), "lease_lost" (the others declared it
 * dead, or it could not reach the database for as long: its turns are someone else's now).
 */
export type StopCause = "stopped" | "lease_lost";

export interface QueueWorker {
  readonly id: string;
  /** Takes no new turns and resolves once the running ones have settled. */
  stop(): Promise<void>;
  /** Settles once the worker has stopped; any cause but "stopped" means its process should exit and be restarted. */
  readonly stopped: Promise<StopCause>;
}

/** Turns to forget: those of `conversations`, and those whose payload's `field` holds one of `values`. */
export interface TurnSelection {
  conversations: string[];
  payload?: { field: string; values: string[] };
}

/**
 * `Transaction` is the caller's open transaction as its store knows it (a `pg` client inside BEGIN
 * for PostgreSQL; an after-commit hook for the in-process queue beside SQLite).
 */
export interface RunQueue<Transaction> {
  enqueue(turn: Turn): Promise<Enqueued>;
  /**
   * Enqueues as part of the caller's transaction, so that the event claim, the message and the turn
   * are accepted together or not at all: the turn exists if and only if the transaction commits.
   */
  enqueueIn(transaction: Transaction, turn: Turn): Promise<void>;
  /**
   * Forgets the selected turns (an erasure), as part of the caller's transaction; resolves with how
   * many. Waiting turns go (and, on PostgreSQL, given-up ones). A turn being run stays with its worker,
   * which completes it; on PostgreSQL its row goes when its whole conversation does (a dead worker's
   * row would otherwise wait for the sweep), never alone, which would let the conversation's next turn
   * start beside it. In process, where turns are memory, they are forgotten at once (the store calls
   * this once its erasure has committed).
   */
  forgetIn(transaction: Transaction, selection: TurnSelection): Promise<number>;
  /** Starts running turns in this process with `handler`. */
  work(handler: TurnHandler, options: WorkOptions): Promise<QueueWorker>;
  /** Resolves while turns can be enqueued and claimed (readiness); rejects when they cannot. */
  ping(): Promise<void>;
  /** Stops this process's workers and lets go of the queue's resources. */
  close(): Promise<void>;
}

export const MAX_PAYLOAD_BYTES = 16_384;
export const MAX_KEY_LENGTH = 1_000;

/** A caller's mistake, said once: a turn must name its conversation and key, and carry small JSON. */
export function checkTurn(turn: Turn): void {
  if (
    typeof turn.conversation !== "string" ||
    turn.conversation.length === 0 ||
    turn.conversation.length > MAX_KEY_LENGTH
  ) {
    throw new Error(`a turn needs a conversation key of 1 to ${MAX_KEY_LENGTH} characters`);
  }
  if (typeof turn.key !== "string" || turn.key.length === 0 || turn.key.length > MAX_KEY_LENGTH) {
    throw new Error(`a turn needs a key (its event id) of 1 to ${MAX_KEY_LENGTH} characters`);
  }
  if (Buffer.byteLength(JSON.stringify(turn.payload ?? null)) > MAX_PAYLOAD_BYTES) {
    throw new Error(
      `a turn's payload must be at most ${MAX_PAYLOAD_BYTES} bytes of JSON; keep content in the store and pass its ids`,
    );
  }
}
