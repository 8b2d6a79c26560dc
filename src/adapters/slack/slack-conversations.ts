/**
 * The conversations of a Slack bot: runs shown in their threads through the Web API, approvals
 * updated in place. Built where the runs happen: the adapter's thread, or each worker thread.
 */
import { LogLevel, type Logger as SlackLogger, type WebClient, type WebClientOptions } from "@slack/web-api";
import type { Approval } from "../../agent/approvals.js";
import { createConversations, type Conversations } from "../../conversations/conversations.js";
import type { DailyLimits } from "../../agent/quota.js";
import type { AgentConfig } from "../../agent/run.js";
import type { StorePort } from "../../store/port.js";
import type { Pipelines } from "../../agent/sub-agents.js";
import type { SlackConfig } from "../../config.js";
import type { Logger } from "../../logger.js";
import { approvalOutcome } from "./approval-blocks.js";
import { undiciFetch } from "../../undici-fetch.js";
import { slackUserOf } from "./slack-oauth.js";
import { openSlackSurface } from "./slack-surface.js";

export interface SlackConversationOptions {
  client: WebClient;
  /** Installed in many workspaces: the client of each (by team id), used instead of `client`. */
  clientFor?: (teamId: string) => WebClient;
  agent: AgentConfig;
  /** The store port (SQLite's, or a worker's PostgreSQL). */
  store: StorePort;
  slack: SlackConfig;
  log: Logger;
  approvalTtlSeconds: number;
  dailyLimits?: DailyLimits;
  pipelines?: Pipelines;
  /** The sessions these conversations run, when worker threads share them out. */
  owns?: (sessionId: string) => boolean;
}

export function createSlackConversations(options: SlackConversationOptions): Conversations {
  const { client, log } = options;
  const clientOf = (sessionId: string) => options.clientFor?.(placeOf(sessionId, "").teamId) ?? client;
  return createConversations(options.agent, options.store, {
    openSurface: (sessionId, userId) => openSlackSurface(clientOf(sessionId), placeOf(sessionId, userId), log),
    showDecision: (approval) => updateApprovalMessage(clientOf(approval.sessionId), approval),
    approvers: options.slack.approvers,
    approvalTtlSeconds: options.approvalTtlSeconds,
    sessionPrefix: "slack:",
    pipelines: options.pipelines,
    dailyLimits: options.dailyLimits,
    owns: options.owns,
    onError: (error, context) => log.error({ error: (error as Error).message }, `Slack: failed ${context}`),
  });
}

/**
 * Session keys are slack:<team>:<channel>:<thread_ts>, or ...:main for a top-level direct message.
 * A user id may be `<team>:<user>` (installed in many workspaces): Slack wants the user part.
 */
export function placeOf(sessionId: string, userId: string) {
  const [, teamId = "", channel = "", thread = "main"] = sessionId.split(":");
  return { teamId, channel, userId: slackUserOf(userId), ...(thread === "main" ? {} : { threadTs: thread }) };
}

/** The buttons' message of a decided, expired or superseded approval: the outcome, no buttons. */
export async function updateApprovalMessage(client: WebClient, approval: Approval): Promise<void> {
  if (!approval.messageRef) return;
  const [channel = "", ts = ""] = approval.messageRef.split(":");
  await client.chat.update({ channel, ts, ...approvalOutcome(approval) });
}

/** How every Web API client of the bot talks to Slack: over undici, to SLACK_API_URL if set, logging to our log at warn and above. */
export function slackClientOptions(
  slack: SlackConfig,
  log: Logger,
): WebClientOptions & { logger: SlackLogger; logLevel: LogLevel } {
  return {
    fetch: undiciFetch,
    ...(slack.apiUrl ? { slackApiUrl: slack.apiUrl } : {}),
    logger: slackLogger(log),
    logLevel: LogLevel.WARN,
  };
}

function slackLogger(log: Logger): SlackLogger {
  let level = LogLevel.WARN;
  const child = log.child({ component: "bolt" });
  return {
    debug: (...messages) => child.debug(messages.map(String).join(" ")),
    info: (...messages) => child.info(messages.map(String).join(" ")),
    warn: (...messages) => child.warn(messages.map(String).join(" ")),
    error: (...messages) => child.error(messages.map(String).join(" ")),
    setLevel: (next) => {
      level = next;
    },
    getLevel: () => level,
    setName: () => {},
  };
}
