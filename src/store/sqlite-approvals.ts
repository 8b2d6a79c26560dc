/**
 * The approval book on SQLite: pending approvals opened, decided once, expired and superseded, with
 * the rules of a click applied as approval-rules.ts words them.
 */
import { randomUUID } from "node:crypto";
import type { Approval, DecisionOutcome } from "../agent/approvals.js";
import type { ApprovalDecision, ApprovalRequest } from "../tools/types.js";
import { policyColumn, toApproval, type ApprovalRow } from "./approval-rows.js";
import { approvalAfter, approvalsNeeded, decisionsOf, judgeClick, messageOfDecision } from "./approval-rules.js";
import type { DecisionRequest } from "./port-data.js";
import type { SqliteStore } from "./sqlite-store.js";

export function createApprovalBook(store: SqliteStore) {
  const { db } = store;
  const statements = {
    insert:
      db.prepare(`INSERT INTO approvals (id, run_id, session_id, tool_call_id, tool_name, arguments, arguments_hash, requester, status, expires_at, created_at, policy)
      VALUES (@id, @runId, @sessionId, @toolCallId, @toolName, @arguments, @argumentsHash, @requester, 'pending', @expiresAt, @createdAt, @policy)
      ON CONFLICT (run_id, tool_call_id) DO NOTHING`),
    byId: db.prepare("SELECT * FROM approvals WHERE id = ?"),
    byCall: db.prepare("SELECT * FROM approvals WHERE run_id = ? AND tool_call_id = ?"),
    ofRun: db.prepare("SELECT * FROM approvals WHERE run_id = ? ORDER BY created_at, id"),
    decide: db.prepare(
      "UPDATE approvals SET status = ?, decided_by = ?, decided_at = ?, message_ref = COALESCE(message_ref, ?) WHERE id = ? AND status = 'pending'",
    ),
    // An approval given toward a rule of several, on the list as it was read (no other counted meanwhile).
    count: db.prepare(
      "UPDATE approvals SET approved_by = ?, message_ref = COALESCE(message_ref, ?) WHERE id = ? AND status = 'pending' AND coalesce(approved_by, '[]') = ?",
    ),
    approvedBy: db.prepare("UPDATE approvals SET approved_by = ? WHERE id = ?"),
    setMessage: db.prepare("UPDATE approvals SET message_ref = ? WHERE id = ?"),
    expired: db.prepare(
      "SELECT * FROM approvals WHERE status = 'pending' AND expires_at <= ? AND session_id LIKE ? ORDER BY expires_at",
    ),
    pendingOfSession: db.prepare("SELECT * FROM approvals WHERE status = 'pending' AND session_id = ?"),
    // Every paused run of the session: a specialist's, and the run it works for.
    endSuperseded: db.prepare(
      "UPDATE runs SET status = 'superseded', paused = NULL, ended_at = ? WHERE session_id = ? AND status = 'awaiting_approval'",
    ),
  };
  const all = (rows: unknown[]) => (rows as ApprovalRow[]).map(toApproval);

  return {
    /** One pending approval per request (idempotent: a call is asked once). */
    open(requests: ApprovalRequest[], ttlSeconds: number, now = new Date()): Approval[] {
      return db.transaction((waiting: ApprovalRequest[]) =>
        waiting.map((request) => {
          statements.insert.run({
            id: `apv_${randomUUID()}`,
            runId: request.runId,
            sessionId: request.sessionId,
            toolCallId: request.toolCallId,
            toolName: request.toolName,
            arguments: JSON.stringify(request.arguments),
            argumentsHash: request.argumentsHash,
            requester: request.userId,
            expiresAt: new Date(now.getTime() + ttlSeconds * 1000).toISOString(),
            createdAt: now.toISOString(),
            policy: policyColumn(request),
          });
          return toApproval(statements.byCall.get(request.runId, request.toolCallId) as ApprovalRow);
        }),
      )(requests);
    },

    get(id: string): Approval | undefined {
      const row = statements.byId.get(id) as ApprovalRow | undefined;
      return row && toApproval(row);
    },

    ofRun: (runId: string): Approval[] => all(statements.ofRun.all(runId)),

    pendingOfSession: (sessionId: string): Approval[] => all(statements.pendingOfSession.all(sessionId)),

    attachMessage(id: string, messageRef: string): void {
      statements.setMessage.run(messageRef, id);
    },

    /**
     * A person's click. Single use: only the first decision of a pending, unexpired approval counts.
     * Stale: the run must still be waiting for exactly this call with exactly these arguments.
     */
    decide(request: DecisionRequest): DecisionOutcome {
      const { approvalId: id, userId, approved, origin } = request;
      const now = request.now ?? new Date();
      const found = this.get(id);
      const judged = judgeClick(found, { ...request, now }, found && store.pausedRun(found.runId));
      if (judged.kind !== "decide") return judged;
      const { approval } = judged;
      const next = approvalAfter(approval, request);
      const before = JSON.stringify(approval.approvedBy);
      if (!next.settles) {
        const counted = statements.count.run(
          JSON.stringify(next.approvedBy),
          messageOfDecision(approval, origin),
          id,
          before,
        ).changes;
        if (counted !== 1) return { kind: "already_decided", approval: this.get(id) ?? approval };
        return { kind: "counted", approval: this.get(id) ?? approval, needed: approvalsNeeded(approval) };
      }
      const settled = db.transaction(() => {
        const changed = statements.decide.run(
          approved ? "approved" : "denied",
          userId,
          now.toISOString(),
          messageOfDecision(approval, origin),
          id,
        ).changes;
        if (changed === 1) statements.approvedBy.run(JSON.stringify(next.approvedBy), id);
        return changed === 1;
      })();
      if (!settled) return { kind: "already_decided", approval: this.get(id) ?? approval };
      const decided = this.get(id) ?? approval;
      return {
        kind: "decided",
        approval: decided,
        runReady: this.ofRun(approval.runId).every((other) => other.status !== "pending"),
      };
    },

    /** Marks pending approvals past their time as expired (of the sessions `owns` accepts); returns them. */
    expire(sessionPrefix: string, now = new Date(), owns: (sessionId: string) => boolean = () => true): Approval[] {
      const due = all(statements.expired.all(now.toISOString(), `${sessionPrefix}%`)).filter((approval) =>
        owns(approval.sessionId),
      );
      return due
        .filter(
          (approval) => statements.decide.run("expired", "expired", now.toISOString(), null, approval.id).changes === 1,
        )
        .map((approval) => ({
          ...approval,
          status: "expired" as const,
          decidedBy: "expired",
          decidedAt: now.toISOString(),
        }));
    },

    /** The decisions of a run whose approvals are all settled, keyed by tool_call_id, as the executor takes them. */
    decisionsOf(runId: string): Record<string, ApprovalDecision> {
      return decisionsOf(this.ofRun(runId));
    },

    /**
     * Pending approvals of a session that a newer message makes moot: they expire, and their runs
     * end there (a later click finds nothing to resume; the model sees those calls as not run).
     */
    supersede(sessionId: string, now = new Date()): Approval[] {
      // Most messages find nothing waiting: no transaction for them. IMMEDIATE for the others, as
      // this reads before it writes (see SqliteStore.atomically).
      if (this.pendingOfSession(sessionId).length === 0) return [];
      return db
        .transaction(() => {
          const at = now.toISOString();
          const moot = this.pendingOfSession(sessionId).filter(
            (approval) => statements.decide.run("expired", "superseded", at, null, approval.id).changes === 1,
          );
          if (moot.length > 0) statements.endSuperseded.run(at, sessionId);
          return moot.map((approval) => ({
            ...approval,
            status: "expired" as const,
            decidedBy: "superseded",
            decidedAt: at,
          }));
        })
        .immediate();
    },
  };
}

export type ApprovalBook = ReturnType<typeof createApprovalBook>;
