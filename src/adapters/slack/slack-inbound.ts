/**
 * Slack ingress (GLASSBOX_ROLE=ingress): a Bolt app, for one workspace (SLACK_BOT_TOKEN) or installed
 * in many through OAuth (the install pages are served here, the installations kept in the database),
 * that verifies each request (the signing secret over HTTP; Slack's own socket in Socket Mode), claims the event, stores its message, records its
 * run and enqueues its turn in one transaction, and only then acknowledges it. It never calls the
 * model: workers run the turns (see turns.ts for what each one asks). Files shared with a message
 * are never downloaded here: their references go in the turn, and the worker fetches them.
 *
 * Over HTTP the acknowledgement waits for the commit (processBeforeResponse), so a delivery that
 * could not be accepted gets a 500 and Slack retries it; a retry of an accepted event, a second
 * Socket Mode connection's copy, or the app_mention and message of one message find the claim and
 * add nothing. Several ingress processes can run behind any load balancer. Within a process, the
 * messages of one thread are accepted one after another, in the order they arrived.
 *
 * Besides messages it takes Approve / Deny clicks (decided here, with the click's origin checked; the
 * resume is enqueued), 👍 / 👎 ratings and the reason a 👎 asks for, and Slack's agent experience in
 * the bot's DM (slack-agent-view.ts): suggested prompts, thread titles, Slack's stop button, and what
 * the person is viewing, which is stored with their message as a marked note (slack-viewing.ts).
 * The agent session's status while a run works is the worker's (slack-surface.ts).
 */
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { App, BlockAction, Context } from "@slack/bolt";
import type { KnownBlock } from "@slack/types";
import type { WebClient } from "@slack/web-api";
import { createSessionQueue } from "../../conversations/session-queue.js";
import type { TokenCounter } from "../../agent/tokens.js";
import type { SlackConfig } from "../../config.js";
import type { Logger } from "../../logger.js";
import { rateInConversation, type FeedbackWrites } from "../../agent/feedback.js";
import { refusalFor } from "../approval-replies.js";
import { askSomething, type ExamplePrompt } from "../example-requests.js";
import { APPROVE_ACTION, DENY_ACTION, slackApprover, updateApprovalMessage } from "./approval-blocks.js";
import {
  FEEDBACK_ACTIONS,
  feedbackValueOf,
  REASON_BLOCK,
  REASON_INPUT,
  REASON_VIEW,
  reasonModal,
} from "./feedback-blocks.js";
import { channelNames, listenForAgentView, titleThread } from "./slack-agent-view.js";
import { createViewingMemory, entitiesOfAppContext, viewingNote, withViewingNote } from "./slack-viewing.js";
import { slackFileRefs } from "./slack-files.js";
import { assertInstallPortFree, INSTALL_PATH, type SlackInstallations } from "./slack-oauth.js";
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
import { withoutBroadcasts } from "./slack-text.js";
import { TRACE_ACTION } from "./trace-button.js";
import { createUserGroupLookup } from "./slack-user-groups.js";
import { decidersOf } from "../../store/approval-rules.js";
import { groupsAmong } from "../../tools/approver-entries.js";
import { openSlackApp, slackConnection } from "./slack-app.js";
import type { StorePort } from "../../store/port.js";
import { turnFilesOf, type TurnFile } from "../../conversations/turn-files.js";
import { CAPABILITIES_QUESTION_TEXT } from "../../conversations/capabilities.js";
import { CAPABILITIES_ACTION, sessionOfClick, withCapabilitiesButton } from "./capabilities-button.js";
import { addressesOf } from "../listen-addresses.js";
import { acceptInboundText, decideClick, type IngressQueue, type IngressStore } from "../../conversations/turns.js";

/** What Slack ingress reads and writes: a message's acceptance, a click's decision, a rating and its reason. */
export type SlackIngressStore<Transaction> = IngressStore<Transaction> &
  FeedbackWrites &
  Pick<StorePort<Transaction>, "explainFeedback">;

export interface SlackIngressOptions<Transaction> {
  store: SlackIngressStore<Transaction>;
  queue: IngressQueue<Transaction>;
  slack: SlackConfig;
  log: Logger;
  /** Counts the stored message's tokens as the workers' memory will (the model's encoding; no model call). */
  counter: TokenCounter;
  /** What an empty mention suggests asking. */
  hints?: string[];
  /** Slack's suggested prompts in the bot's DM; by default made from `hints`. */
  prompts?: ExamplePrompt[];
}

export interface SlackIngress {
  app: App;
  /** Undefined while events come in; else why not ("reconnecting"): for /readyz. */
  notReady(): string | undefined;
  /** The Events API request URL in HTTP mode (`.../slack/events`); undefined in Socket Mode. */
  eventsUrl?: string;
  /** Installed through OAuth: where a workspace starts installing the app (`.../slack/install`). */
  installUrl?: string;
  /** Listening on every address: the machine's other addresses its HTTP server answers on. */
  alsoAt: string[];
  /** Installed through OAuth: each workspace's bot token (closed when ingress stops). */
  installations?: Pick<SlackInstallations, "botTokenForTeam">;
  stop(): Promise<void>;
}

/** A user group's mention, which a refusal keeps: it names who could approve. */
const USER_GROUP = /^!subteam\^S[A-Z0-9]+$/;

/** Slack posts in the thread a message came from (an answer to "stop", a notice) go out after the acknowledgement. */
type Reply = (text: string, blocks?: KnownBlock[]) => void;

export async function startSlackIngress<Transaction>(options: SlackIngressOptions<Transaction>): Promise<SlackIngress> {
  const { store, queue, slack, log, counter } = options;
  // Many workspaces: each event is authorized from the installation store (in the database), and
  // this process serves the install pages too. HTTP mode acknowledges once the event is accepted.
  const { app, installations, botOf, userOf } = await openSlackApp(slack, log, { processBeforeResponse: true });

  const inOrder = createSessionQueue();
  const userGroups = createUserGroupLookup(log);
  const viewing = createViewingMemory();
  const nameOf = channelNames();
  listenForAgentView(app, {
    prompts: options.prompts ?? promptsOf(options.hints ?? []),
    viewing,
    log,
    // Slack's stop button asks for the same as "stop" typed in the thread.
    stop: (sessionId) => store.requestCancel({ sessionId }),
  });

  /** Posts after the current delivery is acknowledged; a failed post is logged, never the delivery's failure. */
  const replyIn =
    (client: WebClient, channel: string, threadTs: string | undefined): Reply =>
    (text, blocks) => {
      setImmediate(() => {
        client.chat
          .postMessage({ channel, ...(threadTs ? { thread_ts: threadTs } : {}), text, ...(blocks ? { blocks } : {}) })
          .catch((error: unknown) =>
            log.warn({ error: (error as Error).message, channel }, "Slack ingress: a reply failed"),
          );
      });
    };

  async function onMessage(message: IncomingMessage, context: Context, client: WebClient): Promise<void> {
    const botUserId = botOf(context);
    if (!isQuestion(message, botUserId)) return;
    const sessionId = slackSessionKey(message);
    await inOrder.run(sessionId, () =>
      accept(message, { sessionId, botUserId, userId: userOf(context, message.user) }, client),
    );
  }

  /** What the sender of a DM is viewing: their message's own app_context first, else the latest Slack sent. */
  function viewedBy(message: IncomingMessage) {
    const own = entitiesOfAppContext(message.appContext);
    return own.length ? own : viewing.lookup(message.teamId, message.user ?? "", message.channel, message.threadTs);
  }

  /** The input as the run gets it: the note of what the sender views (DMs only) ahead of their words. */
  async function notedInput(message: IncomingMessage, input: string, client: WebClient): Promise<string> {
    const viewed = message.isDirect ? viewedBy(message) : [];
    const note = viewed.length
      ? await viewingNote(viewed, message.channel, (channel) => nameOf(client, message.teamId, channel))
      : undefined;
    return withViewingNote(input, note);
  }

  /** A DM thread is an agent (or assistant) thread: its first message names it, once (claimed). */
  function titleOnce(message: IncomingMessage, input: string, client: WebClient): void {
    const threadTs = message.threadTs;
    if (!message.isDirect || !threadTs) return;
    setImmediate(() => {
      store
        .claim(`slack:title:${message.channel}:${threadTs}`)
        .then(async (first) => {
          if (first) await titleThread(client, { channel: message.channel, threadTs }, input);
        })
        .catch((error: unknown) =>
          log.warn({ error: (error as Error).message }, "Slack ingress: setting the thread title failed"),
        );
    });
  }

  async function accept(
    message: IncomingMessage,
    who: { sessionId: string; botUserId: string; userId: string },
    client: WebClient,
  ): Promise<void> {
    const { sessionId, botUserId, userId } = who;
    const eventIds = slackEventIds(message);
    const reply = replyIn(client, message.channel, threadOf(message));
    const input = inputOf(message.text, botUserId);

    if (!message.isDirect && slack.allowedChannels.length > 0 && !slack.allowedChannels.includes(message.channel)) {
      // Said once per channel, not once per message (and not again by a retry).
      if ((await store.claim(...eventIds)) && (await store.claim(`slack:notice:${message.channel}`))) {
        reply(
          `I only answer in ${slack.allowedChannels.map((channel) => `<#${channel}>`).join(", ")}. Mention me there, or send me a direct message.`,
        );
      }
      return;
    }
    const files = turnFilesOf(slackFileRefs(message.files), "slack");
    if (isStopCommand(input) || (!input && files.length === 0)) {
      if (!(await store.claim(...eventIds))) return;
      // "stop" reaches the worker running the session: a cancel request in the store (and a NOTIFY on PostgreSQL).
      if (input)
        reply((await store.requestCancel({ sessionId })).length > 0 ? "Stopping." : "Nothing is running here.");
      else {
        const { text, blocks } = withCapabilitiesButton(
          askSomething("Ask me something after the mention", options.hints),
        );
        reply(text, blocks);
      }
      return;
    }
    const noted = await notedInput(message, input, client);
    if (await acceptText(eventIds, { sessionId, userId, input: noted }, files)) titleOnce(message, input, client);
  }

  /** A message's run, its stored message and its turn, accepted once (by its event ids). */
  async function acceptText(
    eventIds: string[],
    { sessionId, userId, input }: { sessionId: string; userId: string; input: string },
    files: TurnFile[] = [],
  ): Promise<boolean> {
    const { outcome, runId } = await acceptInboundText(store, queue, counter, {
      eventIds,
      sessionId,
      userId,
      input,
      files,
    });
    if (outcome.kind === "accepted") log.debug({ runId, sessionId }, "Slack ingress: accepted");
    else log.debug({ eventIds, sessionId }, "Slack ingress: already accepted, nothing added");
    return outcome.kind === "accepted";
  }

  // The empty mention's button: the question asked in that thread, for the person who clicked.
  app.action<BlockAction>(CAPABILITIES_ACTION, async ({ ack, body, context }) => {
    const sessionId = sessionOfClick(body);
    if (sessionId) {
      const who = { sessionId, userId: userOf(context, body.user.id), input: CAPABILITIES_QUESTION_TEXT };
      await inOrder.run(sessionId, () => acceptText([`slack:interaction:${body.trigger_id}`], who));
    }
    await ack();
  });

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
        files: (event as { files?: unknown }).files,
      },
      context,
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
        appContext: fields.app_context,
        files: fields.files,
      },
      context,
      client,
    );
  });

  /**
   * Of the user groups that may decide approval `approvalId` (its tool's or channel's approvers, else
   * SLACK_APPROVERS), the ones the person clicking is in, asked of Slack; none for its requester, who
   * decides as the requester or not at all.
   */
  async function groupsOfClicker(
    client: WebClient,
    teamId: string,
    approvalId: string,
    decider: string,
    slackUser: string,
  ): Promise<string[]> {
    const approval = await store.approval(approvalId);
    if (!approval || approval.requester === decider) return [];
    const groups = groupsAmong(decidersOf(approval, slack).approvers);
    return groups.length > 0 ? userGroups.memberOf(client, teamId, slackUser, groups) : [];
  }

  app.action<BlockAction>(
    new RegExp(`^(${APPROVE_ACTION}|${DENY_ACTION})$`),
    async ({ ack, action, body, client, context }) => {
      if (action.type !== "button" || !("action_id" in action) || !action.value) return ack();
      const userId = body.user.id;
      const channel = body.channel?.id;
      const decider = userOf(context, userId);
      const memberOf = await groupsOfClicker(
        client,
        context.teamId ?? body.team?.id ?? "",
        action.value,
        decider,
        userId,
      );
      // Decided (and its resume enqueued) before the acknowledgement: a click that could not be written gets no ack.
      const outcome = await decideClick(store, queue, {
        approvalId: action.value,
        userId: decider,
        approved: action.action_id === APPROVE_ACTION,
        approvers: slack.approvers,
        requesterMayApprove: slack.requesterMayApprove,
        memberOf,
        origin: clickOrigin(body),
      });
      await ack();
      setImmediate(() => {
        const refusal = refusalFor(outcome, slack, slackApprover);
        const shown =
          outcome.kind === "decided" || outcome.kind === "counted"
            ? updateApprovalMessage(client, outcome.approval)
            : refusal && channel
              ? client.chat.postEphemeral({
                  channel,
                  user: userId,
                  // Seen by the clicker alone: the user groups it names notify nobody.
                  text: withoutBroadcasts(refusal, USER_GROUP),
                })
              : undefined;
        shown?.catch((error: unknown) =>
          log.warn({ error: (error as Error).message, channel }, "Slack ingress: showing a decision failed"),
        );
      });
    },
  );

  // The answer's trace link opens in the browser; Slack still sends its click, which wants an acknowledgement.
  app.action<BlockAction>(TRACE_ACTION, async ({ ack }) => ack());

  // 👍 / 👎 on an answer: Slack's feedback buttons, or the plain buttons where Slack refused those.
  // A rating never starts a run; each click is claimed once, by the trigger Slack made for it.
  app.action<BlockAction>(FEEDBACK_ACTIONS, async ({ ack, action, body, client, context }) => {
    const rated = "value" in action ? feedbackValueOf(action.value) : undefined;
    if (!rated || !(await store.claim(`slack:interaction:${body.trigger_id}`))) return ack();
    // Only from the conversation the answer is in: whoever can see it there can rate it.
    const channel = body.channel?.id;
    const here = (sessionId: string) =>
      sessionId.startsWith(clickOrigin(body).sessionPrefix) && sessionId.split(":")[2] === channel;
    const rating = { ...rated, userId: userOf(context, body.user.id), source: "slack" as const };
    const recorded = await rateInConversation(store, rating, here);
    await ack();
    // After the acknowledgement, still within the 3 s Slack gives the trigger to open the modal.
    const answered = async () => {
      if (recorded === "not_here") {
        if (channel)
          await client.chat.postEphemeral({
            channel,
            user: body.user.id,
            text: "I can't rate that answer from here; rate it in the conversation where I gave it.",
          });
      } else if (rated.rating === "down")
        await client.views.open({ trigger_id: body.trigger_id, view: reasonModal(rated.runId) });
    };
    await answered().catch((error: unknown) =>
      log.warn({ error: (error as Error).message, channel }, "Slack ingress: answering a rating failed"),
    );
  });

  // The reason a 👎 asked for: only ever completes the submitter's own 👎 of that run.
  app.view(REASON_VIEW, async ({ ack, view, body, context }) => {
    if (await store.claim(`slack:view:${view.id}`)) {
      const reason = view.state.values[REASON_BLOCK]?.[REASON_INPUT]?.value;
      await store.explainFeedback(view.private_metadata, userOf(context, body.user.id), reason);
    }
    await ack();
  });

  app.error(async (error) => {
    log.error({ error: error.message }, "Slack ingress: an event could not be accepted");
    throw error; // over HTTP: a 500, so Slack delivers it again
  });

  const notReady = slackConnection(app, Boolean(slack.appToken));
  const server = (await (async () => {
    if (slack.appToken && installations) await assertInstallPortFree(slack.port);
    return slack.appToken ? app.start() : app.start({ port: slack.port, host: slack.host });
  })().catch(async (error: unknown) => {
    await installations?.close();
    throw error;
  })) as unknown;
  const address = slack.appToken ? undefined : ((server as Server).address() as AddressInfo | null);
  // On every address (GLASSBOX_HOST's default 0.0.0.0), the URLs name this machine's loopback and the others.
  const at = addressesOf(slack.host, address?.port ?? slack.port);
  return {
    app,
    notReady,
    eventsUrl: address ? `${at.url}/slack/events` : undefined,
    installUrl: installations ? `${at.url}${INSTALL_PATH}` : undefined,
    alsoAt: address || installations ? at.alsoAt : [],
    ...(installations ? { installations } : {}),
    async stop() {
      await app.stop();
      await inOrder.idle();
      await installations?.close();
    },
  };
}

/** What Slack sends for a message we may answer, with the agent view's `app_context` of a DM (what the sender views). */
interface IncomingMessage extends SlackMessageEvent {
  appContext?: unknown;
}

/** Suggested prompts from the hints alone (ingress without the tools at hand). */
function promptsOf(hints: string[]): ExamplePrompt[] {
  return hints.map((message) => ({ title: message.slice(0, 40), message }));
}
