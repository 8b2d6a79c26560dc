/**
 * The SQLite store's transactional writes: a run's writes, and an event's acceptance, each one unit
 * of the store's group commit (sqlite-commit.ts): the units of one event-loop turn commit
 * together, each whole or not at all. Made of the store's own operations, the approval book's and
 * the trace writes (sqlite-steps).
 */
import type { ApprovalBook } from "./sqlite-approvals.js";
import type { SqliteStore } from "./sqlite-store.js";
import { INSTANCE, instanceRegistration } from "./instances.js";
import type { AcceptOutcome, EventAcceptance, RecordOutcome, RunWrite } from "./port-data.js";
import type { AfterCommit } from "./port.js";
import { knowMessageRows } from "./sqlite-message-rows.js";
import type { SqliteSteps } from "./sqlite-steps.js";

export function createSqliteWrites(store: SqliteStore, steps: SqliteSteps, book: ApprovalBook) {
  // Prepared on first use: a read-only handle (the command line) never writes.
  let takeOver: ((runId: string) => boolean) | undefined;
  const takeOverRun = (runId: string) => {
    if (!takeOver) {
      const register = instanceRegistration(store.db);
      const update = store.db.prepare(
        "UPDATE runs SET status = 'running', owner = @owner, ended_at = NULL WHERE id = @id AND (status = 'interrupted' OR (status = 'running' AND owner IS NOT @owner))",
      );
      takeOver = (id) => {
        register();
        return update.run({ owner: INSTANCE.id, id }).changes === 1;
      };
    }
    return takeOver(runId);
  };
  function apply(writes: RunWrite[]): RecordOutcome {
    const outcome: RecordOutcome = { messageIds: [], startedRuns: [], approvals: [] };
    for (const write of writes) {
      switch (write.kind) {
        case "start_run":
          if (store.startRun(write.run)) outcome.startedRuns.push(write.run.runId);
          break;
        case "resume_run":
          store.resumeRun(write.runId);
          break;
        case "take_over_run":
          if (takeOverRun(write.runId)) outcome.startedRuns.push(write.runId);
          break;
        case "messages":
          outcome.messageIds.push(store.appendMessages(write.sessionId, write.runId, write.entries));
          break;
        case "step":
          steps.appendStep(write.step);
          break;
        case "tool_calls":
          steps.addToolCalls(write.runId, write.step, write.records);
          break;
        case "note":
          steps.addNote(write.runId, write.step, write.text);
          break;
        case "end_run":
          store.endRun(write.outcome);
          steps.forgetRun(write.outcome.runId);
          break;
        case "price_run":
          steps.priceRun(write.runId);
          break;
        case "open_approvals":
          outcome.approvals.push(...book.open(write.requests, write.ttlSeconds, write.now));
          break;
      }
    }
    return outcome;
  }

  function accept(acceptance: EventAcceptance): AcceptOutcome {
    const { run, message, sessionOwner } = acceptance;
    if (message && !run) throw new Error("an accepted event's message needs its run");
    if (run && sessionOwner !== undefined) {
      const owner = store.sessionOwner(run.sessionId);
      if (owner !== undefined && owner !== sessionOwner) return { kind: "not_owner", owner };
    }
    // The claims commit even for a duplicate (a redelivery's new id is remembered too).
    if (acceptance.eventIds.length > 0 && !store.claim(...acceptance.eventIds)) return { kind: "duplicate" };
    if (run) store.acceptRun(run);
    const [messageId] = run && message ? store.appendMessages(run.sessionId, run.runId, [message]) : [];
    return { kind: "accepted", messageId: messageId ?? null };
  }

  return {
    async record(writes: RunWrite[]): Promise<RecordOutcome> {
      try {
        const outcome = await store.atomically(() => apply(writes));
        // Committed: a later step's request may point at these rows instead of storing the messages again.
        let index = 0;
        for (const write of writes)
          if (write.kind === "messages")
            knowMessageRows(
              store.db,
              write.entries.map((entry) => entry.message),
              outcome.messageIds[index++] ?? [],
            );
        return outcome;
      } catch (error) {
        // Taken back: the request log must not think these runs' messages are stored.
        for (const write of writes) if (write.kind === "step") steps.forgetRun(write.step.runId);
        throw error;
      }
    },
    async acceptEvent(
      acceptance: EventAcceptance,
      alsoInTransaction?: (transaction: AfterCommit) => Promise<void>,
    ): Promise<AcceptOutcome> {
      const outcome = await store.atomically(() => accept(acceptance));
      if (outcome.kind === "accepted" && alsoInTransaction) await afterCommitted(alsoInTransaction);
      return outcome;
    },
  };
}

/** Runs writes that join a SQLite transaction once it has committed (the in-process queue keeps nothing across a restart anyway). */
export async function afterCommitted(writes: (transaction: AfterCommit) => Promise<void>): Promise<void> {
  const callbacks: Array<() => void> = [];
  await writes({ afterCommit: (callback) => void callbacks.push(callback) });
  for (const callback of callbacks) callback();
}
