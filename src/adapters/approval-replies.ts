import type { Approval, DecisionOutcome } from "../agent/approvals.js";
import { approvalsNeeded, decidersOf } from "../store/approval-rules.js";
import type { DecisionRequest } from "../store/port-data.js";

/** How many approvers a refusal names before it says "or another approver". */
const NAMED_APPROVERS = 5;

/**
 * The one sentence a person gets when their click decided nothing. Both platforms write a mention as
 * <@id>; Slack passes its own, as a user of a many-workspace install is kept as `<team>:<user>`.
 */
export function refusalFor(
  outcome: DecisionOutcome,
  deployment: Pick<DecisionRequest, "approvers" | "requesterMayApprove">,
  mention: (userId: string) => string = (userId) => `<@${userId}>`,
): string | undefined {
  switch (outcome.kind) {
    case "not_allowed": {
      if (outcome.reason === "approved_already") return `You approved this already; ${stillNeeded(outcome.approval)}.`;
      const { approvers, requester } = decidersOf(outcome.approval, deployment);
      if (requester)
        return `Only ${mention(outcome.approval.requester)}${approvers.length > 0 ? " or an approver" : ""} can approve this.`;
      const who = outcome.approval.requester;
      const others = approvers.filter((approver) => approver !== who);
      if (others.length === 0)
        return `This needs someone other than ${mention(who)} to approve it, and nobody is set to; ask an admin to name an approver.`;
      const named = others.slice(0, NAMED_APPROVERS).map(mention);
      const rest = others.length > NAMED_APPROVERS ? " or another approver" : "";
      return `This needs someone other than ${mention(who)} to approve it: ${named.join(", ")}${rest}.`;
    }
    case "already_decided":
      return "This was already decided.";
    case "expired":
      return "This request has expired; ask me again if it is still needed.";
    case "stale":
    case "unknown":
      return "This request is no longer waiting for a decision.";
    case "decided":
    case "counted":
      return undefined;
  }
}

/** Who approved a settled approval: everyone, under a rule of several approvals; else who decided. */
export function approvers(approval: Approval, mention: (userId: string) => string = (id) => `<@${id}>`): string {
  const given = approval.approvedBy.length > 1 ? approval.approvedBy : [approval.decidedBy ?? "someone"];
  return given.map(mention).join(" and ");
}

/** What a rule of several approvals still waits for: "it needs one more approval, from someone else". */
function stillNeeded(approval: Approval): string {
  const left = approvalsNeeded(approval) - approval.approvedBy.length;
  return `it needs ${left === 1 ? "one more approval" : `${left} more approvals`}, from someone else`;
}

/**
 * Who may decide a pending approval, as its card says it (no final stop): the requester or an
 * approver; under a rule of several approvals, how many, whether the requester counts, and who
 * approved so far. Approvers are named where the call's tool or channel names them.
 */
export function whoDecides(approval: Approval, mention: (userId: string) => string = (id) => `<@${id}>`): string {
  const { approvers, requesterMayApprove } = approval.policy;
  const requester = mention(approval.requester);
  const others = approvers?.filter((id) => id !== approval.requester && !approval.approvedBy.includes(id));
  const named = others?.length ? others.slice(0, NAMED_APPROVERS).map(mention).join(", ") : undefined;
  const needed = approvalsNeeded(approval);
  if (needed > 1) {
    const given = approval.approvedBy.length;
    return [
      `Needs ${needed} approvals from different people${requesterMayApprove === false ? `, not ${requester}` : ""}`,
      given > 0 ? `; ${given} of ${needed} so far, by ${approval.approvedBy.map(mention).join(", ")}` : "",
      named ? `; approvers: ${named}` : "",
    ].join("");
  }
  if (requesterMayApprove === false)
    return `Only an approver other than ${requester} can decide${named ? `: ${named}` : ""}`;
  return `Only ${requester} or ${named ? `an approver (${named})` : "an approver"} can decide`;
}
