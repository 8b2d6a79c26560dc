/**
 * "What can you do here?" as a button: the reply to an empty mention carries it, and a click asks the
 * question in that thread for the person who clicked (a worker answers it, as it answers the words).
 */
import type { BlockAction } from "@slack/bolt";
import type { KnownBlock } from "@slack/types";
import { CAPABILITIES_QUESTION_TEXT } from "../../conversations/capabilities.js";
import { slackSessionKey } from "./slack-events.js";
import { mrkdwnText } from "./slack-text.js";

export const CAPABILITIES_ACTION = "glassbox_capabilities";

/** The empty mention's reply: what to ask, and the button. */
export function withCapabilitiesButton(text: string): { text: string; blocks: KnownBlock[] } {
  return {
    text,
    blocks: [
      { type: "section", text: { type: "mrkdwn", text: mrkdwnText(text) } },
      {
        type: "actions",
        elements: [
          {
            type: "button",
            action_id: CAPABILITIES_ACTION,
            text: { type: "plain_text", text: CAPABILITIES_QUESTION_TEXT },
            value: "capabilities",
          },
        ],
      },
    ],
  };
}

/** The conversation the clicked reply is in: its thread in a channel, a DM's thread or its top level. */
export function sessionOfClick(body: Pick<BlockAction, "team" | "channel" | "message">): string | undefined {
  const channel = body.channel?.id;
  const message = body.message as { ts?: string; thread_ts?: string } | undefined;
  if (!channel || !message?.ts || !body.team?.id) return undefined;
  return slackSessionKey({
    teamId: body.team.id,
    channel,
    ts: message.ts,
    threadTs: message.thread_ts,
    isDirect: channel.startsWith("D"),
  });
}
