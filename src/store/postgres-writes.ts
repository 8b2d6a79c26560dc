/**
 * The PostgreSQL store's writes. A run's writes at the commit points of a running run (a step, its
 * messages, its tool calls, its end and price) are one statement, atomic without BEGIN and COMMIT
 * (see Statement); other units (a run's start, approvals, takeovers) are one transaction, their
 * writes sent one behind the other where nothing waits for their answers, so they travel with COMMIT.
 * An event's acceptance is a transaction of one statement (session owner checked first under the
 * session's lock, where it is kept: claims, the accepted run, its message) and whatever the caller
 * adds, such as the run queue's turn, sent with COMMIT. History versions are noted only once a write
 * has committed.
 */
import type pg from "pg";
import type { AcceptOutcome, EventAcceptance, RecordOutcome, RunRecord, RunWrite } from "./port-data.js";
import { answeredLater, inTransaction, type PostgresTransaction } from "./postgres-client.js";
import { runStatement, Statement } from "./postgres-statement.js";
import { openApprovals } from "./postgres-approvals.js";
import {
  INSERT_MESSAGES,
  insertedMessages,
  insertMessages,
  messageValues,
  TOUCH_SESSION,
  type HistoryVersions,
  type SessionWrite,
} from "./postgres-messages.js";
import {
  acceptRun,
  endOf,
  endRun,
  priceFrom,
  resumeRun,
  sessionOwnerIn,
  startAcceptedRun,
  startRun,
  takeOverRun,
} from "./postgres-runs.js";
import { noteOf, toolCallsOf, type PostgresSteps } from "./postgres-steps.js";

/**
 * `readingCancel`: the gates' (see createPostgresGates), for a run's start that reads whether a stop
 * was asked for it.
 */
export function createPostgresWrites(
  pool: pg.Pool,
  steps: PostgresSteps,
  versions: HistoryVersions,
  readingCancel: () => (runId: string, requested: boolean) => void,
) {
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

  /** A unit's writes as one statement (atOnce says when they can be): the commit points of a running run. */
  async function recordAtOnce(writes: RunWrite[], sessions: SessionWrite[]): Promise<RecordOutcome> {
    const statement = new Statement();
    const newSteps: string[] = [];
    let written: Extract<RunWrite, { kind: "messages" }> | undefined;
    for (const [index, write] of writes.entries()) {
      switch (write.kind) {
        case "messages": {
          const at = new Date().toISOString();
          statement.with("session", TOUCH_SESSION, [write.sessionId, at, 1]);
          statement.with("message", INSERT_MESSAGES, messageValues(write.sessionId, at, write.runId, write.entries));
          written = write;
          break;
        }
        case "step":
          await steps.loadParts(pool, write.step.runId);
          steps.addStep(statement, write.step, `step_${index}`);
          newSteps.push(`step_${index}`);
          break;
        case "tool_calls":
          if (write.records.length > 0)
            statement.with(`calls_${index}`, ...toolCallsOf(write.runId, write.step, write.records));
          break;
        case "note":
          statement.with(`note_${index}`, ...noteOf(write.runId, write.step, write.text));
          break;
        case "end_run": {
          // Priced in the same statement when the trace prices it right after, counting the steps written beside it.
          const next = writes[index + 1];
          const priced = next?.kind === "price_run" && next.runId === write.outcome.runId;
          statement.with("ended", ...endOf(write.outcome, priced ? priceFrom(stepsWith(newSteps)) : undefined));
          break;
        }
        case "price_run":
          if (writes[index - 1]?.kind !== "end_run")
            statement.with("priced", `UPDATE runs SET ${priceFrom(stepsWith(newSteps))} WHERE id = $1`, [write.runId]);
          break;
        default:
          throw new Error(`a ${write.kind} write is not written at once (see atOnce)`);
      }
    }
    const { rows } = await runStatement<{ id: number; epoch: number; version: number }>(
      pool,
      statement.finish(written ? "SELECT id, epoch, version FROM message" : "SELECT"),
    );
    if (!written) return { messageIds: [], startedRuns: [], approvals: [] };
    const { ids, session } = insertedMessages(written.sessionId, rows);
    sessions.push(session);
    return { messageIds: [ids], startedRuns: [], approvals: [] };
  }

  return {
    async record(writes: RunWrite[]): Promise<RecordOutcome> {
      // An accepted run's start (memory's and the trace's) is one statement, atomic without a transaction.
      const start = soleStart(writes);
      const read = start && readingCancel();
      const started = start && (await startAcceptedRun(pool, start));
      if (start && started) {
        read?.(start.runId, started.cancelRequested);
        steps.startedRun(start.runId);
        return { messageIds: [], startedRuns: [start.runId], approvals: [] };
      }
      let sessions: SessionWrite[] = [];
      try {
        const outcome = atOnce(writes)
          ? await recordAtOnce(writes, sessions)
          : await inTransaction(pool, (client) => apply(client, writes, (sessions = []), start?.runId));
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
      const outcome = await inTransaction(pool, async (client): Promise<AcceptOutcome> => {
        written = undefined;
        if (run && sessionOwner !== undefined) {
          // The session locked until the end (it may not exist yet): two users cannot both take a new session.
          await client.query("SELECT pg_advisory_xact_lock(hashtext('glassbox.session'), hashtext($1))", [
            run.sessionId,
          ]);
          const owner = await sessionOwnerIn(client, run.sessionId);
          if (owner !== undefined && owner !== sessionOwner) return { kind: "not_owner", owner };
        }
        const { rows } = await client.query<AcceptedRow>(...acceptanceOf(acceptance));
        const row = rows[0] as AcceptedRow;
        if (!row.accepted) return { kind: "duplicate" };
        if (run && row.epoch !== null && row.version !== null)
          written = { sessionId: run.sessionId, epoch: row.epoch, version: row.version };
        // The caller's writes (the run queue's turn) are sent with COMMIT.
        if (alsoInTransaction) await alsoInTransaction(client);
        return { kind: "accepted", messageId: row.id };
      });
      if (written) versions.wrote(written);
      return outcome;
    },
  };
}

type AcceptedRow = { accepted: boolean; id: number | null; epoch: number | null; version: number | null };

/**
 * An event's acceptance in one statement: its claims (which commit even for a duplicate, so that a
 * redelivery's new id is remembered too); `accepted`, a row when none of them was claimed before;
 * and, only then, the run, its message and its session's touch (acceptRun). Answers whether it was
 * accepted, and the message's id and where its session's history stands.
 */
function acceptanceOf({ eventIds, run, message }: EventAcceptance): [string, unknown[]] {
  const statement = new Statement()
    .with(
      "claimed",
      "INSERT INTO claims (id, claimed_at) SELECT id, $2 FROM unnest($1::text[]) AS claim(id) ON CONFLICT (id) DO NOTHING RETURNING id",
      [eventIds, new Date().toISOString()],
    )
    .with("accepted", "SELECT FROM claimed HAVING count(*) = $1", [eventIds.length]);
  if (run) acceptRun(statement, run, message ? [message] : []);
  return statement.finish(
    message
      ? "SELECT EXISTS (SELECT FROM accepted) AS accepted, (SELECT id FROM message) AS id, (SELECT epoch FROM session) AS epoch, (SELECT version FROM session) AS version"
      : "SELECT EXISTS (SELECT FROM accepted) AS accepted, NULL AS id, NULL AS epoch, NULL AS version",
  );
}

/**
 * Whether a unit's writes can be one statement: none of them waits for an answer (a run's start,
 * approvals), and none writes a row another of them writes or reads (see Statement): one messages
 * write (one session touched), at most one run ended or priced (whose price counts the steps written
 * beside it), no step written twice, and no step given tool calls or a note in the unit that writes it or twice.
 */
export function atOnce(writes: RunWrite[]): boolean {
  let messages = 0;
  const runs = new Set<string>();
  const written = new Set<string>();
  const changed: string[] = [];
  for (const write of writes) {
    switch (write.kind) {
      case "messages":
        if (++messages > 1 || write.entries.length === 0) return false;
        break;
      case "step": {
        const step = `${write.step.runId}/${write.step.step}`;
        if (written.has(step)) return false; // a second write of a step is ignored: after the first's
        written.add(step);
        break;
      }
      case "tool_calls":
      case "note":
        changed.push(`${write.runId}/${write.step}`);
        break;
      case "end_run":
        runs.add(write.outcome.runId);
        break;
      case "price_run":
        runs.add(write.runId);
        break;
      default:
        return false;
    }
  }
  // A run's row changes once: its end, its price, or its end priced (the price right after the end).
  const runWrites = writes.flatMap((write, index) =>
    write.kind === "end_run" || write.kind === "price_run" ? [{ kind: write.kind, index }] : [],
  );
  const [first, second] = runWrites;
  const once =
    runWrites.length <= 1 ||
    (runWrites.length === 2 &&
      first?.kind === "end_run" &&
      second?.kind === "price_run" &&
      second.index === first.index + 1);
  if (runs.size > 1 || !once) return false;
  return new Set(changed).size === changed.length && changed.every((step) => !written.has(step));
}

/** The steps of the store and those `newSteps` (WITH queries of the same statement) write, as one relation. */
function stepsWith(newSteps: string[]): string {
  if (newSteps.length === 0) return "steps";
  const union = newSteps.map((name) => ` UNION ALL SELECT run_id, step, model, cost FROM ${name}`).join("");
  return `(SELECT run_id, step, model, cost FROM steps${union}) AS steps`;
}

/** The run a unit only starts, when it does nothing else. */
function soleStart(writes: RunWrite[]): RunRecord | undefined {
  const [first] = writes;
  if (first?.kind !== "start_run") return undefined;
  const runId = first.run.runId;
  return writes.every((write) => write.kind === "start_run" && write.run.runId === runId) ? first.run : undefined;
}
