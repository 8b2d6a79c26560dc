import type { Approval, DecisionOutcome } from "../agent/approvals.js";
import { approvalsNeeded, decidersOf } from "../store/approval-rules.js";
import type { DecisionRequest } from "../store/port-data.js";
import { approverEntry } from "../tools/approver-entries.js";

/**
 * How a platform names an approver entry (a person, a group, a role) in its own mention form;
 * undefined for an entry only another platform has (a Discord role on Slack), which is left out.
 */
export type Mention = (entry: string) => string | undefined;

/** Discord's forms: <@id> for a person, <@&id> for a role (shown without a ping: see NO_PINGS). */
export const discordMention: Mention = (entry) => {
  const named = approverEntry(entry);
  return named.kind === "user" ? `<@${named.id}>` : named.kind === "role" ? `<@&${named.id}>` : undefined;
};

/** Approvers as named in a sentence: each in the platform's form, another platform's left out. */
const namedIn = (entries: readonly string[], mention: Mention): string[] =>
  entries.flatMap((entry) => mention(entry) ?? []);

/** How many approvers a refusal names before it says "or another approver". */
const NAMED_APPROVERS = 5;

/**
 * The one sentence a person gets when their click decided nothing, naming who could (people, groups,
 * roles). Discord's mentions are the default; Slack passes its own, as a user of a many-workspace
 * install is kept as `<team>:<user>` and a user group is written <!subteam^ID>.
 */
export function refusalFor(
  outcome: DecisionOutcome,
  deployment: Pick<DecisionRequest, "approvers" | "requesterMayApprove">,
  approverMention: Mention = discordMention,
): string | undefined {
  const mention = (userId: string) => approverMention(userId) ?? userId;
  switch (outcome.kind) {
    case "not_allowed": {
      if (outcome.reason === "approved_already") return `You approved this already; ${stillNeeded(outcome.approval)}.`;
      const { approvers, requester } = decidersOf(outcome.approval, deployment);
      const who = outcome.approval.requester;
      const others = namedIn(
        approvers.filter((approver) => approver !== who),
        approverMention,
      );
      if (requester) {
        const named = others.slice(0, NAMED_APPROVERS).join(", ");
        const also = others.length > NAMED_APPROVERS ? " or another approver" : "";
        return `Only ${mention(who)}${others.length > 0 ? ` or an approver (${named}${also})` : ""} can approve this.`;
      }
      if (others.length === 0)
        return `This needs someone other than ${mention(who)} to approve it, and nobody is set to; ask an admin to name an approver.`;
      const named = others.slice(0, NAMED_APPROVERS);
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
export function whoDecides(approval: Approval, approverMention: Mention = discordMention): string {
  const mention = (userId: string) => approverMention(userId) ?? userId;
  const { approvers, requesterMayApprove } = approval.policy;
  const requester = mention(approval.requester);
  const others = namedIn(
    approvers?.filter((id) => id !== approval.requester && !approval.approvedBy.includes(id)) ?? [],
    approverMention,
  );
  const named = others.length ? others.slice(0, NAMED_APPROVERS).join(", ") : undefined;
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
