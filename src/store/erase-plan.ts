/**
 * Erasure, as both stores carry it out in one transaction. Each store first fills temporary tables
 * with what the target reaches (its own SQL: see sqlite-erase.ts, postgres-erase.ts):
 *   erase_sessions   conversations removed whole (a session, or every one of a channel or workspace)
 *   erase_runs       runs removed with everything they wrote (a person's, or those of erase_sessions,
 *                    with their sub-agents' and pipeline stages')
 *   erase_touched    conversations whose summaries go (they may retell what was removed), and which
 *                    go whole once no run is left in them
 *   erase_scopes     the channel keys whose shared notes go, and the sessions of the schedules that go
 *                    with the conversation, channel or workspace erased; erase_user the person, if one is erased;
 *   erase_workspace  the workspace, if one is erased (its Slack installation goes)
 * then runs the statements below, the same on both, in an order that keeps every reference valid;
 * then, for a person, puts ERASED_MARKER where their id stands in other people's runs (the
 * approvals they decided), rather than removing what is not theirs.
 */
import { createHash } from "node:crypto";
import type { EraseTarget, ErasureReceipt } from "./port-data.js";

/** Conversations last active before $1 with no run in progress (`idle`), for each store's placeholder style. */
export const IDLE_SESSIONS = `INSERT INTO erase_sessions SELECT id FROM sessions WHERE updated_at < $1
  AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.session_id = sessions.id AND r.status IN ('accepted', 'running', 'awaiting_approval'))`;

export const ERASE_TABLES = [
  "erase_sessions",
  "erase_runs",
  "erase_touched",
  "erase_scopes",
  "erase_user",
  "erase_workspace",
];

/** What stands in for an erased person's id in the records of other people's runs they acted on. */
export const ERASED_MARKER = "erased";

const RUNS = "SELECT id FROM erase_runs";
const SESSIONS = "SELECT id FROM erase_sessions";
const USER = "SELECT id FROM erase_user";
/** Touched conversations with no run left in them (after the runs went). */
const EMPTIED = `SELECT id FROM erase_touched WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.session_id = erase_touched.id)`;

/** Each table's removal, in order; the receipt adds up the rows each removed. */
export const ERASE_STATEMENTS: Array<{ table: string; sql: string }> = [
  { table: "step_messages", sql: `DELETE FROM step_messages WHERE run_id IN (${RUNS})` },
  { table: "steps", sql: `DELETE FROM steps WHERE run_id IN (${RUNS})` },
  {
    table: "approvals",
    sql: `DELETE FROM approvals WHERE run_id IN (${RUNS}) OR session_id IN (${SESSIONS})`,
  },
  { table: "feedback", sql: `DELETE FROM feedback WHERE run_id IN (${RUNS}) OR user_id IN (${USER})` },
  {
    table: "cancel_requests",
    sql: `DELETE FROM cancel_requests WHERE run_id IN (${RUNS}) OR session_id IN (${SESSIONS})`,
  },
  { table: "messages", sql: `DELETE FROM messages WHERE run_id IN (${RUNS}) OR session_id IN (${SESSIONS})` },
  {
    table: "summaries",
    sql: `DELETE FROM summaries WHERE session_id IN (SELECT id FROM erase_touched) OR run_id IN (${RUNS})`,
  },
  { table: "runs", sql: `DELETE FROM runs WHERE id IN (${RUNS})` },
  // What is left of a conversation no run is left in (its notes, its messages without a run).
  { table: "messages", sql: `DELETE FROM messages WHERE session_id IN (${EMPTIED})` },
  { table: "approvals", sql: `DELETE FROM approvals WHERE session_id IN (${EMPTIED})` },
  { table: "cancel_requests", sql: `DELETE FROM cancel_requests WHERE session_id IN (${EMPTIED})` },
  { table: "sessions", sql: `DELETE FROM sessions WHERE id IN (${SESSIONS}) OR id IN (${EMPTIED})` },
  {
    table: "facts",
    sql: `DELETE FROM facts WHERE user_id IN (${USER}) OR scope IN (SELECT id FROM erase_scopes)`,
  },
  { table: "quota_reservations", sql: `DELETE FROM quota_reservations WHERE user_id IN (${USER})` },
  { table: "quota_days", sql: `DELETE FROM quota_days WHERE user_id IN (${USER})` },
  // A schedule goes with its person, or with its place (its session key is among erase_scopes then).
  {
    table: "schedules",
    sql: `DELETE FROM schedules WHERE user_id IN (${USER}) OR session_id IN (SELECT id FROM erase_scopes)`,
  },
];

/**
 * A workspace's Slack installation (its sealed tokens and installer) and its links: an org-wide
 * install is removed when the org's id is given; a workspace of it loses only its link.
 */
export const INSTALLATION_STATEMENTS: Array<{ table: string; sql: string }> = [
  {
    table: "slack_installation_teams",
    sql: "DELETE FROM slack_installation_teams WHERE team_id IN (SELECT id FROM erase_workspace) OR installation_key IN (SELECT id FROM erase_workspace)",
  },
  {
    table: "slack_installations",
    sql: "DELETE FROM slack_installations WHERE key IN (SELECT id FROM erase_workspace)",
  },
];

/**
 * The steps whose stored tool calls may name the erased person as an approval's decider: those of
 * runs with an approval they decided (each store rewrites the JSON in its own dialect, before the
 * approvals themselves are rewritten).
 */
export const DECIDED_RUNS = `SELECT run_id FROM approvals WHERE decided_by IN (${USER})`;

/** The erased person's decisions on other people's calls (their own runs' approvals went with the runs). */
/** A JSON string of one of the erased person's ids, as a LIKE pattern and as text to replace, for `u` of erase_user. */
const QUOTED_ID = `'"' || u.id || '"'`;

/** Other people's calls the erased person approved under a rule of several approvals (their id in `approved_by`). */
export const APPROVED_RUNS = `SELECT a.run_id FROM approvals a, erase_user u WHERE a.approved_by LIKE '%' || ${QUOTED_ID} || '%'`;

/** Their id in the lists of who approved of approvals decided by someone else (after ANONYMISE_APPROVALS). */
export const ANONYMISE_APPROVED_BY = `UPDATE approvals SET approved_by = replace(approved_by, ${QUOTED_ID}, '"${ERASED_MARKER}"')
  FROM erase_user u WHERE approvals.approved_by LIKE '%' || ${QUOTED_ID} || '%'`;

export const ANONYMISE_APPROVALS = `UPDATE approvals SET decided_by = '${ERASED_MARKER}',
  approved_by = replace(approved_by, ${QUOTED_ID}, '"${ERASED_MARKER}"')
  FROM erase_user u WHERE approvals.decided_by = u.id`;

/** What went, for the run queue: the conversations removed whole, and the runs removed (after ERASE_STATEMENTS). */
export const ERASED_CONVERSATIONS = `SELECT id FROM erase_sessions UNION ${EMPTIED}`;
export const ERASED_RUNS = RUNS;

/** Adds the runs reached through erase_runs (sub-agents, later pipeline stages); the count added. */
export const MORE_RUNS = `INSERT INTO erase_runs SELECT id FROM runs
  WHERE (parent_run_id IN (${RUNS}) OR pipeline_run_id IN (${RUNS})) AND id NOT IN (${RUNS})`;

export const TOUCHED = `INSERT INTO erase_touched SELECT id FROM erase_sessions
  UNION SELECT DISTINCT session_id FROM runs WHERE id IN (${RUNS})`;

/** How the audit row names the target: its kind, and a hash that matches a later request for the same id, never the id. */
export function targetHash(target: EraseTarget): string {
  return createHash("sha256").update(`${target.kind}\u0000${target.id}`).digest("hex");
}

/** The audit row's counts: the rows removed per table, and those anonymised (under "anonymised") when any were. */
export function auditCounts(receipt: Pick<ErasureReceipt, "removed" | "anonymised">): string {
  const anonymised = Object.values(receipt.anonymised).some((count) => count > 0);
  return JSON.stringify(anonymised ? { ...receipt.removed, anonymised: receipt.anonymised } : receipt.removed);
}

/** The rows removed per table, from each statement's count. */
export function receiptOf(counts: Array<{ table: string; removed: number }>): Record<string, number> {
  const removed: Record<string, number> = {};
  for (const { table, removed: rows } of counts) removed[table] = (removed[table] ?? 0) + rows;
  return removed;
}
