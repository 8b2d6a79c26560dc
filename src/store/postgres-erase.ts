/**
 * Erasure on PostgreSQL (see erase-plan.ts): one transaction over temporary tables dropped at its
 * commit. Removed rows leave the live tables at once and the files as autovacuum reclaims them; a
 * dump taken afterwards holds none of them.
 */
import type pg from "pg";
import {
  ERASE_STATEMENTS,
  ERASE_TABLES,
  IDLE_SESSIONS,
  MORE_RUNS,
  receiptOf,
  targetHash,
  TOUCHED,
} from "./erase-plan.js";
import { inTransaction } from "./postgres-client.js";
import type { EraseTarget, ErasureReceipt } from "./port-data.js";

const SELECT_SESSIONS: Record<EraseTarget["kind"], string | undefined> = {
  session: "INSERT INTO erase_sessions SELECT id FROM sessions WHERE id = $1",
  segment: "INSERT INTO erase_sessions SELECT id FROM sessions WHERE strpos(':' || id || ':', ':' || $1 || ':') > 0",
  user: undefined,
  idle: IDLE_SESSIONS,
};

export function createPostgresErase(pool: pg.Pool) {
  return {
    erase(target: EraseTarget, by: string): Promise<ErasureReceipt> {
      return inTransaction(pool, async (client) => {
        for (const table of ERASE_TABLES)
          await client.query(`CREATE TEMP TABLE ${table} (id text PRIMARY KEY) ON COMMIT DROP`);
        const { id } = target;
        const sessions = SELECT_SESSIONS[target.kind];
        if (sessions) await client.query(sessions, [id]);
        if (target.kind === "segment")
          await client.query(
            "INSERT INTO erase_scopes SELECT DISTINCT scope FROM facts WHERE scope <> 'user' AND strpos(':' || scope || ':', ':' || $1 || ':') > 0",
            [id],
          );
        if (target.kind === "user") {
          await client.query("INSERT INTO erase_user VALUES ($1)", [id]);
          await client.query("INSERT INTO erase_runs SELECT id FROM runs WHERE user_id = $1", [id]);
        }
        await client.query(
          "INSERT INTO erase_runs SELECT id FROM runs WHERE session_id IN (SELECT id FROM erase_sessions)",
        );
        while (((await client.query(MORE_RUNS)).rowCount ?? 0) > 0);
        await client.query(TOUCHED);
        const counts: Array<{ table: string; removed: number }> = [];
        for (const { table, sql } of ERASE_STATEMENTS)
          counts.push({ table, removed: (await client.query(sql)).rowCount ?? 0 });
        const removed = receiptOf(counts);
        const at = new Date().toISOString();
        await client.query(
          "INSERT INTO erasures (at, erased_by, kind, target_hash, removed) VALUES ($1, $2, $3, $4, $5)",
          [at, by, target.kind, targetHash(target), JSON.stringify(removed)],
        );
        return { kind: target.kind, at, removed };
      });
    },
  };
}
