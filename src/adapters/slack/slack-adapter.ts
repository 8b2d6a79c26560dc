/**
 * The Slack adapter: Bolt in Socket Mode (SLACK_APP_TOKEN) or over HTTP with signed requests
 * (SLACK_SIGNING_SECRET), for one workspace (SLACK_BOT_TOKEN) or installed in many through OAuth
 * (slack-oauth.ts). A mention in a channel, or a direct message, becomes a message to the
 * conversation of its thread; Approve / Deny clicks decide durable approvals. In the bot's DM,
 * Slack's agent experience (slack-agent-view.ts) adds suggested prompts, thread titles and what
 * the person is viewing, which reaches the model as a marked note (slack-viewing.ts).
 */
import { openSlackApp } from "./slack-app.js";
import {
  clickOrigin,
  inputOf,
  isQuestion,
  isStopCommand,
  slackEventIds,
  slackSessionKey,
  threadOf,
  type SlackMessageEvent,
} from "./slack-events.js";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { App, BlockAction, Context } from "@slack/bolt";
import type { WebClient } from "@slack/web-api";
import type { ConversationService } from "../../conversations/conversations.js";
import type { DailyLimits } from "../../agent/quota.js";
import type { AgentConfig } from "../../agent/run.js";
import type { Pipelines } from "../../agent/sub-agents.js";
import type { GlassboxConfig, SlackConfig } from "../../config.js";
import type { Logger } from "../../logger.js";
import type { StorePort } from "../../store/port.js";
import { askSomething, examplePrompts, type ExamplePrompt } from "../example-requests.js";
import type { ToolSource } from "../../tools/tool-sources.js";
import { startConversationWorkers, type ShardData } from "../conversation-workers.js";
import { APPROVE_ACTION, DENY_ACTION } from "./approval-blocks.js";
import { rateInConversation } from "../../agent/feedback.js";
import {
  FEEDBACK_ACTIONS,
  feedbackValueOf,
  REASON_BLOCK,
  REASON_INPUT,
  REASON_VIEW,
  reasonModal,
} from "./feedback-blocks.js";
import { refusalFor } from "../approval-replies.js";
import { createSlackConversations } from "./slack-conversations.js";
import { assertInstallPortFree, createWorkspaceClients, INSTALL_PATH } from "./slack-oauth.js";
import { channelNames, createAgentSessions, listenForAgentView, titleThread } from "./slack-agent-view.js";
import { withoutBroadcasts } from "./slack-text.js";
import { fetchSlackFiles, slackFileRefs } from "./slack-files.js";
import { createViewingMemory, entitiesOfAppContext, viewingNote, withViewingNote } from "./slack-viewing.js";
import type { SlackWorkerData } from "./slack-worker.js";

export interface SlackAdapter {
  app: App;
  conversations: ConversationService;
  /** The Events API request URL in HTTP mode (`.../slack/events`); undefined in Socket Mode. */
  eventsUrl?: string;
  /** Installed through OAuth: where a workspace starts installing the app (`.../slack/install`). */
  installUrl?: string;
  stop(): Promise<void>;
}

/** What Slack sends for a message we may answer (an app_mention or a direct message), with Bolt's context. */
interface IncomingMessage extends SlackMessageEvent {
  /** Bolt's context: the workspace's installation (its bot user, and who the sender is counted as). */
  context: Context;
  /** The agent view's `app_context` of a DM: what the sender was viewing as they sent it. */
  appContext?: unknown;
}

const EXPIRY_SWEEP_MS = 30_000;

/**
 * Runs happen in this thread with `agent`, or, given `workers`, in that many worker threads that
 * each build the agent from `config` (GLASSBOX_WORKERS): this thread then only receives events.
 */
export type SlackRuns =
  | {
      agent: AgentConfig & { toolSources?: ReadonlyMap<string, ToolSource> };
      dailyLimits?: DailyLimits;
      pipelines?: Pipelines;
      workers?: undefined;
    }
  | {
      workers: { count: number; config: GlassboxConfig; onExit?: (worker: number, exitCode: number) => void };
      agent?: undefined;
    };

export async function startSlackAdapter(
  options: {
    slack: SlackConfig;
    /** Where claims, approvals and feedback are kept: the agent's store port (SQLite or PostgreSQL). */
    store: StorePort;
    log: Logger;
    approvalTtlSeconds: number;
    /** What an empty mention suggests asking, from the tools the bot has (exampleRequests). */
    hints?: string[];
    /** Slack's suggested prompts; by default from the agent's tools (examplePrompts), else from `hints`. */
    prompts?: ExamplePrompt[];
  } & SlackRuns,
): Promise<SlackAdapter> {
  const { slack, store, log } = options;
  // Many workspaces: each event is authorized from the installation store, runs post with their workspace's token.
  const { app, installations, clientOptions, botOf, userOf } = await openSlackApp(slack, log);
  let conversations: Awaited<ReturnType<typeof startConversations>>;
  try {
    const clientFor = installations ? createWorkspaceClients(installations, clientOptions) : undefined;
    conversations = await startConversations(options, app.client, clientFor);
  } catch (error) {
    await installations?.close();
    throw error;
  }
  const viewing = createViewingMemory();
  const nameOf = channelNames();
  const notesOf = new Map<string, Promise<void>>(); // a session's last message still being readied, to keep their order
  const agentSessions = createAgentSessions(log);
  listenForAgentView(app, {
    prompts:
      options.prompts ??
      (options.agent?.toolSources
        ? examplePrompts(options.agent.toolSources, 4)
        : (options.hints ?? []).map((message) => ({ title: message.slice(0, 40), message }))),
    viewing,
    log,
    stop: (sessionId) => conversations.stop(sessionId),
  });

  async function onMessage(message: IncomingMessage, client: WebClient): Promise<void> {
    // Installed in many workspaces, the bot is a user of its own in each.
    const botUserId = botOf(message.context);
    if (!isQuestion(message, botUserId)) return;
    // Exactly once: the event id and the message ts are claimed (committed with the turn's other
    // units) before any work starts, so a retry, a redelivery or a second socket connection finds
    // the claim and does nothing.
    if (!(await store.claim(...slackEventIds(message)))) return;

    const threadTs = threadOf(message);
    const sessionId = slackSessionKey(message);
    const reply = (text: string) =>
      client.chat.postMessage({ channel: message.channel, ...(threadTs ? { thread_ts: threadTs } : {}), text });

    if (!message.isDirect && slack.allowedChannels.length > 0 && !slack.allowedChannels.includes(message.channel)) {
      if (await store.claim(`slack:notice:${message.channel}`)) {
        await reply(
          `I only answer in ${slack.allowedChannels.map((channel) => `<#${channel}>`).join(", ")}. Mention me there, or send me a direct message.`,
        );
      }
      return;
    }
    const input = inputOf(message.text, botUserId);
    if (isStopCommand(input)) {
      await reply((await conversations.stop(sessionId)) ? "Stopping." : "Nothing is running here.");
      return;
    }
    if (!input && slackFileRefs(message.files).length === 0) {
      await reply(askSomething("Ask me something after the mention", options.hints));
      return;
    }
    // The run starts on a later turn of the event loop, so acknowledgements of events already
    // waiting go out first (a burst of mentions is acknowledged before any of their work).
    const userId = userOf(message.context, message.user);
    // A DM thread is an agent (or assistant) thread: its first message names it.
    // Not awaited: the title is a side line, and the message is passed on below in this same turn, in order.
    if (message.isDirect && threadTs) {
      const title = { channel: message.channel, threadTs };
      void store
        .claim(`slack:title:${message.channel}:${threadTs}`)
        .then(async (first) => {
          if (first) await titleThread(client, title, input);
        })
        .catch((error: unknown) =>
          log.warn({ error: (error as Error).message }, "Slack: setting the thread title failed"),
        );
    }
    const viewed = message.isDirect ? viewedBy(message) : [];
    setImmediate(() => {
      // Naming a channel in view may take a Web API call: the session's messages still go in order.
      const noted = (notesOf.get(sessionId) ?? Promise.resolve())
        .then(async () => {
          const note = viewed.length
            ? await viewingNote(viewed, message.channel, (channel) => nameOf(client, message.teamId, channel))
            : undefined;
          // Shared files are fetched with this workspace's bot token; one that cannot be read is said in a sentence, and the rest still runs.
          const files = message.files
            ? await fetchSlackFiles(message.files, {
                token: message.context.botToken ?? client.token ?? "",
                apiUrl: slack.apiUrl,
              })
            : undefined;
          if (files?.problems.length) await reply(files.problems.join(" "));
          const run = conversations.send({
            sessionId,
            userId,
            input: withViewingNote(input, note),
            ...(files?.attachments.length ? { attachments: files.attachments } : {}),
          });
          run.catch((error: unknown) =>
            log.error({ error: (error as Error).message, sessionId }, "Slack: a run failed"),
          );
          // A DM thread is an agent session: processing (Slack's stop button) while it runs.
          if (message.isDirect && threadTs) {
            const place = { channel: message.channel, threadTs };
            void agentSessions
              .working(client, { ...place, user: message.user as string, input })
              .then(() => run.catch(() => undefined))
              .then((result) => agentSessions.settled(client, place, result?.stopReason ?? "error"));
          }
        })
        .catch((error: unknown) =>
          log.error({ error: (error as Error).message, sessionId }, "Slack: a message could not be passed on"),
        );
      notesOf.set(sessionId, noted);
      void noted.finally(() => notesOf.get(sessionId) === noted && notesOf.delete(sessionId));
    });
  }

  /** What the sender of a DM is viewing: their message's own app_context first, else the latest Slack sent. */
  function viewedBy(message: IncomingMessage) {
    const own = entitiesOfAppContext(message.appContext);
    return own.length ? own : viewing.lookup(message.teamId, message.user ?? "", message.channel, message.threadTs);
  }

  app.event("app_mention", async ({ event, body, client, context }) => {
    await onMessage(
      {
        eventId: body.event_id,
        teamId: body.team_id,
        channel: event.channel,
        user: event.user,
        text: event.text,
        ts: event.ts,
        threadTs: event.thread_ts,
        botId: event.bot_id,
        subtype: event.subtype,
        isDirect: false,
        context,
        files: (event as { files?: unknown }).files,
      },
      client,
    );
  });

  app.message(async ({ message, body, client, context }) => {
    if (message.channel_type !== "im") return; // channels answer to mentions only
    const fields = message as {
      user?: string;
      text?: string;
      thread_ts?: string;
      bot_id?: string;
      subtype?: string;
      app_context?: unknown;
      files?: unknown;
    };
    const { event_id: eventId, team_id: teamId } = body as { event_id: string; team_id: string };
    await onMessage(
      {
        eventId,
        teamId,
        channel: message.channel,
        user: fields.user,
        text: fields.text,
        ts: message.ts,
        threadTs: fields.thread_ts,
        botId: fields.bot_id,
        subtype: message.subtype,
        isDirect: true,
        context,
        appContext: fields.app_context,
        files: fields.files,
      },
      client,
    );
  });

  app.action<BlockAction>(
    new RegExp(`^(${APPROVE_ACTION}|${DENY_ACTION})$`),
    async ({ ack, action, body, client, context }) => {
      await ack();
      if (action.type !== "button" || !("action_id" in action) || !action.value) return;
      const userId = body.user.id;
      const channel = body.channel?.id;
      const outcome = await conversations.decide({
        approvalId: action.value,
        userId: userOf(context, userId),
        approved: action.action_id === APPROVE_ACTION,
        origin: clickOrigin(body),
      });
      const refusal = refusalFor(outcome, slack.approvers.length > 0);
      if (refusal && channel)
        await client.chat.postEphemeral({ channel, user: userId, text: withoutBroadcasts(refusal) });
    },
  );

  // 👍 / 👎 on an answer: Slack's feedback buttons, or the plain buttons where Slack refused those.
  // A rating never starts a run; each click is claimed once, by the trigger Slack made for it.
  app.action<BlockAction>(FEEDBACK_ACTIONS, async ({ ack, action, body, client, context }) => {
    await ack();
    const rated = "value" in action ? feedbackValueOf(action.value) : undefined;
    if (!rated || !(await store.claim(`slack:interaction:${body.trigger_id}`))) return;
    // Only from the conversation the answer is in: whoever can see it there can rate it.
    const channel = body.channel?.id;
    const here = (sessionId: string) =>
      sessionId.startsWith(clickOrigin(body).sessionPrefix) && sessionId.split(":")[2] === channel;
    if (
      (await rateInConversation(store, { ...rated, userId: userOf(context, body.user.id), source: "slack" }, here)) ===
      "not_here"
    ) {
      if (channel)
        await client.chat.postEphemeral({
          channel,
          user: body.user.id,
          text: "I can't rate that answer from here; rate it in the conversation where I gave it.",
        });
      return;
    }
    if (rated.rating === "down")
      await client.views.open({ trigger_id: body.trigger_id, view: reasonModal(rated.runId) });
  });
  // The reason a 👎 asked for: only ever completes the submitter's own 👎 of that run.
  app.view(REASON_VIEW, async ({ ack, view, body, context }) => {
    await ack();
    if (!(await store.claim(`slack:view:${view.id}`))) return;
    const reason = view.state.values[REASON_BLOCK]?.[REASON_INPUT]?.value;
    await store.explainFeedback(view.private_metadata, userOf(context, body.user.id), reason);
  });

  app.error(async (error) => {
    log.error({ error: error.message }, "Slack: an event handler failed");
  });

  const server = (await (async () => {
    if (slack.appToken && installations) await assertInstallPortFree(slack.port);
    return slack.appToken ? app.start() : app.start({ port: slack.port, host: slack.host });
  })().catch(async (error: unknown) => {
    await conversations.close(); // a port in use must not leave worker threads behind
    await installations?.close();
    throw error;
  })) as unknown;
  const address = slack.appToken ? undefined : ((server as Server).address() as AddressInfo | null);
  const eventsUrl = address ? `http://${slack.host}:${address.port}/slack/events` : undefined;
  const installUrl = installations ? `http://${slack.host}:${address?.port ?? slack.port}${INSTALL_PATH}` : undefined;
  if (installUrl)
    log.info(
      { installUrl },
      `Slack: workspaces install the app by opening ${INSTALL_PATH} at this server's public https address`,
    );

  const sweep = setInterval(
    () =>
      void conversations
        .expireApprovals()
        .catch((error: unknown) => log.error({ error: (error as Error).message }, "Slack: expiring approvals failed")),
    EXPIRY_SWEEP_MS,
  );
  sweep.unref();
  await conversations.expireApprovals(); // approvals that ran out while the bot was down

  return {
    app,
    conversations,
    eventsUrl,
    installUrl,
    async stop() {
      clearInterval(sweep);
      await app.stop();
      await conversations.close();
      await installations?.close();
    },
  };
}

/**
 * The conversations, here or in worker threads; close() waits for their runs (and ends the workers).
 * `clientFor` gives each workspace's client when the app is installed in many.
 */
async function startConversations(
  options: Parameters<typeof startSlackAdapter>[0],
  client: WebClient,
  clientFor?: (teamId: string) => WebClient,
): Promise<ConversationService & { close(): Promise<void> }> {
  const { slack, store, log, approvalTtlSeconds } = options;
  if (!options.workers) {
    const conversations = createSlackConversations({
      client,
      clientFor,
      agent: options.agent,
      store,
      slack,
      log,
      approvalTtlSeconds,
      dailyLimits: options.dailyLimits,
      pipelines: options.pipelines,
    });
    return { ...conversations, close: () => conversations.idle() };
  }
  const { count, config, onExit } = options.workers;
  const data: Omit<SlackWorkerData, keyof ShardData> = { config, slack, approvalTtlSeconds };
  return startConversationWorkers({
    // The worker's module sits beside this one: .ts from source, .js once built.
    entry: new URL(`./slack-worker${import.meta.url.slice(import.meta.url.lastIndexOf("."))}`, import.meta.url),
    count,
    data,
    log,
    sessionOfApproval: async (approvalId) => (await store.approval(approvalId))?.sessionId,
    onExit,
  });
}
