import type { Approval, ApprovalStatus } from "../agent/approvals.js";
import type { ApprovalPolicy } from "../tools/types.js";

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
  policy: string | null;
  /** JSON list of who approved so far. */
  approved_by: string | null;
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
  policy: row.policy ? (JSON.parse(row.policy) as ApprovalPolicy) : {},
  approvedBy: row.approved_by ? (JSON.parse(row.approved_by) as string[]) : [],
});

/** A request's policy as stored: NULL when its tool left everything to the deployment. */
export function policyColumn({
  approvers,
  requesterMayApprove,
  approvalsNeeded,
  requesterConfirms,
}: ApprovalPolicy): string | null {
  if ([approvers, requesterMayApprove, approvalsNeeded, requesterConfirms].every((value) => value === undefined))
    return null;
  return JSON.stringify({
    ...(approvers ? { approvers } : {}),
    ...(requesterMayApprove !== undefined ? { requesterMayApprove } : {}),
    ...(approvalsNeeded !== undefined ? { approvalsNeeded } : {}),
    ...(requesterConfirms ? { requesterConfirms } : {}),
  });
}
