/**
 * Where a worker process shows the runs it runs, by session key: Slack threads through the Web API
 * (the team's own bot token when the app is installed in many workspaces), Discord channels through
 * discord.js REST (a worker holds no gateway connection: ingress has it), and HTTP API sessions
 * nowhere (the API reads the results from the store).
 */
import { webApi } from "@slack/bolt";
import type { WebClient } from "@slack/web-api";
import { Client, Routes } from "discord.js";
import type { ChatSurface } from "../agent/conversations.js";
import type { GlassboxConfig } from "../config.js";
import type { Logger } from "../logger.js";
import { approvalOutcomeText, NO_PINGS, openDiscordSurface } from "../adapters/discord/discord-surface.js";
import { placeOf, slackClientOptions, updateApprovalMessage } from "../adapters/slack/slack-conversations.js";
import { createWorkspaceClients, openSlackInstallations, type SlackInstallations } from "../adapters/slack/slack-oauth.js";
import { openSlackSurface } from "../adapters/slack/slack-surface.js";
import type { Approval } from "../store/port.js";

export interface WorkerSurfaces {
  openSurface(sessionId: string, userId: string): ChatSurface;
  /** Updates the buttons' message of an approval decided, expired or superseded here. */
  showDecision(approval: Approval): Promise<void>;
  close(): Promise<void>;
}

/** What a session of a platform this worker is not configured for shows: nothing (its run is still stored). */
const NO_SURFACE: ChatSurface = { onEvent: () => {}, finish: async () => {}, askApproval: async () => undefined };

export async function openWorkerSurfaces(config: Pick<GlassboxConfig, "slack" | "discord">, log: Logger): Promise<WorkerSurfaces> {
  const slack = config.slack ? await slackClients(config.slack, log) : undefined;
  const discord = config.discord ? restOnlyDiscordClient(config.discord) : undefined;
  const unconfigured = new Set<string>();
  /** A session of a platform this process has no settings for: said once per platform, then shown nowhere. */
  const nowhere = (platform: string) => {
    if (!unconfigured.has(platform)) log.warn({ platform }, `a ${platform} conversation's turn reached a worker without ${platform} settings; its answers are stored but not posted`);
    unconfigured.add(platform);
    return NO_SURFACE;
  };

  return {
    openSurface(sessionId, userId) {
      if (sessionId.startsWith("slack:")) return slack ? openSlackSurface(slack.clientOf(sessionId), placeOf(sessionId, userId), log) : nowhere("Slack");
      if (sessionId.startsWith("discord:")) return discord ? openDiscordSurface(discord, discordChannelOf(sessionId), log) : nowhere("Discord");
      return NO_SURFACE;
    },
    async showDecision(approval) {
      if (approval.sessionId.startsWith("slack:") && slack) await updateApprovalMessage(slack.clientOf(approval.sessionId), approval);
      else if (approval.sessionId.startsWith("discord:") && discord) await updateDiscordApproval(discord, approval);
    },
    async close() {
      await slack?.installations?.close();
      await discord?.destroy();
    },
  };
}

/** One workspace's client (SLACK_BOT_TOKEN), or one per workspace whose token is read from the installations. */
async function slackClients(slack: NonNullable<GlassboxConfig["slack"]>, log: Logger): Promise<{ clientOf(sessionId: string): WebClient; installations?: SlackInstallations }> {
  const options = slackClientOptions(slack, log);
  if (!slack.oauth) {
    const client = new webApi.WebClient(slack.botToken, options);
    return { clientOf: () => client };
  }
  const installations = await openSlackInstallations(slack.oauth);
  const clientFor = createWorkspaceClients(installations, options);
  return { clientOf: (sessionId) => clientFor(placeOf(sessionId, "").teamId), installations };
}

/** discord.js with its REST half only: channels are fetched (and posted to) over REST, never the gateway. */
function restOnlyDiscordClient(discord: NonNullable<GlassboxConfig["discord"]>): Client {
  const client = new Client({ intents: [], allowedMentions: NO_PINGS, ...(discord.apiUrl ? { rest: { api: discord.apiUrl } } : {}) });
  client.rest.setToken(discord.token);
  return client;
}

/** discord:dm:<channel>, discord:<guild>:<channel>[:<thread>]: the channel (or thread) the run posts in. */
function discordChannelOf(sessionId: string): string {
  return sessionId.split(":").at(-1) ?? "";
}

async function updateDiscordApproval(client: Client, approval: Approval): Promise<void> {
  if (!approval.messageRef) return;
  const [channelId = "", messageId = ""] = approval.messageRef.split(":");
  await client.rest.patch(Routes.channelMessage(channelId, messageId), { body: { content: approvalOutcomeText(approval), components: [], allowed_mentions: { parse: [] } } });
}
