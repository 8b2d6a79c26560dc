/**
 * Where a worker process shows the runs it runs, by session key: Slack threads through the Web API
 * (the team's own bot token when the app is installed in many workspaces), Discord channels through
 * discord.js REST (a worker holds no gateway connection: ingress has it), and web sessions (the chat
 * page, the HTTP API) by their streamed answer text alone (text-relay.ts; ingress reads the rest from
 * the store). Before a redelivered turn posts a stored answer,
 * the Slack and Discord surfaces read their conversation back (shownAlready): the worker that died
 * may have posted it already. It also fetches the files a message's turn names (ingress passed
 * their references only): Slack's with the workspace's bot token, sent only to Slack's hosts;
 * Discord's signed CDN links with no token; bounded as the adapters fetch them. And it reads a
 * thread's earlier messages before a mention in it (slack-thread.ts, discord-thread.ts).
 */
import { webApi } from "@slack/bolt";
import type { WebClient } from "@slack/web-api";
import { Client, Routes } from "discord.js";
import { cleanName, type Attachment } from "../agent/attachments.js";
import type { ReceiveFiles } from "../conversations/queued-turns.js";
import type { ReadThread } from "../conversations/thread-context.js";
import type { ChatSurface } from "../conversations/conversations.js";
import type { GlassboxConfig } from "../config.js";
import type { Logger } from "../logger.js";
import type { Downloaded } from "./attachment-download.js";
import { fetchDiscordFiles } from "./discord/discord-files.js";
import { approvalOutcomeText, NO_PINGS, openDiscordSurface } from "./discord/discord-surface.js";
import { updateApprovalMessage } from "./slack/approval-blocks.js";
import { slackClientOptions } from "./slack/slack-client-options.js";
import { placeOf } from "./slack/slack-events.js";
import { createWorkspaceClients, openSlackInstallations, type SlackInstallations } from "./slack/slack-oauth.js";
import { downloadSlackFiles } from "./slack/slack-files.js";
import { openSlackSurface } from "./slack/slack-surface.js";
import { createSlackThreadReader } from "./slack/slack-thread.js";
import { createDiscordThreadReader } from "./discord/discord-thread.js";
import { createAgentSessions } from "./slack/slack-agent-view.js";
import { withoutBroadcasts } from "./slack/slack-text.js";
import type { TurnFile } from "../conversations/turn-files.js";
import type { Approval } from "../store/port.js";
import type { TextNotice } from "../store/port-data.js";
import { createTextRelay } from "./web/text-relay.js";
import { traceLinkOf } from "./trace-link.js";
import type { UploadShelf } from "./web/web-uploads.js";

export interface WorkerSurfaces {
  openSurface(sessionId: string, userId: string): ChatSurface;
  /** Updates the buttons' message of an approval decided, expired or superseded here. */
  showDecision(approval: Approval): Promise<void>;
  /** Fetches a queued message's files for its run; says in the conversation which could not be read. */
  receiveFiles: ReceiveFiles;
  /** Reads a Slack or Discord thread's earlier messages before a mention in it. */
  readThread?: ReadThread;
  close(): Promise<void>;
}

/** What a session of a platform this worker is not configured for shows: nothing (its run is still stored). */
const NO_SURFACE: ChatSurface = { onEvent: () => {}, finish: async () => {}, askApproval: async () => undefined };

/** Where a web session's streamed answer text goes (the store's publishText). */
export type PublishText = (notice: TextNotice) => Promise<void>;

export async function openWorkerSurfaces(
  config: Pick<GlassboxConfig, "slack" | "discord" | "publicUrl">,
  log: Logger,
  publishText?: PublishText,
  /** Files uploaded to the web server in this process (`all`). */
  uploads?: UploadShelf,
): Promise<WorkerSurfaces> {
  const webSurface = publishText ? createTextRelay({ publish: publishText, log }) : undefined;
  const slack = config.slack ? await slackClients(config.slack, log) : undefined;
  const discord = config.discord ? restOnlyDiscordClient(config.discord) : undefined;
  const agentSessions = slack ? createAgentSessions(log) : undefined;
  const slackThreads = createSlackThreadReader();
  const discordThreads = createDiscordThreadReader();
  const unconfigured = new Set<string>();
  /** A session of a platform this process has no settings for: said once per platform, then shown nowhere. */
  const nowhere = (platform: string) => {
    if (!unconfigured.has(platform))
      log.warn(
        { platform },
        `a ${platform} conversation's turn reached a worker without ${platform} settings; its answers are stored but not posted`,
      );
    unconfigured.add(platform);
    return NO_SURFACE;
  };

  /** One message in the session's conversation (a thread, a channel), outside any run's surface. */
  const say = async (sessionId: string, userId: string, text: string): Promise<void> => {
    if (sessionId.startsWith("slack:") && slack) {
      const { channel, threadTs } = placeOf(sessionId, userId);
      await slack
        .clientOf(sessionId)
        .chat.postMessage({ channel, ...(threadTs ? { thread_ts: threadTs } : {}), text: withoutBroadcasts(text) });
    } else if (sessionId.startsWith("discord:") && discord) {
      await discord.rest.post(Routes.channelMessages(discordChannelOf(sessionId)), {
        body: { content: text, allowed_mentions: { parse: [] } },
      });
    }
  };

  return {
    openSurface(sessionId, userId) {
      const traceLink = traceLinkOf(config.publicUrl, sessionId);
      if (sessionId.startsWith("slack:"))
        return slack
          ? openSlackSurface(slack.clientOf(sessionId), placeOf(sessionId, userId), log, agentSessions, traceLink)
          : nowhere("Slack");
      if (sessionId.startsWith("discord:"))
        return discord ? openDiscordSurface(discord, discordChannelOf(sessionId), log, traceLink) : nowhere("Discord");
      if (sessionId.startsWith("web:") && webSurface) return webSurface(sessionId);
      return NO_SURFACE;
    },
    async showDecision(approval) {
      if (approval.sessionId.startsWith("slack:") && slack)
        await updateApprovalMessage(slack.clientOf(approval.sessionId), approval);
      else if (approval.sessionId.startsWith("discord:") && discord) await updateDiscordApproval(discord, approval);
    },
    async receiveFiles(files, { sessionId, userId, tell }, signal) {
      const { attachments, problems } = await inOrder(
        files,
        async (fetchable) => {
          if (sessionId.startsWith("slack:") && slack) {
            const token = await slack.tokenOf(sessionId);
            if (!token) return unreadAll(fetchable, "glassbox is no longer installed in this Slack workspace");
            return downloadSlackFiles(fetchable, { token, apiUrl: config.slack?.apiUrl, signal });
          }
          if (sessionId.startsWith("web:") && uploads)
            return { attachments: fetchable.map((file) => uploads.take(file)), problems: [] };
          if (sessionId.startsWith("discord:") && discord)
            return fetchDiscordFiles(
              fetchable.map((file) => ({ ...file, contentType: file.mimeType })),
              { signal },
            );
          return unreadAll(fetchable, "this worker has no settings for the platform it came from");
        },
        sessionId,
      );
      if (tell && problems.length > 0)
        await say(sessionId, userId, problems.join(" ")).catch((error: unknown) =>
          log.warn({ error: (error as Error).message, sessionId }, "saying which files could not be read failed"),
        );
      return attachments;
    },
    async readThread({ sessionId, eventIds, after: readingPoint, maxMessages, threads, channel: history }) {
      if (sessionId.startsWith("slack:") && slack) {
        const { teamId, channel, threadTs } = placeOf(sessionId, "");
        const mentionTs = eventIds.map((id) => slackMentionId.exec(id)?.[1]).find(Boolean);
        if (!threadTs || !mentionTs) return undefined; // a top-level direct message: no thread
        if (mentionTs === threadTs) {
          // A mention that starts its thread has nothing before it in the thread: read through it without
          // asking the store; with the channel's history on, the channel's messages before it instead.
          if (!history) return threads ? { messages: [], through: mentionTs } : undefined;
          const after = await readingPoint(`slack:${teamId}:${channel}`);
          return slackThreads.read(slack.readerOf(sessionId), {
            channel,
            mentionTs,
            teamId,
            ...(after ? { after } : {}),
          });
        }
        if (!threads) return undefined;
        const after = await readingPoint();
        return slackThreads.read(slack.readerOf(sessionId), {
          channel,
          threadTs,
          mentionTs,
          teamId,
          ...(after ? { after } : {}),
        });
      }
      if (sessionId.startsWith("discord:") && discord) {
        const mentionId = eventIds.map((id) => discordMentionId.exec(id)?.[1]).find(Boolean);
        if (!mentionId) return undefined;
        // A Discord channel is one session: its place is the session itself.
        const after = (channel: boolean) => (channel ? readingPoint(sessionId) : readingPoint());
        return discordThreads.read(discord, { sessionId, mentionId, maxMessages, threads, channel: history, after });
      }
      return undefined;
    },
    async close() {
      await slack?.installations?.close();
      await discord?.destroy();
    },
  };
}

/** The platform ids of a mention, as ingress claimed them (slack-events.ts, discord-events.ts). */
const slackMentionId = /^slack:message:[^:]+:(\d+\.\d+)$/;
const discordMentionId = /^discord:message:(\d+)$/;

interface SlackClients {
  clientOf(sessionId: string): WebClient;
  /** A client that reads and never waits out a rate limit: a limited reading says so and the run goes on. */
  readerOf(sessionId: string): WebClient;
  /** The bot token of the session's workspace (for its files); undefined once the app is uninstalled there. */
  tokenOf(sessionId: string): Promise<string | undefined>;
  installations?: SlackInstallations;
}

/** One workspace's client (SLACK_BOT_TOKEN), or one per workspace whose token is read from the installations. */
async function slackClients(slack: NonNullable<GlassboxConfig["slack"]>, log: Logger): Promise<SlackClients> {
  const options = slackClientOptions(slack, log);
  const reading = { ...options, rejectRateLimitedCalls: true, retryConfig: { retries: 0 } };
  if (!slack.oauth) {
    const client = new webApi.WebClient(slack.botToken, options);
    const reader = new webApi.WebClient(slack.botToken, reading);
    return { clientOf: () => client, readerOf: () => reader, tokenOf: async () => slack.botToken };
  }
  const installations = await openSlackInstallations(slack.oauth);
  const clientFor = createWorkspaceClients(installations, options);
  const readerFor = createWorkspaceClients(installations, reading);
  const teamOf = (sessionId: string) => placeOf(sessionId, "").teamId;
  return {
    clientOf: (sessionId) => clientFor(teamOf(sessionId)),
    readerOf: (sessionId) => readerFor(teamOf(sessionId)),
    tokenOf: (sessionId) => installations.botTokenForTeam(teamOf(sessionId)),
    installations,
  };
}

const unread = (file: Pick<TurnFile, "name" | "mimeType" | "size">, problem: string): Attachment => ({
  name: file.name,
  mimeType: file.mimeType,
  size: file.size,
  problem,
});
const unreadAll = (files: readonly TurnFile[], problem: string): Downloaded => ({
  attachments: files.map((file) => unread(file, problem)),
  problems: files.map((file) => sentenceOf(file.name, problem)),
});
const sentenceOf = (name: string, problem: string) => `I could not read ${cleanName(name)}: ${problem}.`;

/**
 * The files in their order: those ingress could pass on and that came from the session's own
 * platform fetched by `fetch` (one attachment back per file, in order), the others unread with the reason.
 */
async function inOrder(
  files: readonly TurnFile[],
  fetch: (fetchable: TurnFile[]) => Promise<Downloaded>,
  sessionId: string,
): Promise<Downloaded> {
  const platform = sessionId.split(":")[0];
  const fetchable = files.filter((file) => !file.problem && file.platform === platform);
  const fetched = fetchable.length ? (await fetch(fetchable)).attachments : [];
  const attachments = files.map((file) => {
    if (file.problem) return unread(file, file.problem);
    if (file.platform !== platform) return unread(file, "it came from another platform than this conversation");
    return fetched.shift() ?? unread(file, "the download failed");
  });
  const problems = attachments.flatMap((file) => ("problem" in file ? [sentenceOf(file.name, file.problem)] : []));
  return { attachments, problems };
}

/** discord.js with its REST half only: channels are fetched (and posted to) over REST, never the gateway. */
function restOnlyDiscordClient(discord: NonNullable<GlassboxConfig["discord"]>): Client {
  const client = new Client({
    intents: [],
    allowedMentions: NO_PINGS,
    ...(discord.apiUrl ? { rest: { api: discord.apiUrl } } : {}),
  });
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
  await client.rest.patch(Routes.channelMessage(channelId, messageId), {
    body: { content: approvalOutcomeText(approval), components: [], allowed_mentions: { parse: [] } },
  });
}
