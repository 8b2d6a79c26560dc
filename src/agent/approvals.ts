/**
 * Durable approvals: a dangerous call that waits for a person is a row in SQLite, bound to one exact
 * call (run id, tool_call_id, argument hash), decided once, by the requester or an approver, before
 * it expires. The approval book is SQLite's (the store port's SQLite implementation, the web API
 * and the Slack adapter use it); conversations decide through the store port, on either store.
 */
import { randomUUID } from "node:crypto";
import type { ApprovalDecision, ApprovalRequest } from "../tools/types.js";
import { decisionsOf, judgeClick, messageOfDecision } from "../store/approval-rules.js";
import type { Store } from "./store.js";

export type ApprovalStatus = "pending" | "approved" | "denied" | "expired";

export interface Approval {
  id: string;
  runId: string;
  sessionId: string;
  toolCallId: string;
  toolName: string;
  arguments: Record<string, unknown>;
  argumentsHash: string;
  /** Who asked for the run that wants this call. */
  requester: string;
  status: ApprovalStatus;
  decidedBy: string | null;
  decidedAt: string | null;
  expiresAt: string;
  /** Where the platform shows the buttons (e.g. a Slack channel and ts), to update them later. */
  messageRef: string | null;
}

/**
 * Where a click came from, as the platform vouches for it: an approval is decided only in the
 * workspace or guild, and on the message, where it was posted. A click carrying another place's
 * approval id finds nothing ("unknown"), so ids say nothing about other conversations.
 */
export interface ClickOrigin {
  /** The session keys of the platform and workspace or guild the click came from ("slack:T1:", "discord:G1:", "discord:dm:D1"). */
  sessionPrefix: string;
  /** The message that carried the buttons, in the form the adapter stored as `messageRef`. */
  messageRef?: string;
}

export type DecisionOutcome =
  | { kind: "decided"; approval: Approval; runReady: boolean }
  | { kind: "not_allowed"; approval: Approval }
  | { kind: "already_decided"; approval: Approval }
  | { kind: "expired"; approval: Approval }
  | { kind: "stale"; approval: Approval }
  | { kind: "unknown" };

/** An approvals row, as both stores keep it. */
export interface ApprovalRow {
  id: string;
  run_id: string;
  session_id: string;
  tool_call_id: string;
  tool_name: string;
  arguments: string;
  arguments_hash: string;
  requester: string;
  status: ApprovalStatus;
  decided_by: string | null;
  decided_at: string | null;
  expires_at: string;
  message_ref: string | null;
}

export const toApproval = (row: ApprovalRow): Approval => ({
  id: row.id,
  runId: row.run_id,
  sessionId: row.session_id,
  toolCallId: row.tool_call_id,
  toolName: row.tool_name,
  arguments: JSON.parse(row.arguments) as Record<string, unknown>,
  argumentsHash: row.arguments_hash,
  requester: row.requester,
  status: row.status,
  decidedBy: row.decided_by,
  decidedAt: row.decided_at,
  expiresAt: row.expires_at,
  messageRef: row.message_ref,
});

export function createApprovalBook(store: Store) {
  const { db } = store;
  const statements = {
    insert:
      db.prepare(`INSERT INTO approvals (id, run_id, session_id, tool_call_id, tool_name, arguments, arguments_hash, requester, status, expires_at, created_at)
      VALUES (@id, @runId, @sessionId, @toolCallId, @toolName, @arguments, @argumentsHash, @requester, 'pending', @expiresAt, @createdAt)
      ON CONFLICT (run_id, tool_call_id) DO NOTHING`),
    byId: db.prepare("SELECT * FROM approvals WHERE id = ?"),
    byCall: db.prepare("SELECT * FROM approvals WHERE run_id = ? AND tool_call_id = ?"),
    ofRun: db.prepare("SELECT * FROM approvals WHERE run_id = ? ORDER BY created_at, id"),
    decide: db.prepare(
      "UPDATE approvals SET status = ?, decided_by = ?, decided_at = ?, message_ref = COALESCE(message_ref, ?) WHERE id = ? AND status = 'pending'",
    ),
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
    decide(
      id: string,
      userId: string,
      approved: boolean,
      approvers: string[],
      origin?: ClickOrigin,
      now = new Date(),
    ): DecisionOutcome {
      const found = this.get(id);
      const judged = judgeClick(
        found,
        { approvalId: id, userId, approved, approvers, origin, now },
        found && store.pausedRun(found.runId),
      );
      if (judged.kind !== "decide") return judged;
      const { approval } = judged;
      if (
        statements.decide.run(
          approved ? "approved" : "denied",
          userId,
          now.toISOString(),
          messageOfDecision(approval, origin),
          id,
        ).changes !== 1
      ) {
        return { kind: "already_decided", approval: this.get(id) ?? approval };
      }
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
      // this reads before it writes (see Store.atomically).
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
