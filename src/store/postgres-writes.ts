/**
 * The PostgreSQL store's transactional writes: a run's writes, in order, in one transaction; an
 * event's acceptance (session owner checked under the session's row lock, claims, the accepted run,
 * its message, and whatever the caller adds, such as the run queue's job) in another. History
 * versions are noted only once a transaction has committed. Writes whose answers nothing waits for
 * are sent one behind the other, so a step's writes and their COMMIT travel together.
 */
import type pg from "pg";
import type { AcceptOutcome, EventAcceptance, MessageEntry, RecordOutcome, RunRecord, RunWrite } from "./port-data.js";
import { answeredLater, inTransaction, type PostgresTransaction } from "./postgres-client.js";
import { openApprovals } from "./postgres-approvals.js";
import { claimedAny, claimIn, isClaimedAlready, sendClaims } from "./postgres-gates.js";
import { insertMessages, type HistoryVersions, type SessionWrite } from "./postgres-messages.js";
import {
  acceptRun,
  endRun,
  resumeRun,
  sessionOwnerIn,
  sendAcceptedStart,
  startRun,
  takeOverRun,
} from "./postgres-runs.js";
import type { PostgresSteps } from "./postgres-steps.js";

export function createPostgresWrites(pool: pg.Pool, steps: PostgresSteps, versions: HistoryVersions) {
  /** Sends the writes in order; waits only where a write decides on an answer (a run's start, approvals). */
  async function apply(
    transaction: PostgresTransaction,
    writes: RunWrite[],
    sessions: SessionWrite[],
    notAccepted?: string,
  ) {
    const outcome: RecordOutcome = { messageIds: [], startedRuns: [], approvals: [] };
    const messageIds: Array<Promise<number[]>> = [];
    const starts = new Set<string>();
    let pricedWith: string | undefined;
    for (const [index, write] of writes.entries()) {
      switch (write.kind) {
        case "start_run":
          // Memory and the trace each start the run: the second start finds it started.
          if (starts.has(write.run.runId)) break;
          starts.add(write.run.runId);
          if (await startRun(transaction, write.run, write.run.runId === notAccepted)) {
            outcome.startedRuns.push(write.run.runId);
            steps.startedRun(write.run.runId);
          }
          break;
        case "resume_run":
          await resumeRun(transaction, write.runId);
          break;
        case "take_over_run":
          if (await takeOverRun(transaction, write.runId)) outcome.startedRuns.push(write.runId);
          break;
        case "messages":
          messageIds.push(
            insertMessages(transaction, write.sessionId, write.runId, write.entries).then(({ ids, session }) => {
              sessions.push(session);
              return ids;
            }),
          );
          break;
        case "step":
          await steps.loadParts(transaction, write.step.runId);
          steps.appendStep(transaction, write.step);
          break;
        case "tool_calls":
          steps.addToolCalls(transaction, write.runId, write.step, write.records);
          break;
        case "note":
          steps.addNote(transaction, write.runId, write.step, write.text);
          break;
        case "end_run": {
          // The trace prices the run right after its end: both in one statement.
          const next = writes[index + 1];
          pricedWith = next?.kind === "price_run" && next.runId === write.outcome.runId ? next.runId : undefined;
          endRun(transaction, write.outcome, pricedWith !== undefined);
          break;
        }
        case "price_run":
          if (pricedWith !== write.runId) steps.priceRun(transaction, write.runId);
          pricedWith = undefined;
          break;
        case "open_approvals":
          outcome.approvals.push(...(await openApprovals(transaction, write.requests, write.ttlSeconds, write.now)));
          break;
      }
    }
    return answeredLater(Promise.all(messageIds).then((ids) => ({ ...outcome, messageIds: ids })));
  }

  return {
    async record(writes: RunWrite[]): Promise<RecordOutcome> {
      // An accepted run's start (memory's and the trace's) is one statement, committed with what other turns send now.
      const start = soleStart(writes);
      if (
        start &&
        (await inTransaction(pool, async (transaction) => answeredLater(sendAcceptedStart(transaction, start))))
      ) {
        steps.startedRun(start.runId);
        return { messageIds: [], startedRuns: [start.runId], approvals: [] };
      }
      let sessions: SessionWrite[] = [];
      try {
        const outcome = await inTransaction(pool, (client) => apply(client, writes, (sessions = []), start?.runId));
        for (const session of sessions) versions.wrote(session);
        for (const write of writes) if (write.kind === "end_run") steps.forgetRun(write.outcome.runId);
        return outcome;
      } catch (error) {
        // Taken back: this handle must not think these runs' messages are stored.
        for (const write of writes) if (write.kind === "step") steps.forgetRun(write.step.runId);
        throw error;
      }
    },

    async acceptEvent(
      acceptance: EventAcceptance,
      alsoInTransaction?: (transaction: PostgresTransaction) => Promise<void>,
    ): Promise<AcceptOutcome> {
      const { run, message, sessionOwner } = acceptance;
      if (message && !run) throw new Error("an accepted event's message needs its run");
      if (run && sessionOwner !== undefined) return acceptOwned(acceptance, run, sessionOwner, alsoInTransaction);
      // Nothing here waits midway, so the acceptance goes whole, committed with what else is sent now: a
      // redelivery is told by its claimed id first; an id claimed in between fails the claims (unique),
      // and takes back the caller's writes with the rest.
      const duplicate = async (): Promise<AcceptOutcome> => {
        // The claims commit even for a duplicate (a redelivery's new id is remembered too).
        await inTransaction(pool, async (transaction) => answeredLater(claimIn(transaction, acceptance.eventIds)));
        return { kind: "duplicate" };
      };
      if (await claimedAny(pool, acceptance.eventIds)) return duplicate();
      let written: SessionWrite | undefined;
      try {
        const outcome = await inTransaction(pool, async (transaction) => {
          sendClaims(transaction, acceptance.eventIds);
          const accepted = acceptedIn(transaction, run, message);
          if (alsoInTransaction) await alsoInTransaction(transaction);
          return answeredLater(accepted.then(({ ids, session }) => ((written = session), ids[0] ?? null)));
        });
        if (written) versions.wrote(written);
        return { kind: "accepted", messageId: outcome };
      } catch (error) {
        if (isClaimedAlready(error)) return duplicate();
        throw error;
      }
    },
  };

  /** The run, its message and its session's touch: one statement, sent with the caller's and COMMIT. */
  function acceptedIn(
    transaction: PostgresTransaction,
    run?: RunRecord,
    message?: MessageEntry,
  ): Promise<{ ids: number[]; session?: SessionWrite }> {
    return run ? acceptRun(transaction, run, message ? [message] : []) : Promise.resolve({ ids: [] });
  }

  /**
   * An acceptance into a session kept for one user (the HTTP API's): the session is locked and its
   * owner checked before anything is written, so it waits midway, on a connection of its own.
   */
  async function acceptOwned(
    acceptance: EventAcceptance,
    run: RunRecord,
    sessionOwner: string,
    alsoInTransaction?: (transaction: PostgresTransaction) => Promise<void>,
  ): Promise<AcceptOutcome> {
    let written: SessionWrite | undefined;
    const outcome = await inTransaction(pool, async (client) => {
      written = undefined;
      // The session locked until the end (it may not exist yet): two users cannot both take a new session.
      await client.query("SELECT pg_advisory_xact_lock(hashtext('glassbox.session'), hashtext($1))", [run.sessionId]);
      const owner = await sessionOwnerIn(client, run.sessionId);
      if (owner !== undefined && owner !== sessionOwner) throw new NotOwner(owner);
      // The claims commit even for a duplicate (a redelivery's new id is remembered too).
      if (!(await claimIn(client, acceptance.eventIds))) return { kind: "duplicate" } as AcceptOutcome;
      const accepted = acceptedIn(client, run, acceptance.message);
      if (alsoInTransaction) await alsoInTransaction(client);
      return answeredLater(
        accepted.then(({ ids, session }): AcceptOutcome => {
          written = session;
          return { kind: "accepted", messageId: ids[0] ?? null };
        }),
      );
    }).catch((error: unknown) => {
      if (error instanceof NotOwner) return { kind: "not_owner" as const, owner: error.owner };
      throw error;
    });
    if (outcome.kind === "accepted" && written) versions.wrote(written);
    return outcome;
  }
}

/** The run a unit only starts, when it does nothing else. */
function soleStart(writes: RunWrite[]): RunRecord | undefined {
  const [first] = writes;
  if (first?.kind !== "start_run") return undefined;
  const runId = first.run.runId;
  return writes.every((write) => write.kind === "start_run" && write.run.runId === runId) ? first.run : undefined;
}

/** Thrown inside the acceptance so that its transaction is rolled back (nothing written), then answered as data. */
class NotOwner extends Error {
  constructor(readonly owner: string) {
    super("the session belongs to another user");
  }
}
