/**
 * One worker thread of a Slack bot with GLASSBOX_WORKERS above 1: it builds the agent from the
 * configuration (its own store connection, model client, tools and MCP connections) and a Web API
 * client, and runs the conversations of its share of the sessions as the adapter hands them over.
 */
import { workerData } from "node:worker_threads";
import { webApi } from "@slack/bolt";
import type { GlassboxConfig, SlackConfig } from "../../config.js";
import { createAgentConfig } from "../../setup.js";
import {
  reportStartFailure,
  serveConversations,
  shardOf,
  workerLogger,
  type ShardData,
} from "../conversation-workers.js";
import { slackClientOptions } from "./slack-client-options.js";
import { createSlackConversations } from "./slack-conversations.js";
import { createWorkspaceClients, openSlackInstallations } from "./slack-oauth.js";

export interface SlackWorkerData extends ShardData {
  config: GlassboxConfig;
  slack: SlackConfig;
  approvalTtlSeconds: number;
}

const { config, slack, approvalTtlSeconds, shard, shards, logLevel } = workerData as SlackWorkerData;
const log = workerLogger(logLevel);
try {
  const agent = await createAgentConfig(config, log);
  const client = new webApi.WebClient(slack.botToken, slackClientOptions(slack, log));
  // Installed in many workspaces: each run posts with its workspace's token, looked up here.
  const installations = slack.oauth ? await openSlackInstallations(slack.oauth) : undefined;
  const conversations = createSlackConversations({
    client,
    clientFor: installations && createWorkspaceClients(installations, slackClientOptions(slack, log)),
    agent,
    store: agent.port,
    slack,
    log,
    approvalTtlSeconds,
    dailyLimits: config.dailyLimits,
    pipelines: agent.pipelines,
    owns: (sessionId) => shardOf(sessionId, shards) === shard,
  });
  serveConversations(conversations, async () => {
    await installations?.close();
    await agent.close();
  });
} catch (error) {
  reportStartFailure(error);
}
