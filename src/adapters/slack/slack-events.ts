/**
 * What a Slack event means for glassbox, as plain functions: which messages are questions, the
 * conversation (session key) a message belongs to, its input without the bot's mention, "stop",
 * the ids that claim it, and where a button click came from. Shared by every process that receives
 * Slack events: the in-process adapter and the ingress role.
 */
import type { BlockAction } from "@slack/bolt";
import type { ClickOrigin } from "../../agent/approvals.js";
import { slackUserOf } from "./slack-oauth.js";

/** What Slack sends for a message we may answer (an app_mention or a direct message). */
export interface SlackMessageEvent {
  eventId: string;
  teamId: string;
  channel: string;
  user?: string;
  text?: string;
  ts: string;
  threadTs?: string;
  botId?: string;
  subtype?: string;
  isDirect: boolean;
  /** The files shared with the message (Slack file objects; see slack-files.ts). */
  files?: unknown;
}

/** Edits, deletions, joins and other bots are not questions; a message that shares a file is. */
export function isQuestion(
  message: SlackMessageEvent,
  botUserId: string,
): message is SlackMessageEvent & { user: string } {
  if (message.botId || !message.user || message.user === botUserId) return false;
  return !message.subtype || message.subtype === "file_share";
}

/** The thread a message starts or continues; undefined for a top-level direct message. */
export function threadOf(message: Pick<SlackMessageEvent, "ts" | "threadTs" | "isDirect">): string | undefined {
  return message.threadTs ?? (message.isDirect ? undefined : message.ts);
}

/** slack:<team>:<channel>:<thread_ts>, or ...:main for a top-level direct message. */
export function slackSessionKey(
  message: Pick<SlackMessageEvent, "teamId" | "channel" | "ts" | "threadTs" | "isDirect">,
): string {
  return `slack:${message.teamId}:${message.channel}:${threadOf(message) ?? "main"}`;
}

/**
 * Session keys are slack:<team>:<channel>:<thread_ts>, or ...:main for a top-level direct message.
 * A user id may be `<team>:<user>` (installed in many workspaces): Slack wants the user part.
 */
export function placeOf(sessionId: string, userId: string) {
  const [, teamId = "", channel = "", thread = "main"] = sessionId.split(":");
  return { teamId, channel, userId: slackUserOf(userId), ...(thread === "main" ? {} : { threadTs: thread }) };
}

/**
 * The ids that claim a message: its event id (a retry or a second Socket Mode connection resends
 * it) and its channel and ts (the same message can arrive as both an app_mention and a message).
 */
export function slackEventIds(message: Pick<SlackMessageEvent, "eventId" | "channel" | "ts">): string[] {
  return [`slack:event:${message.eventId}`, `slack:message:${message.channel}:${message.ts}`];
}

/** The text without the bot's own mentions, trimmed. */
export function inputOf(text: string | undefined, botUserId: string): string {
  return (text ?? "").split(`<@${botUserId}>`).join("").trim();
}

export const isStopCommand = (input: string): boolean => /^stop[.!]?$/i.test(input);

/**
 * Where a click came from, as Slack signed it: the workspace and channel (the start of the
 * session key, slack:<team>:<channel>:) and the message, as the surface stored it (<channel>:<ts>).
 * The workspace is `team.id`; `user.team_id` is the Enterprise Grid org there, so it never stands in.
 * In an org-wide install `team` can be null: the channel (unique across the org) and the message
 * then still pin the click to where its buttons were posted.
 */
export function clickOrigin(body: Pick<BlockAction, "team" | "channel" | "message">): ClickOrigin {
  const channel = body.channel?.id ?? "";
  const messageRef = `${channel}:${body.message?.ts ?? ""}`;
  return { sessionPrefix: body.team?.id ? `slack:${body.team.id}:${channel}:` : "slack:", messageRef };
}
