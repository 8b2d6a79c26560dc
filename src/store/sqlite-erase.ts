/**
 * Erasure on SQLite (see erase-plan.ts): one IMMEDIATE transaction with secure_delete on, so freed
 * pages are overwritten with zeros; then the notes' full-text index is merged (dropping what was
 * deleted from it), the file rebuilt (VACUUM, which drops the free space where earlier deletes left
 * their bytes) and the write-ahead log checkpointed and truncated, so no copy of the removed text
 * stays in the file or its log (unless another connection holds the log at that moment).
 */
import type Database from "better-sqlite3";
import {
  ERASE_STATEMENTS,
  ERASE_TABLES,
  IDLE_SESSIONS,
  MORE_RUNS,
  receiptOf,
  targetHash,
  TOUCHED,
} from "./erase-plan.js";
import type { EraseTarget, ErasureReceipt } from "./port-data.js";

const SELECT_SESSIONS: Record<EraseTarget["kind"], string | undefined> = {
  session: "INSERT INTO erase_sessions SELECT id FROM sessions WHERE id = @id",
  segment: "INSERT INTO erase_sessions SELECT id FROM sessions WHERE instr(':' || id || ':', ':' || @id || ':') > 0",
  user: undefined,
  idle: IDLE_SESSIONS.replace("$1", "@id"),
};

export function createSqliteErase(db: Database.Database) {
  const erase = db.transaction((target: EraseTarget, by: string): ErasureReceipt => {
    for (const table of ERASE_TABLES) {
      db.exec(`CREATE TEMP TABLE IF NOT EXISTS ${table} (id TEXT PRIMARY KEY)`);
      db.exec(`DELETE FROM ${table}`);
    }
    const { id } = target;
    const sessions = SELECT_SESSIONS[target.kind];
    if (sessions) db.prepare(sessions).run({ id });
    if (target.kind === "segment")
      db.prepare(
        "INSERT INTO erase_scopes SELECT DISTINCT scope FROM facts WHERE scope <> 'user' AND instr(':' || scope || ':', ':' || @id || ':') > 0",
      ).run({ id });
    if (target.kind === "user") {
      db.prepare("INSERT INTO erase_user VALUES (@id)").run({ id });
      db.prepare("INSERT INTO erase_runs SELECT id FROM runs WHERE user_id = @id").run({ id });
    }
    db.exec("INSERT INTO erase_runs SELECT id FROM runs WHERE session_id IN (SELECT id FROM erase_sessions)");
    while (db.prepare(MORE_RUNS).run().changes > 0);
    db.exec(TOUCHED);
    const removed = receiptOf(
      ERASE_STATEMENTS.map(({ table, sql }) => ({ table, removed: db.prepare(sql).run().changes })),
    );
    const at = new Date().toISOString();
    db.prepare("INSERT INTO erasures (at, erased_by, kind, target_hash, removed) VALUES (?, ?, ?, ?, ?)").run(
      at,
      by,
      target.kind,
      targetHash(target),
      JSON.stringify(removed),
    );
    for (const table of ERASE_TABLES) db.exec(`DELETE FROM ${table}`);
    return { kind: target.kind, at, removed };
  });

  return {
    erase(target: EraseTarget, by: string): ErasureReceipt {
      const before = db.pragma("secure_delete", { simple: true });
      db.pragma("secure_delete = ON");
      try {
        const receipt = erase.immediate(target, by);
        if ((receipt.removed.facts ?? 0) > 0) db.exec("INSERT INTO facts_index(facts_index) VALUES ('optimize')");
        // Rows deleted earlier in ordinary work (a settled quota reservation, say) left their bytes in
        // free space: the file is rebuilt without it, then the log emptied. Not for the daily retention
        // sweep, whose rows were overwritten as they went and which must not rewrite the file daily.
        if (target.kind !== "idle") db.exec("VACUUM");
        db.pragma("wal_checkpoint(TRUNCATE)");
        return receipt;
      } finally {
        db.pragma(`secure_delete = ${before ? "ON" : "OFF"}`);
      }
    },
  };
}
