/** Block Kit messages for approvals: the question with Approve / Deny buttons, and its outcome (updating the question in place). */
import type { KnownBlock } from "@slack/types";
import type { WebClient } from "@slack/web-api";
import type { Approval } from "../../agent/approvals.js";
import { approverEntry } from "../../tools/approver-entries.js";
import { approvers, type Mention, whoDecides } from "../approval-replies.js";
import { argumentsForDisplay, codeName } from "../describe-call.js";
import { slackUserOf } from "./slack-oauth.js";
import { mrkdwnText } from "./slack-text.js";

export const APPROVE_ACTION = "glassbox_approve";
export const DENY_ACTION = "glassbox_deny";
const ARGUMENTS_LIMIT = 2_900; // a section's text may hold 3,000 characters, the fences and the note included

/** A person as Slack writes a mention; a user of a many-workspace install is kept as `<team>:<user>`. */
export const slackMention = (userId: string | null): string => (userId ? `<@${slackUserOf(userId)}>` : "someone");

/**
 * An approver as Slack mentions one: a person, or a user group (<!subteam^ID>, which notifies its
 * members where a message is posted, as a named person is); a Discord role is no approver here.
 */
export const slackApprover: Mention = (entry) => {
  const named = approverEntry(entry);
  return named.kind === "user" ? slackMention(named.id) : named.kind === "group" ? `<!subteam^${named.id}>` : undefined;
};

// The tool's name and arguments come from the model: they are escaped (mrkdwnText); the mentions
// and dates around them are the bot's own.
export function approvalQuestion(approval: Approval): { text: string; blocks: KnownBlock[] } {
  const requester = slackMention(approval.requester);
  const confirms = approval.policy.requesterConfirms === true;
  const text = confirms
    ? `${requester}, confirm ${toolName(approval)} in your name?`
    : `${requester} asked me to run ${toolName(approval)}. Approve?`;
  const who = confirms
    ? `${requester}, approve it only if you asked for it: it is done in your name, so you can confirm it whoever decides other calls here (an approver can too).`
    : `${whoDecides(approval, slackApprover)}.`;
  return {
    text,
    blocks: [
      ...approvalHeader(approval),
      {
        type: "context",
        elements: [{ type: "mrkdwn", text: `${who} Expires ${slackTime(approval.expiresAt)}.` }],
      },
      {
        type: "actions",
        block_id: "glassbox_approval",
        elements: [
          {
            type: "button",
            action_id: APPROVE_ACTION,
            style: "primary",
            text: { type: "plain_text", text: "Approve" },
            value: approval.id,
          },
          {
            type: "button",
            action_id: DENY_ACTION,
            style: "danger",
            text: { type: "plain_text", text: "Deny" },
            value: approval.id,
          },
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
      ? `:white_check_mark: Approved by ${approvers(approval, slackMention)}${when}`
      : approval.status === "denied"
        ? `:x: Denied by ${slackMention(approval.decidedBy)}${when}`
        : approval.decidedBy === "superseded"
          ? ":hourglass: No longer needed: the conversation moved on before anyone decided."
          : ":hourglass: Expired: nobody decided in time, so it was not run.";
  return {
    text: `${toolName(approval)}: ${outcome}`,
    blocks: [...approvalHeader(approval), { type: "context", elements: [{ type: "mrkdwn", text: outcome }] }],
  };
}

function approvalHeader(approval: Approval): KnownBlock[] {
  // No backtick is left in the arguments to close the block early, nor a raw <, > or & to command.
  const args = argumentsForDisplay(approval.arguments, ARGUMENTS_LIMIT, mrkdwnText);
  const requester = slackMention(approval.requester);
  return [
    {
      type: "section",
      text: {
        type: "mrkdwn",
        text:
          approval.policy.requesterConfirms === true
            ? `:lock: *Confirmation needed*: I would run \`${toolName(approval)}\` in ${requester}'s name`
            : `:lock: *Approval needed*: ${requester} asked me to run \`${toolName(approval)}\``,
      },
    },
    { type: "section", text: { type: "mrkdwn", text: `\`\`\`${args}\`\`\`` } },
  ];
}

function toolName(approval: Approval): string {
  return mrkdwnText(codeName(approval.toolName));
}

/** A time Slack shows in each reader's own time zone, with UTC as the fallback text. */
function slackTime(iso: string): string {
  const date = new Date(iso);
  const fallback = `${date.toISOString().slice(11, 16)} UTC`;
  return `<!date^${Math.floor(date.getTime() / 1000)}^{time}|${fallback}>`;
}

/**
 * The buttons' message as the approval now stands: decided, expired or superseded, its outcome
 * without buttons; still pending (an approval counted toward a rule of several), the question with
 * who approved so far.
 */
export async function updateApprovalMessage(client: WebClient, approval: Approval): Promise<void> {
  if (!approval.messageRef) return;
  const [channel = "", ts = ""] = approval.messageRef.split(":");
  const shown = approval.status === "pending" ? approvalQuestion(approval) : approvalOutcome(approval);
  await client.chat.update({ channel, ts, ...shown });
}
