/**
 * Durable approvals on PostgreSQL, decided exactly once across processes: a click locks its run's
 * row, then the approval's (in that order everywhere, so two clicks never deadlock), judges the click
 * by the same rules as the SQLite store (approval-rules.ts) and writes the decision; so of two clicks
 * at once one decides and the other finds it decided, and of two approvals of one run decided at
 * once exactly one settles the run.
 */
import { randomUUID } from "node:crypto";
import type pg from "pg";
import type { ApprovalRequest } from "../tools/types.js";
import { policyColumn, toApproval, type ApprovalRow } from "./approval-rows.js";
import { approvalAfter, approvalsNeeded, decisionsOf, judgeClick, messageOfDecision } from "./approval-rules.js";
import type { Approval, ApprovalStatus, DecisionOutcome, DecisionRequest } from "./port-data.js";
import { inTransaction, type Db, type PostgresTransaction } from "./postgres-client.js";

const COLUMNS =
  "id, run_id, session_id, tool_call_id, tool_name, arguments, arguments_hash, requester, status, decided_by, decided_at, expires_at, message_ref, policy, approved_by";
const select = async (db: Db, where: string, values: unknown[]) =>
  (await db.query<ApprovalRow>(`SELECT ${COLUMNS} FROM approvals WHERE ${where}`, values)).rows.map(toApproval);
const byId = async (db: Db, id: string, lock = "") => (await select(db, `id = $1 ${lock}`, [id]))[0];
const ofRun = (db: Db, runId: string) => select(db, 'run_id = $1 ORDER BY created_at, id COLLATE "C"', [runId]);
const pendingOfSession = (db: Db, sessionId: string) =>
  select(db, "status = 'pending' AND session_id = $1 ORDER BY id COLLATE \"C\"", [sessionId]);

async function settle(
  db: Db,
  id: string,
  status: ApprovalStatus,
  by: string,
  at: string,
  messageRef: string | null = null,
  approvedBy: string[] | null = null,
): Promise<boolean> {
  const sql =
    "UPDATE approvals SET status = $1, decided_by = $2, decided_at = $3, message_ref = COALESCE(message_ref, $5), approved_by = COALESCE($6, approved_by) WHERE id = $4 AND status = 'pending'";
  const given = approvedBy && JSON.stringify(approvedBy);
  return (await db.query(sql, [status, by, at, id, messageRef, given])).rowCount === 1;
}

/** One pending approval per request (idempotent: a call is asked once); inside the caller's transaction. */
export async function openApprovals(
  db: Db,
  requests: ApprovalRequest[],
  ttlSeconds: number,
  now = new Date(),
): Promise<Approval[]> {
  const opened: Approval[] = [];
  for (const request of requests) {
    await db.query(
      `INSERT INTO approvals (id, run_id, session_id, tool_call_id, tool_name, arguments, arguments_hash, requester, status, expires_at, created_at, policy)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending', $9, $10, $11) ON CONFLICT (run_id, tool_call_id) DO NOTHING`,
      [
        `apv_${randomUUID()}`,
        request.runId,
        request.sessionId,
        request.toolCallId,
        request.toolName,
        JSON.stringify(request.arguments),
        request.argumentsHash,
        request.userId,
        new Date(now.getTime() + ttlSeconds * 1000).toISOString(),
        now.toISOString(),
        policyColumn(request),
      ],
    );
    opened.push(...(await select(db, "run_id = $1 AND tool_call_id = $2", [request.runId, request.toolCallId])));
  }
  return opened;
}

export function createPostgresApprovals(pool: pg.Pool) {
  return {
    openApprovals: (requests: ApprovalRequest[], ttlSeconds: number, now?: Date) =>
      inTransaction(pool, (client) => openApprovals(client, requests, ttlSeconds, now)),
    approval: (id: string) => byId(pool, id),
    approvalsOfRun: (runId: string) => ofRun(pool, runId),
    pendingApprovalsOfSession: (sessionId: string) => pendingOfSession(pool, sessionId),
    async attachApprovalMessage(id: string, messageRef: string): Promise<void> {
      await pool.query("UPDATE approvals SET message_ref = $1 WHERE id = $2", [messageRef, id]);
    },

    decideApproval(
      request: DecisionRequest,
      alsoInTransaction?: (transaction: PostgresTransaction, decided: Approval) => Promise<void>,
    ): Promise<DecisionOutcome> {
      return inTransaction(pool, async (client) => {
        const target = (
          await client.query<{ run_id: string }>("SELECT run_id FROM approvals WHERE id = $1", [request.approvalId])
        ).rows[0];
        if (!target) return { kind: "unknown" };
        // The run first: its decisions are taken one at a time, so runReady is true for exactly one.
        await client.query("SELECT 1 FROM runs WHERE id = $1 FOR UPDATE", [target.run_id]);
        const approval = await byId(client, request.approvalId, "FOR UPDATE");
        const paused =
          (
            await client.query<{ paused: string | null }>(
              "SELECT paused FROM runs WHERE id = $1 AND status = 'awaiting_approval'",
              [target.run_id],
            )
          ).rows[0]?.paused ?? undefined;
        const judged = judgeClick(approval, request, paused);
        if (judged.kind !== "decide") return judged;
        const at = (request.now ?? new Date()).toISOString();
        const next = approvalAfter(judged.approval, request);
        const messageRef = messageOfDecision(judged.approval, request.origin);
        if (!next.settles) {
          // The approval's row is locked: no other click counts meanwhile.
          await client.query(
            "UPDATE approvals SET approved_by = $1, message_ref = COALESCE(message_ref, $2) WHERE id = $3",
            [JSON.stringify(next.approvedBy), messageRef, judged.approval.id],
          );
          const counted = (await byId(client, judged.approval.id)) ?? judged.approval;
          return { kind: "counted", approval: counted, needed: approvalsNeeded(counted) };
        }
        if (
          !(await settle(
            client,
            judged.approval.id,
            request.approved ? "approved" : "denied",
            request.userId,
            at,
            messageRef,
            next.approvedBy,
          ))
        ) {
          return { kind: "already_decided", approval: (await byId(client, judged.approval.id)) ?? judged.approval };
        }
        const decided = (await byId(client, judged.approval.id)) ?? judged.approval;
        const runReady = (await ofRun(client, decided.runId)).every((other) => other.status !== "pending");
        if (runReady && alsoInTransaction) await alsoInTransaction(client, decided);
        return { kind: "decided", approval: decided, runReady };
      });
    },

    /** Pending approvals past their time under `sessionPrefix` (matched as SQLite's LIKE matches it), that `owns` accepts, marked expired. */
    async expireApprovals(
      sessionPrefix: string,
      now = new Date(),
      owns: (sessionId: string) => boolean = () => true,
    ): Promise<Approval[]> {
      const at = now.toISOString();
      const due = (
        await select(pool, "status = 'pending' AND expires_at <= $1 AND session_id ILIKE $2 ORDER BY expires_at", [
          at,
          `${sessionPrefix}%`,
        ])
      ).filter((approval) => owns(approval.sessionId));
      const expired: Approval[] = [];
      for (const approval of due)
        if (await settle(pool, approval.id, "expired", "expired", at))
          expired.push({ ...approval, status: "expired", decidedBy: "expired", decidedAt: at });
      return expired;
    },

    decisionsOf: async (runId: string) => decisionsOf(await ofRun(pool, runId)),

    async supersedeApprovals(sessionId: string, now = new Date()): Promise<Approval[]> {
      // Most messages find nothing waiting: no transaction for them.
      if ((await pendingOfSession(pool, sessionId)).length === 0) return [];
      const at = now.toISOString();
      return inTransaction(pool, async (client) => {
        // Runs before approvals, as a click locks them; every paused run of the session (a specialist's, and the run it works for).
        await client.query(
          "SELECT id FROM runs WHERE session_id = $1 AND status = 'awaiting_approval' ORDER BY id COLLATE \"C\" FOR UPDATE",
          [sessionId],
        );
        const moot: Approval[] = [];
        for (const approval of await pendingOfSession(client, sessionId))
          if (await settle(client, approval.id, "expired", "superseded", at)) moot.push(approval);
        if (moot.length > 0)
          await client.query(
            "UPDATE runs SET status = 'superseded', paused = NULL, ended_at = $1 WHERE session_id = $2 AND status = 'awaiting_approval'",
            [at, sessionId],
          );
        return moot.map((approval) => ({
          ...approval,
          status: "expired" as const,
          decidedBy: "superseded",
          decidedAt: at,
        }));
      });
    },
  };
}
