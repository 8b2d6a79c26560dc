import type { DecisionOutcome } from "../agent/approvals.js";
import { decidersOf } from "../store/approval-rules.js";
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
      return undefined;
  }
}
