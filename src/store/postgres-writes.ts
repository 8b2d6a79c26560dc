/**
 * The PostgreSQL store's transactional writes: a run's writes, in order, in one transaction; an
 * event's acceptance (session owner checked under the session's row lock, claims, the accepted run,
 * its message, and whatever the caller adds, such as the run queue's job) in another. History
 * versions are noted only once a transaction has committed.
 */
import type pg from "pg";
import type { AcceptOutcome, EventAcceptance, RecordOutcome, RunRecord, RunWrite } from "./port-data.js";
import { inTransaction, transactionOf, type PostgresTransaction } from "./postgres-client.js";
import { openApprovals } from "./postgres-approvals.js";
import { claimIn } from "./postgres-gates.js";
import { insertMessages, type HistoryVersions, type SessionWrite } from "./postgres-messages.js";
import {
  acceptRun,
  endRun,
  resumeRun,
  sessionOwnerIn,
  startAcceptedRun,
  startRun,
  takeOverRun,
} from "./postgres-runs.js";
import type { PostgresSteps } from "./postgres-steps.js";

export function createPostgresWrites(pool: pg.Pool, steps: PostgresSteps, versions: HistoryVersions) {
  async function apply(
    client: pg.PoolClient,
    writes: RunWrite[],
    sessions: SessionWrite[],
    notAccepted?: string,
  ): Promise<RecordOutcome> {
    const outcome: RecordOutcome = { messageIds: [], startedRuns: [], approvals: [] };
    const starts = new Set<string>();
    let pricedWith: string | undefined;
    for (const [index, write] of writes.entries()) {
      switch (write.kind) {
        case "start_run":
          // Memory and the trace each start the run: the second start finds it started.
          if (starts.has(write.run.runId)) break;
          starts.add(write.run.runId);
          if (await startRun(client, write.run, write.run.runId === notAccepted)) {
            outcome.startedRuns.push(write.run.runId);
            steps.startedRun(write.run.runId);
          }
          break;
        case "resume_run":
          await resumeRun(client, write.runId);
          break;
        case "take_over_run":
          if (await takeOverRun(client, write.runId)) outcome.startedRuns.push(write.runId);
          break;
        case "messages": {
          const { ids, session } = await insertMessages(client, write.sessionId, write.runId, write.entries);
          outcome.messageIds.push(ids);
          sessions.push(session);
          break;
        }
        case "step":
          await steps.appendStep(client, write.step);
          break;
        case "tool_calls":
          await steps.addToolCalls(client, write.runId, write.step, write.records);
          break;
        case "note":
          await steps.addNote(client, write.runId, write.step, write.text);
          break;
        case "end_run": {
          // The trace prices the run right after its end: both in one statement.
          const next = writes[index + 1];
          pricedWith = next?.kind === "price_run" && next.runId === write.outcome.runId ? next.runId : undefined;
          await endRun(client, write.outcome, pricedWith !== undefined);
          break;
        }
        case "price_run":
          if (pricedWith !== write.runId) await steps.priceRun(client, write.runId);
          pricedWith = undefined;
          break;
        case "open_approvals":
          outcome.approvals.push(...(await openApprovals(client, write.requests, write.ttlSeconds, write.now)));
          break;
      }
    }
    return outcome;
  }

  return {
    async record(writes: RunWrite[]): Promise<RecordOutcome> {
      // An accepted run's start (memory's and the trace's) is one statement, atomic without a transaction.
      const start = soleStart(writes);
      if (start && (await startAcceptedRun(pool, start))) {
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
      let written: SessionWrite | undefined;
      const outcome = await inTransaction(pool, async (client, afterCommit): Promise<AcceptOutcome> => {
        written = undefined;
        if (run && sessionOwner !== undefined) {
          // The session locked until the end (it may not exist yet): two users cannot both take a new session.
          await client.query("SELECT pg_advisory_xact_lock(hashtext('glassbox.session'), hashtext($1))", [
            run.sessionId,
          ]);
          const owner = await sessionOwnerIn(client, run.sessionId);
          if (owner !== undefined && owner !== sessionOwner) throw new NotOwner(owner);
        }
        // The claims commit even for a duplicate (a redelivery's new id is remembered too).
        if (!(await claimIn(client, acceptance.eventIds))) return { kind: "duplicate" };
        let messageId: number | null = null;
        if (run) {
          // The run, its message and its session's touch: one statement.
          const accepted = await acceptRun(client, run, message ? [message] : []);
          messageId = accepted.ids[0] ?? null;
          written = accepted.session;
        }
        if (alsoInTransaction) await alsoInTransaction(transactionOf(client, afterCommit));
        return { kind: "accepted", messageId };
      }).catch((error: unknown) => {
        if (error instanceof NotOwner) return { kind: "not_owner" as const, owner: error.owner };
        throw error;
      });
      if (outcome.kind === "accepted" && written) versions.wrote(written);
      return outcome;
    },
  };
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
