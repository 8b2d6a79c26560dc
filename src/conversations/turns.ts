/**
 * The turns ingress enqueues, and the two transactions that enqueue them. A turn carries ids (the
 * content is in the store, committed in the same transaction) and, for a message, its files'
 * references, never their bytes or a token; so any worker can run it:
 *
 * - `message`: an accepted event. Its run is recorded `accepted`, its message stored in the
 *   session; the worker runs the run (RunRecord by `runId`) on the session's history, with the
 *   files it downloads from `files` (see turn-files.ts).
 * - `resume`: a click that settled the last pending approval of a paused run; the worker resumes
 *   the run (or the run it works for) with the stored decisions.
 * - `reset`: a new start asked for (Discord's /reset), in its place among the conversation's turns;
 *   the worker resets the session (later runs see none of its earlier messages).
 *
 * An erasure takes the turns of what it removed with it (eraseWithTurns).
 */
import { randomUUID } from "node:crypto";
import type {
  AcceptOutcome,
  DecisionOutcome,
  DecisionRequest,
  EraseTarget,
  ErasureReceipt,
  MessageEntry,
  RunRecord,
  StorePort,
} from "../store/port.js";
import type { RunQueue, Turn } from "../queue/types.js";
import { isTurnFile, storedTextOf, type TurnFile } from "./turn-files.js";
import type { TokenCounter } from "../agent/tokens.js";

export type TurnWork =
  | { kind: "message"; runId: string; sessionId: string; eventIds: string[]; files?: TurnFile[] }
  | { kind: "resume"; runId: string; sessionId: string; approvalId: string }
  | { kind: "reset"; sessionId: string; eventIds: string[] };

export const newRunId = (): string => `run_${randomUUID()}`;

/** A message's turn: keyed by its first platform event id (the run's id when it has none). */
export function messageTurn(run: RunRecord, eventIds: string[], files: TurnFile[] = []): Turn {
  const work: TurnWork = {
    kind: "message",
    runId: run.runId,
    sessionId: run.sessionId,
    eventIds,
    ...(files.length ? { files } : {}),
  };
  return { conversation: run.sessionId, key: eventIds[0] ?? run.runId, payload: work };
}

/** A resume's turn, on the paused run's conversation, keyed `resume:<runId>`. */
export function resumeTurn(approval: { runId: string; sessionId: string; id: string }): Turn {
  const work: TurnWork = {
    kind: "resume",
    runId: approval.runId,
    sessionId: approval.sessionId,
    approvalId: approval.id,
  };
  return { conversation: approval.sessionId, key: `resume:${approval.runId}`, payload: work };
}

/** A reset's turn, keyed by the platform event that asked for it. */
export function resetTurn(sessionId: string, eventId: string): Turn {
  const work: TurnWork = { kind: "reset", sessionId, eventIds: [eventId] };
  return { conversation: sessionId, key: eventId, payload: work };
}

/** What a worker is asked to do by a turn; a turn ingress did not make is refused in one sentence. */
export function workOf(turn: Turn): TurnWork {
  const work = turn.payload as Partial<TurnWork>;
  const ours = typeof work.sessionId === "string" && work.sessionId === turn.conversation;
  const ids = ours && "runId" in work && typeof work.runId === "string";
  if (ids && work.kind === "message" && Array.isArray(work.eventIds)) {
    // A file reference that is not one ingress made is left out; the message still runs.
    const files = "files" in work && Array.isArray(work.files) ? work.files.filter(isTurnFile) : [];
    const { files: _given, ...message } = work as Extract<TurnWork, { kind: "message" }>;
    return { ...message, ...(files.length ? { files } : {}) };
  }
  if (ids && work.kind === "resume" && typeof work.approvalId === "string") return work as TurnWork;
  if (ours && work.kind === "reset" && Array.isArray(work.eventIds)) return work as TurnWork;
  throw new Error(`turn ${turn.key} is not a message, a resume or a reset of its conversation`);
}

/** The parts of the store and the queue that ingress uses: nothing that runs a model. */
export type IngressStore<Transaction> = Pick<
  StorePort<Transaction>,
  | "acceptEvent"
  | "decideApproval"
  | "approval"
  | "attachApprovalMessage"
  | "claim"
  | "requestCancel"
  | "sessionOwner"
  | "erase"
>;
export type IngressQueue<Transaction> = Pick<RunQueue<Transaction>, "enqueueIn" | "forgetIn">;

/**
 * Claims the event ids, records the run, stores its message and enqueues its turn, in one
 * transaction: a duplicate (any id claimed before) writes and enqueues nothing.
 */
export function acceptMessage<Transaction>(
  store: IngressStore<Transaction>,
  queue: IngressQueue<Transaction>,
  acceptance: { eventIds: string[]; run: RunRecord; message: MessageEntry; sessionOwner?: string; files?: TurnFile[] },
): Promise<AcceptOutcome> {
  const { files, ...accepted } = acceptance;
  const turn = messageTurn(acceptance.run, acceptance.eventIds, files);
  return store.acceptEvent(accepted, (transaction) => queue.enqueueIn(transaction, turn));
}

/** A person's message as a platform's inbound handler has it: its text, who sent it where, its files. */
export interface InboundText {
  eventIds: string[];
  sessionId: string;
  userId: string;
  input: string;
  files?: TurnFile[];
  /** The user a new session is kept for (the HTTP API's token), checked against the session's. */
  sessionOwner?: string;
  /** The schedule whose tick this is (schedules.ts), recorded with the run. */
  scheduleId?: string;
}

/**
 * Accepts a person's message: a new run for it, the message stored as memory will count it (the
 * files named in it), and its turn, as acceptMessage does. The run's id comes back with the outcome.
 */
export async function acceptInboundText<Transaction>(
  store: IngressStore<Transaction>,
  queue: IngressQueue<Transaction>,
  counter: Pick<TokenCounter, "message">,
  text: InboundText,
): Promise<{ outcome: AcceptOutcome; runId: string }> {
  const { eventIds, sessionId, userId, input, files = [], sessionOwner, scheduleId } = text;
  const run = { runId: newRunId(), sessionId, userId, input, ...(scheduleId ? { scheduleId } : {}) };
  const entry = { role: "user" as const, content: storedTextOf(input, files) };
  const outcome = await acceptMessage(store, queue, {
    eventIds,
    run,
    message: { message: entry, tokens: counter.message(entry) },
    ...(files.length ? { files } : {}),
    ...(sessionOwner ? { sessionOwner } : {}),
  });
  return { outcome, runId: run.runId };
}

/** Claims the event and enqueues the session's reset, in one transaction; false for a duplicate. */
export async function acceptReset<Transaction>(
  store: IngressStore<Transaction>,
  queue: IngressQueue<Transaction>,
  sessionId: string,
  eventId: string,
): Promise<boolean> {
  const outcome = await store.acceptEvent({ eventIds: [eventId] }, (transaction) =>
    queue.enqueueIn(transaction, resetTurn(sessionId, eventId)),
  );
  return outcome.kind === "accepted";
}

/** Decides a click; the one decision that makes its run ready enqueues the resume, in the decision's transaction. */
export function decideClick<Transaction>(
  store: IngressStore<Transaction>,
  queue: IngressQueue<Transaction>,
  request: DecisionRequest,
): Promise<DecisionOutcome> {
  return store.decideApproval(request, (transaction, decided) => queue.enqueueIn(transaction, resumeTurn(decided)));
}

/**
 * An erasure of the store, and of the run queue's turns of what went (the conversations removed
 * whole, and the removed runs' messages and resumes), in one transaction where the queue shares the
 * store's database; the receipt counts them as `queued_turns`.
 */
export function eraseWithTurns<Transaction>(
  store: Pick<StorePort<Transaction>, "erase">,
  queue: Pick<RunQueue<Transaction>, "forgetIn">,
  target: EraseTarget,
  by: string,
): Promise<ErasureReceipt> {
  return store.erase(target, by, async (transaction, erased) => ({
    queued_turns: await queue.forgetIn(transaction, {
      conversations: erased.conversations,
      payload: { field: "runId", values: erased.runs },
    }),
  }));
}
