import type { DecisionOutcome } from "../agent/approvals.js";

/**
 * The one sentence a person gets when their click decided nothing. Both platforms write a mention as
 * <@id>; Slack passes its own, as a user of a many-workspace install is kept as `<team>:<user>`.
 */
export function refusalFor(
  outcome: DecisionOutcome,
  hasApprovers: boolean,
  mention: (userId: string) => string = (userId) => `<@${userId}>`,
): string | undefined {
  switch (outcome.kind) {
    case "not_allowed":
      return `Only ${mention(outcome.approval.requester)}${hasApprovers ? " or an approver" : ""} can approve this.`;
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
