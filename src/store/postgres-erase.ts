/**
 * Erasure on PostgreSQL (see erase-plan.ts): one transaction over temporary tables dropped at its
 * commit, which the run queue's removal joins (alsoInTransaction). Removed rows leave the live
 * tables at once and the files as autovacuum reclaims them; a dump taken afterwards holds none of them.
 */
import type pg from "pg";
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
import { inTransaction, type PostgresTransaction } from "./postgres-client.js";
import type { ErasedWork, EraseTarget, ErasureReceipt } from "./port-data.js";

const SEGMENT =
  "INSERT INTO erase_sessions SELECT id FROM sessions WHERE strpos(':' || id || ':', ':' || $1 || ':') > 0";

const SELECT_SESSIONS: Record<EraseTarget["kind"], string | undefined> = {
  session: "INSERT INTO erase_sessions SELECT id FROM sessions WHERE id = $1",
  segment: SEGMENT,
  workspace: SEGMENT,
  user: undefined,
  idle: IDLE_SESSIONS,
};

/** Their id in the stored tool calls of the runs APPROVED_RUNS names (`approval.approvedBy`) becomes the marker. */
const ANONYMISE_APPROVERS_IN_STEPS = `UPDATE steps SET tool_calls = replace(tool_calls::text, '"' || u.id || '"', '"${ERASED_MARKER}"')::jsonb
  FROM erase_user u WHERE steps.run_id IN (${APPROVED_RUNS}) AND steps.tool_calls::text LIKE '%"' || u.id || '"%'`;

/** The approval's decider, inside each stored tool call of the steps DECIDED_RUNS names, becomes the marker. */
const ANONYMISE_STEPS = `UPDATE steps SET tool_calls = (
    SELECT jsonb_agg(CASE WHEN c->'approval'->>'by' IN (SELECT id FROM erase_user)
      THEN jsonb_set(c, '{approval,by}', '"${ERASED_MARKER}"') ELSE c END ORDER BY n)
    FROM jsonb_array_elements(steps.tool_calls) WITH ORDINALITY AS e(c, n))
  WHERE run_id IN (${DECIDED_RUNS}) AND jsonb_typeof(tool_calls) = 'array' AND EXISTS (
    SELECT 1 FROM jsonb_array_elements(steps.tool_calls) AS c WHERE c->'approval'->>'by' IN (SELECT id FROM erase_user))`;

/** Slack's installations live beside the store only where OAuth has run (installations-postgres.ts makes them). */
const HAS_INSTALLATIONS = "SELECT to_regclass('slack_installation_teams') IS NOT NULL AS present";

type AlsoInTransaction = (transaction: PostgresTransaction, erased: ErasedWork) => Promise<Record<string, number>>;

export function createPostgresErase(pool: pg.Pool) {
  return {
    erase(target: EraseTarget, by: string, alsoInTransaction?: AlsoInTransaction): Promise<ErasureReceipt> {
      return inTransaction(pool, async (client) => {
        for (const table of ERASE_TABLES)
          await client.query(`CREATE TEMP TABLE ${table} (id text PRIMARY KEY) ON COMMIT DROP`);
        const { id } = target;
        const sessions = SELECT_SESSIONS[target.kind];
        if (sessions) await client.query(sessions, [id]);
        if (target.kind === "segment" || target.kind === "workspace")
          await client.query(
            "INSERT INTO erase_scopes SELECT DISTINCT scope FROM facts WHERE scope <> 'user' AND strpos(':' || scope || ':', ':' || $1 || ':') > 0",
            [id],
          );
        const installations =
          target.kind === "workspace" &&
          (await client.query<{ present: boolean }>(HAS_INSTALLATIONS)).rows[0]?.present === true;
        if (target.kind === "segment" || target.kind === "workspace" || target.kind === "session")
          await client.query(
            `INSERT INTO erase_scopes SELECT session_id FROM schedules
             WHERE session_id = $1 OR strpos(':' || session_id || ':', ':' || $1 || ':') > 1 ON CONFLICT DO NOTHING`,
            [id],
          );
        if (target.kind === "workspace") await client.query("INSERT INTO erase_workspace VALUES ($1)", [id]);
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
        for (const { table, sql } of installations
          ? [...ERASE_STATEMENTS, ...INSTALLATION_STATEMENTS]
          : ERASE_STATEMENTS)
          counts.push({ table, removed: (await client.query(sql)).rowCount ?? 0 });
        const anonymised = receiptOf([
          { table: "steps", removed: (await client.query(ANONYMISE_APPROVERS_IN_STEPS)).rowCount ?? 0 },
          { table: "steps", removed: (await client.query(ANONYMISE_STEPS)).rowCount ?? 0 },
          { table: "approvals", removed: (await client.query(ANONYMISE_APPROVALS)).rowCount ?? 0 },
          { table: "approvals", removed: (await client.query(ANONYMISE_APPROVED_BY)).rowCount ?? 0 },
        ]);
        if (alsoInTransaction) {
          const ids = async (sql: string) => (await client.query<{ id: string }>(sql)).rows.map((row) => row.id);
          const erased = { conversations: await ids(ERASED_CONVERSATIONS), runs: await ids(ERASED_RUNS) };
          for (const [table, removed] of Object.entries(await alsoInTransaction(client, erased)))
            counts.push({ table, removed });
        }
        const receipt: ErasureReceipt = {
          kind: target.kind,
          at: new Date().toISOString(),
          removed: receiptOf(counts),
          anonymised,
        };
        await client.query(
          "INSERT INTO erasures (at, erased_by, kind, target_hash, removed) VALUES ($1, $2, $3, $4, $5)",
          [receipt.at, by, target.kind, targetHash(target), auditCounts(receipt)],
        );
        return receipt;
      });
    },
  };
}
