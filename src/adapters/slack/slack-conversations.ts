/**
 * The conversations of a Slack bot: runs shown in their threads through the Web API, approvals
 * updated in place. Built where the runs happen: the adapter's thread, or each worker thread.
 */
import type { WebClient } from "@slack/web-api";
import { createConversations, type Conversations } from "../../conversations/conversations.js";
import type { DailyLimits } from "../../agent/quota.js";
import type { AgentConfig } from "../../agent/run.js";
import type { StorePort } from "../../store/port.js";
import type { Pipelines } from "../../agent/sub-agents.js";
import type { SlackConfig } from "../../config.js";
import type { Logger } from "../../logger.js";
import { updateApprovalMessage } from "./approval-blocks.js";
import { placeOf } from "./slack-events.js";
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
