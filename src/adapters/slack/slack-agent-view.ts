/**
 * Slack's agent experience around the conversations: suggested prompts when a person opens the
 * bot's DM (the agent view's `app_home_opened` on the Messages tab) or starts an assistant thread
 * (the older assistant view's `assistant_thread_started`), what they are viewing as Slack reports
 * it (`app_context_changed`, `assistant_thread_context_changed`), Slack's own stop button
 * (`agent_session_stopped`) with the session's status around each run, and a thread's title from
 * its first message.
 *
 * Plain event listeners rather than Bolt's Assistant class: that class takes DM thread messages
 * off the path every other message takes (claims, "stop", quotas), and its default context store
 * reads and rewrites the thread's first message on each change; here nothing but the prompts,
 * the title and the remembered context is added.
 */
import type { App } from "@slack/bolt";
import type { WebClient } from "@slack/web-api";
import type { RunResult } from "../../agent/run.js";
import type { Logger } from "../../logger.js";
import type { ExamplePrompt } from "../example-requests.js";
import { withoutBroadcasts } from "./slack-text.js";
import { entitiesOfAppContext, entitiesOfThreadContext, type ViewingMemory } from "./slack-viewing.js";

/** Slack shows at most four suggested prompts. */
const MOST_PROMPTS = 4;
const PROMPTS_TITLE = "Things I can do";
const TITLE_LIMIT = 80;

export interface AgentViewOptions {
  prompts: ExamplePrompt[];
  viewing: ViewingMemory;
  log: Logger;
  /** Stops the session's run (Slack's stop button); the adapter's own "stop" does the same. */
  stop: (sessionId: string) => unknown;
}

export function listenForAgentView(app: App, options: AgentViewOptions): void {
  const { viewing, log } = options;
  const prompts = options.prompts.slice(0, MOST_PROMPTS).map(({ title, message }) => ({ title, message }));
  const failed = (what: string) => (error: unknown) =>
    log.warn({ error: (error as Error).message }, `Slack: ${what} failed`);

  // The assistant view: a new thread in the bot's side panel. Its prompts belong to that thread.
  app.event("assistant_thread_started", async ({ event, client }) => {
    const thread = event.assistant_thread;
    viewing.rememberThread(thread.channel_id, thread.thread_ts, entitiesOfThreadContext(thread.context));
    await client.assistant.threads
      .setSuggestedPrompts({
        channel_id: thread.channel_id,
        thread_ts: thread.thread_ts,
        title: PROMPTS_TITLE,
        prompts,
      })
      .catch(failed("setting suggested prompts"));
  });

  app.event("assistant_thread_context_changed", async ({ event }) => {
    const thread = event.assistant_thread;
    viewing.rememberThread(thread.channel_id, thread.thread_ts, entitiesOfThreadContext(thread.context));
  });

  // The agent view: opening the DM's Messages tab replaces assistant_thread_started. The prompts
  // are pinned to the tab, so no thread_ts (Slack ignores a call for an agent app that sends one).
  app.event("app_home_opened", async ({ event, body, client }) => {
    if (event.context) viewing.rememberUser(body.team_id, event.user, entitiesOfAppContext(event.context));
    if (event.tab !== "messages") return;
    await client.assistant.threads
      .setSuggestedPrompts({ channel_id: event.channel, title: PROMPTS_TITLE, prompts })
      .catch(failed("setting suggested prompts"));
  });

  // The agent view's "what the user is looking at". The inner event may carry only the context:
  // the person is then the (non-bot) authorization of the envelope.
  app.event("app_context_changed", async ({ event, body }) => {
    const user =
      (event as { user?: string }).user ?? body.authorizations?.find((authorization) => !authorization.is_bot)?.user_id;
    if (user) viewing.rememberUser(body.team_id, user, entitiesOfAppContext(event.context));
  });

  // Slack's own stop button, shown while an agent session is processing.
  app.event("agent_session_stopped", async ({ event, body }) => {
    await Promise.resolve(options.stop(`slack:${body.team_id}:${event.channel}:${event.thread_ts}`));
  });
}

/**
 * A DM thread's title, from its first message (claimed in the store, so a redelivery or a restart
 * does not rename it): the first line, without mentions or broadcasts, cut to a readable length.
 */
export async function titleThread(
  client: WebClient,
  place: { channel: string; threadTs: string },
  input: string,
): Promise<void> {
  const title = threadTitle(input);
  if (title) await client.assistant.threads.setTitle({ channel_id: place.channel, thread_ts: place.threadTs, title });
}

function threadTitle(input: string): string | undefined {
  const firstLine = input.split("\n").find((line) => line.trim()) ?? "";
  const plain = withoutBroadcasts(
    firstLine
      .replace(/<[@#!][^>]*>/g, "")
      .replace(/\s+/g, " ")
      .trim(),
  );
  if (!plain) return undefined;
  return plain.length > TITLE_LIMIT ? `${plain.slice(0, TITLE_LIMIT - 1)}…` : plain;
}

/**
 * Slack's agent sessions (agents.sessions.setStatus, the successor of the assistant status): a DM
 * thread's session is "processing" while a run works, which shows Slack's stop button, and
 * "active" (or "suspended" while it waits for an approval) once it ends; Slack no longer clears
 * that state by itself. An app that is not declared as an agent is refused: after the first
 * refusal this process stops asking, and the status message (slack-surface.ts) still shows.
 */
export function createAgentSessions(log: Logger) {
  let refused = false;
  const setStatus = async (
    client: WebClient,
    place: { channel: string; threadTs: string },
    status: string,
    extra: { title?: string; initiator_user_id?: string } = {},
  ) => {
    if (refused) return;
    try {
      await client.agents.sessions.setStatus({
        channel_id: place.channel,
        thread_ts: place.threadTs,
        status,
        ...extra,
      });
    } catch (error) {
      refused = true;
      log.info(
        { error: (error as Error).message },
        "Slack refused agent sessions (the app is not declared as an agent); the status message still shows",
      );
    }
  };
  return {
    /** The session works on a run for `user`; a run's first message (`input`) titles it. */
    working(client: WebClient, place: { channel: string; threadTs: string; user: string; input?: string }) {
      const title = place.input === undefined ? undefined : threadTitle(place.input);
      return setStatus(client, place, "processing", { ...(title ? { title } : {}), initiator_user_id: place.user });
    },
    /** The run ended: active, or suspended while it waits for an approval. */
    settled(client: WebClient, place: { channel: string; threadTs: string }, stopReason: RunResult["stopReason"]) {
      return setStatus(client, place, stopReason === "awaiting_approval" ? "suspended" : "active");
    },
  };
}
export type AgentSessions = ReturnType<typeof createAgentSessions>;

/** A channel's name where the bot may see it (channels:read), looked up once per channel and bounded in time. */
export function channelNames(timeoutMs = 2_000) {
  const names = new Map<string, Promise<string | undefined>>();
  return (client: WebClient, teamId: string, channel: string): Promise<string | undefined> => {
    const key = `${teamId}:${channel}`;
    let name = names.get(key);
    if (!name) {
      let timer: NodeJS.Timeout | undefined;
      const lookup = client.conversations
        .info({ channel })
        .then((answer) => answer.channel?.name)
        .catch(() => undefined);
      const late = new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), timeoutMs);
        timer.unref();
      });
      name = Promise.race([lookup, late]).finally(() => clearTimeout(timer));
      if (names.size >= 1_000) names.delete(names.keys().next().value as string);
      names.set(key, name);
    }
    return name;
  };
}
