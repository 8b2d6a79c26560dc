import type { DecisionOutcome } from "../agent/approvals.js";

/** The one sentence a person gets when their click decided nothing (mentions use <@id> on both Slack and Discord). */
export function refusalFor(outcome: DecisionOutcome, hasApprovers: boolean): string | undefined {
  switch (outcome.kind) {
    case "not_allowed":
      return `Only <@${outcome.approval.requester}>${hasApprovers ? " or an approver" : ""} can approve this.`;
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
