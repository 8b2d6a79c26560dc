/** Block Kit messages for approvals: the question with Approve / Deny buttons, and its outcome. */
import type { KnownBlock } from "@slack/types";
import type { Approval } from "../../agent/approvals.js";

export const APPROVE_ACTION = "glassbox_approve";
export const DENY_ACTION = "glassbox_deny";
const ARGUMENTS_LIMIT = 2_500; // a section's text may hold 3,000 characters

export function approvalQuestion(approval: Approval): { text: string; blocks: KnownBlock[] } {
  const text = `<@${approval.requester}> asked me to run ${approval.toolName}. Approve?`;
  return {
    text,
    blocks: [
      ...approvalHeader(approval),
      {
        type: "context",
        elements: [{ type: "mrkdwn", text: `Only <@${approval.requester}> or an approver can decide. Expires ${slackTime(approval.expiresAt)}.` }],
      },
      {
        type: "actions",
        block_id: "glassbox_approval",
        elements: [
          { type: "button", action_id: APPROVE_ACTION, style: "primary", text: { type: "plain_text", text: "Approve" }, value: approval.id },
          { type: "button", action_id: DENY_ACTION, style: "danger", text: { type: "plain_text", text: "Deny" }, value: approval.id },
        ],
      },
    ],
  };
}

/** The same message once decided: no buttons, who decided and when. */
export function approvalOutcome(approval: Approval): { text: string; blocks: KnownBlock[] } {
  const when = approval.decidedAt ? ` at ${slackTime(approval.decidedAt)}` : "";
  const outcome =
    approval.status === "approved"
      ? `:white_check_mark: Approved by <@${approval.decidedBy}>${when}`
      : approval.status === "denied"
        ? `:x: Denied by <@${approval.decidedBy}>${when}`
        : approval.decidedBy === "superseded"
          ? ":hourglass: No longer needed: the conversation moved on before anyone decided."
          : ":hourglass: Expired: nobody decided in time, so it was not run.";
  return { text: `${approval.toolName}: ${outcome}`, blocks: [...approvalHeader(approval), { type: "context", elements: [{ type: "mrkdwn", text: outcome }] }] };
}

function approvalHeader(approval: Approval): KnownBlock[] {
  let args = JSON.stringify(approval.arguments, null, 2);
  if (args.length > ARGUMENTS_LIMIT) args = `${args.slice(0, ARGUMENTS_LIMIT)}\n… (${args.length - ARGUMENTS_LIMIT} more characters)`;
  return [
    { type: "section", text: { type: "mrkdwn", text: `:lock: *Approval needed*: <@${approval.requester}> asked me to run \`${approval.toolName}\`` } },
    { type: "section", text: { type: "mrkdwn", text: `\`\`\`${args}\`\`\`` } },
  ];
}

/** A time Slack shows in each reader's own time zone, with UTC as the fallback text. */
function slackTime(iso: string): string {
  const date = new Date(iso);
  const fallback = `${date.toISOString().slice(11, 16)} UTC`;
  return `<!date^${Math.floor(date.getTime() / 1000)}^{time}|${fallback}>`;
}
