/**
 * Erasure on SQLite (see erase-plan.ts): one IMMEDIATE transaction with secure_delete on, so freed
 * pages are overwritten with zeros; then the notes' full-text index is merged (dropping what was
 * deleted from it), the file rebuilt (VACUUM, which drops the free space where earlier deletes left
 * their bytes) and the write-ahead log checkpointed and truncated, so no copy of the removed text
 * stays in the file or its log (unless another connection holds the log for the second it is tried).
 */
import { setTimeout as sleep } from "node:timers/promises";
import type Database from "better-sqlite3";
import {
  ANONYMISE_APPROVALS,
  ANONYMISE_APPROVED_BY,
  APPROVED_RUNS,
  auditCounts,
  DECIDED_RUNS,
  ERASE_STATEMENTS,
  ERASE_TABLES,
  ERASED_CONVERSATIONS,
  ERASED_MARKER,
  ERASED_RUNS,
  IDLE_SESSIONS,
  INSTALLATION_STATEMENTS,
  MORE_RUNS,
  receiptOf,
  targetHash,
  TOUCHED,
} from "./erase-plan.js";
import type { ErasedWork, EraseTarget, ErasureReceipt } from "./port-data.js";
import type { AfterCommit } from "./port.js";
import { afterCommitted } from "./sqlite-writes.js";

const SEGMENT =
  "INSERT INTO erase_sessions SELECT id FROM sessions WHERE instr(':' || id || ':', ':' || @id || ':') > 0";

const SELECT_SESSIONS: Record<EraseTarget["kind"], string | undefined> = {
  session: "INSERT INTO erase_sessions SELECT id FROM sessions WHERE id = @id",
  segment: SEGMENT,
  workspace: SEGMENT,
  user: undefined,
  idle: IDLE_SESSIONS.replace("$1", "@id"),
};

/** Their id in the stored tool calls of the runs APPROVED_RUNS names (`approval.approvedBy`) becomes the marker. */
const ANONYMISE_APPROVERS_IN_STEPS = `UPDATE steps SET tool_calls = replace(tool_calls, '"' || u.id || '"', '"${ERASED_MARKER}"')
  FROM erase_user u WHERE steps.run_id IN (${APPROVED_RUNS}) AND steps.tool_calls LIKE '%"' || u.id || '"%'`;

/** The approval's decider, inside each stored tool call of the steps DECIDED_RUNS names, becomes the marker. */
const ANONYMISE_STEPS = `UPDATE steps SET tool_calls = (
    SELECT json_group_array(json(CASE WHEN json_extract(c.value, '$.approval.by') IN (SELECT id FROM erase_user)
      THEN json_set(c.value, '$.approval.by', '${ERASED_MARKER}') ELSE c.value END) ORDER BY c.key)
    FROM json_each(steps.tool_calls) AS c)
  WHERE run_id IN (${DECIDED_RUNS}) AND json_valid(tool_calls) AND EXISTS (
    SELECT 1 FROM json_each(steps.tool_calls) AS c WHERE json_extract(c.value, '$.approval.by') IN (SELECT id FROM erase_user))`;

/** Tries to empty the log this long while another connection (the checkpoint thread) is checkpointing it. */
const EMPTY_LOG_TRIES = 40;
const EMPTY_LOG_PAUSE_MS = 25;

/**
 * Copies the log into the file and truncates it. A checkpoint already running on another connection
 * (a bot's checkpoint thread) makes SQLite answer busy at once, without its busy handler: the log,
 * which still holds the removed rows' old pages, would stay as it is; so it is tried again a moment later.
 */
async function emptyLog(db: Database.Database): Promise<void> {
  for (let tries = 1; ; tries++) {
    const [result] = db.pragma("wal_checkpoint(TRUNCATE)") as Array<{ busy: number }>;
    if (!result || result.busy === 0 || tries === EMPTY_LOG_TRIES) return;
    await sleep(EMPTY_LOG_PAUSE_MS);
  }
}

type AlsoInTransaction = (transaction: AfterCommit, erased: ErasedWork) => Promise<Record<string, number>>;

export function createSqliteErase(db: Database.Database) {
  const erase = db.transaction((target: EraseTarget, by: string) => {
    for (const table of ERASE_TABLES) {
      db.exec(`CREATE TEMP TABLE IF NOT EXISTS ${table} (id TEXT PRIMARY KEY)`);
      db.exec(`DELETE FROM ${table}`);
    }
    const { id } = target;
    const sessions = SELECT_SESSIONS[target.kind];
    if (sessions) db.prepare(sessions).run({ id });
    if (target.kind === "segment" || target.kind === "workspace")
      db.prepare(
        "INSERT INTO erase_scopes SELECT DISTINCT scope FROM facts WHERE scope <> 'user' AND instr(':' || scope || ':', ':' || @id || ':') > 0",
      ).run({ id });
    if (target.kind === "segment" || target.kind === "workspace" || target.kind === "session")
      db.prepare(
        "INSERT OR IGNORE INTO erase_scopes SELECT session_id FROM schedules WHERE session_id = @id OR instr(':' || session_id || ':', ':' || @id || ':') > 1",
      ).run({ id });
    if (target.kind === "workspace") db.prepare("INSERT INTO erase_workspace VALUES (@id)").run({ id });
    if (target.kind === "user") {
      db.prepare("INSERT INTO erase_user VALUES (@id)").run({ id });
      db.prepare("INSERT INTO erase_runs SELECT id FROM runs WHERE user_id = @id").run({ id });
    }
    db.exec("INSERT INTO erase_runs SELECT id FROM runs WHERE session_id IN (SELECT id FROM erase_sessions)");
    while (db.prepare(MORE_RUNS).run().changes > 0);
    db.exec(TOUCHED);
    const statements =
      target.kind === "workspace" ? [...ERASE_STATEMENTS, ...INSTALLATION_STATEMENTS] : ERASE_STATEMENTS;
    const removed = receiptOf(statements.map(({ table, sql }) => ({ table, removed: db.prepare(sql).run().changes })));
    const anonymised = receiptOf([
      { table: "steps", removed: db.prepare(ANONYMISE_APPROVERS_IN_STEPS).run().changes },
      { table: "steps", removed: db.prepare(ANONYMISE_STEPS).run().changes },
      { table: "approvals", removed: db.prepare(ANONYMISE_APPROVALS).run().changes },
      { table: "approvals", removed: db.prepare(ANONYMISE_APPROVED_BY).run().changes },
    ]);
    const erased: ErasedWork = {
      conversations: db.prepare(ERASED_CONVERSATIONS).pluck().all() as string[],
      runs: db.prepare(ERASED_RUNS).pluck().all() as string[],
    };
    const receipt: ErasureReceipt = { kind: target.kind, at: new Date().toISOString(), removed, anonymised };
    const audit = db
      .prepare("INSERT INTO erasures (at, erased_by, kind, target_hash, removed) VALUES (?, ?, ?, ?, ?)")
      .run(receipt.at, by, target.kind, targetHash(target), auditCounts(receipt)).lastInsertRowid;
    for (const table of ERASE_TABLES) db.exec(`DELETE FROM ${table}`);
    return { receipt, erased, audit };
  });

  return {
    async erase(target: EraseTarget, by: string, alsoInTransaction?: AlsoInTransaction): Promise<ErasureReceipt> {
      const before = db.pragma("secure_delete", { simple: true });
      db.pragma("secure_delete = ON");
      try {
        const { receipt, erased, audit } = erase.immediate(target, by);
        if (alsoInTransaction) {
          // The in-process queue is this process's memory: what it removes is counted once the rows went.
          let more: Record<string, number> = {};
          await afterCommitted(async (transaction) => {
            more = await alsoInTransaction(transaction, erased);
          });
          for (const [table, count] of Object.entries(more))
            receipt.removed[table] = (receipt.removed[table] ?? 0) + count;
          db.prepare("UPDATE erasures SET removed = ? WHERE id = ?").run(auditCounts(receipt), audit);
        }
        if ((receipt.removed.facts ?? 0) > 0) db.exec("INSERT INTO facts_index(facts_index) VALUES ('optimize')");
        // Rows deleted earlier in ordinary work (a settled quota reservation, say) left their bytes in
        // free space: the file is rebuilt without it, then the log emptied. Not for the daily retention
        // sweep, whose rows were overwritten as they went and which must not rewrite the file daily.
        if (target.kind !== "idle") db.exec("VACUUM");
        await emptyLog(db);
        return receipt;
      } finally {
        db.pragma(`secure_delete = ${before ? "ON" : "OFF"}`);
      }
    },
  };
}
