/**
 * The rules of a click, as data: where it may come from, who may decide, until when, and whether the
 * run still waits for exactly that call. The SQLite store applies them through the approval book
 * (sqlite-approvals.ts, the same rules); stores that decide in their own transactions use these.
 */
import type { PausedRun } from "../agent/run.js";
import type { ApprovalDecision } from "../tools/types.js";
import type { Approval, ClickOrigin, DecisionOutcome, DecisionRequest } from "./port-data.js";

/** Whether the click came from the platform place and message where the approval was posted. */
export function postedAt(approval: Approval, origin: ClickOrigin): boolean {
  // A prefix is whole segments: "discord:dm:12" must not match the session "discord:dm:123".
  const prefix = origin.sessionPrefix;
  const inPlace = prefix.endsWith(":")
    ? approval.sessionId.startsWith(prefix)
    : approval.sessionId === prefix || approval.sessionId.startsWith(`${prefix}:`);
  if (!inPlace) return false;
  // Buttons are posted before their message is recorded: a click can come first (or the poster died
  // in between). From the approval's own place it counts, and its message becomes the approval's.
  return origin.messageRef === undefined || approval.messageRef === null || approval.messageRef === origin.messageRef;
}

/** The message a decided approval is recorded on: its own, or the click's when it had none yet. */
export function messageOfDecision(approval: Approval, origin: ClickOrigin | undefined): string | null {
  return approval.messageRef ?? origin?.messageRef ?? null;
}

/** Whether a paused run (its stored JSON) waits for exactly this call with exactly these arguments. */
export function isWaitingFor(paused: string | undefined, approval: Approval): boolean {
  if (!paused) return false;
  const run = JSON.parse(paused) as PausedRun;
  return run.pending.some(
    (call) => call.call.id === approval.toolCallId && call.approval?.argumentsHash === approval.argumentsHash,
  );
}

/** Who may decide `approval`: its tool's policy, and what it leaves out the deployment's. */
export function decidersOf(
  approval: Pick<Approval, "policy">,
  deployment: Pick<DecisionRequest, "approvers" | "requesterMayApprove">,
): { approvers: string[]; requester: boolean } {
  return {
    approvers: approval.policy.approvers ?? deployment.approvers,
    requester:
      approval.policy.requesterConfirms === true ||
      (approval.policy.requesterMayApprove ?? deployment.requesterMayApprove ?? true),
  };
}

/**
 * Whether `userId` may decide: the requester when allowed (never as an approver of their own call, not
 * through a group either), else an approver: named, or in a group or role named (`memberOf`).
 */
export function mayDecide(
  approval: Pick<Approval, "policy" | "requester">,
  deployment: Pick<DecisionRequest, "approvers" | "requesterMayApprove">,
  userId: string,
  memberOf: readonly string[] = [],
): boolean {
  const deciders = decidersOf(approval, deployment);
  if (userId === approval.requester) return deciders.requester;
  return deciders.approvers.some((approver) => approver === userId || memberOf.includes(approver));
}

/** What a click comes to before anything is written: an outcome, or "decide" (the approval may be decided now). */
export function judgeClick(
  approval: Approval | undefined,
  request: DecisionRequest,
  paused: string | undefined,
): DecisionOutcome | { kind: "decide"; approval: Approval } {
  if (!approval || (request.origin && !postedAt(approval, request.origin))) return { kind: "unknown" };
  // A superseded approval is stored as expired, but for the person clicking it is stale.
  if (approval.status !== "pending") {
    return {
      kind:
        approval.status !== "expired" ? "already_decided" : approval.decidedBy === "superseded" ? "stale" : "expired",
      approval,
    };
  }
  if (!mayDecide(approval, request, request.userId, request.memberOf)) return { kind: "not_allowed", approval };
  if (request.approved && approval.approvedBy.includes(request.userId))
    return { kind: "not_allowed", approval, reason: "approved_already" };
  if (Date.parse(approval.expiresAt) <= (request.now ?? new Date()).getTime()) return { kind: "expired", approval };
  if (!isWaitingFor(paused, approval)) return { kind: "stale", approval };
  return { kind: "decide", approval };
}

/** How many different people must approve `approval` (its tool's rule; 1 by default). */
export const approvalsNeeded = (approval: Pick<Approval, "policy">): number => approval.policy.approvalsNeeded ?? 1;

/**
 * What a click that may decide writes: who approved so far, and whether it settles the approval (a
 * denial always does; an approval once enough different people have given theirs).
 */
export function approvalAfter(
  approval: Pick<Approval, "policy" | "approvedBy">,
  request: Pick<DecisionRequest, "userId" | "approved">,
): { approvedBy: string[]; settles: boolean } {
  if (!request.approved) return { approvedBy: approval.approvedBy, settles: true };
  const approvedBy = [...approval.approvedBy, request.userId];
  return { approvedBy, settles: approvedBy.length >= approvalsNeeded(approval) };
}

/** The decisions of a run's settled approvals, keyed by tool_call_id, as the executor takes them. */
export function decisionsOf(approvals: Approval[]): Record<string, ApprovalDecision> {
  const decisions: Record<string, ApprovalDecision> = {};
  for (const approval of approvals) {
    if (approval.status === "pending") continue;
    decisions[approval.toolCallId] = {
      approved: approval.status === "approved",
      by: approval.decidedBy ?? approval.status,
      ...(approval.approvedBy.length > 1 ? { approvedBy: approval.approvedBy } : {}),
      argumentsHash: approval.argumentsHash,
      ...(approval.status === "expired" ? { reason: "nobody approved it in time" } : {}),
    };
  }
  return decisions;
}
