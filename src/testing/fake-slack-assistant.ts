// The fake Slack's part for agent apps: the Web API methods of Slack's agent experience (suggested
// prompts, thread titles, the status with its loading messages, agent sessions) checked as Slack documents them, and
// the events Slack sends an agent app, built in the shapes Slack's reference pages show. Each shape
// says where it was seen. The methods keep what they were told, so a test can read back what a
// person would see: a thread's title, the prompts on a thread or on the Messages tab.

type Args = Record<string, unknown>;
type Reply = Record<string, unknown>;
const str = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);
const fail = (error: string): Reply => ({ ok: false, error });

export interface SuggestedPrompt {
  title: string;
  message: string;
}

/** What the agent-experience methods left on screen. */
export interface FakeAssistantState {
  /** Titles by "<channel>/<thread_ts>". */
  titles: Map<string, string>;
  /** Prompts by "<channel>/<thread_ts>", or by "<channel>" for the agent view's Messages tab (no thread_ts). */
  prompts: Map<string, { title?: string; prompts: SuggestedPrompt[] }>;
  /** Agent sessions by "<channel>/<thread_ts>": every status they were given, in order, and the title they were created with. */
  sessions: Map<string, { statuses: string[]; title?: string }>;
}

/**
 * assistant.threads.setSuggestedPrompts, .setTitle and .setStatus, with the arguments Slack's
 * method pages require (docs.slack.dev/reference/methods/assistant.threads.setSuggestedPrompts,
 * .setTitle, .setStatus): channel_id always; thread_ts for a title and a status; for prompts it is
 * optional (the agent view pins prompts to the Messages tab, where a thread_ts must not be sent);
 * at most four prompts, each with a title and a message; at most ten loading messages.
 */
export function createAssistantMethods(): { methods: Record<string, (a: Args) => Reply>; state: FakeAssistantState } {
  const state: FakeAssistantState = { titles: new Map(), prompts: new Map(), sessions: new Map() };
  const methods: Record<string, (a: Args) => Reply> = {
    "assistant.threads.setSuggestedPrompts": (a) => {
      const channel = str(a.channel_id);
      if (!channel) return fail("invalid_arguments");
      const prompts = a.prompts;
      if (!Array.isArray(prompts) || prompts.length === 0 || prompts.length > 4) return fail("invalid_arguments");
      const checked = (prompts as Array<Partial<SuggestedPrompt> | null>).map((p) =>
        str(p?.title) && str(p?.message) ? { title: p?.title as string, message: p?.message as string } : undefined,
      );
      if (checked.some((p) => p === undefined)) return fail("invalid_arguments");
      const thread = str(a.thread_ts);
      state.prompts.set(thread ? `${channel}/${thread}` : channel, {
        ...(str(a.title) ? { title: str(a.title) } : {}),
        prompts: checked as SuggestedPrompt[],
      });
      return { ok: true };
    },
    "assistant.threads.setTitle": (a) => {
      const channel = str(a.channel_id);
      const thread = str(a.thread_ts);
      const title = str(a.title);
      if (!channel || !thread || !title) return fail("invalid_arguments");
      state.titles.set(`${channel}/${thread}`, title);
      return { ok: true };
    },
    "assistant.threads.setStatus": (a) => {
      // An empty status clears it, so only its presence is required.
      if (!str(a.channel_id) || !str(a.thread_ts) || typeof a.status !== "string") return fail("invalid_arguments");
      const loading = a.loading_messages;
      if (
        loading !== undefined &&
        (!Array.isArray(loading) || loading.length > 10 || loading.some((m) => typeof m !== "string"))
      )
        return fail("invalid_arguments");
      return { ok: true };
    },
    // docs.slack.dev/reference/methods/agents.sessions.setStatus: status is one of four; a
    // thread-based session (a channel or a DM) needs thread_ts; the title (at most 200 characters)
    // counts only when the call creates the session.
    "agents.sessions.setStatus": (a) => {
      const status = str(a.status);
      const channel = str(a.channel_id);
      const thread = str(a.thread_ts);
      if (!status || !["active", "processing", "suspended", "closed"].includes(status) || !channel || !thread)
        return fail("invalid_arguments");
      const title = str(a.title);
      if (title && title.length > 200) return fail("invalid_title");
      const key = `${channel}/${thread}`;
      const session = state.sessions.get(key) ?? { statuses: [], ...(title ? { title } : {}) };
      session.statuses.push(status);
      state.sessions.set(key, session);
      return { ok: true, status, ...(session.title ? { title: session.title } : {}) };
    },
  };
  return { methods, state };
}

// ---- Events an agent app receives (the inner `event`; the fake wraps it in the event_callback envelope)

/**
 * assistant_thread_started: seen in docs.slack.dev/reference/events/assistant_thread_started (the
 * event and its envelope) and in @slack/types' AssistantThreadStartedEvent. The assistant view's
 * container opened; `context` is the channel the person was viewing.
 */
export function assistantThreadStarted(o: {
  user: string;
  dm: string;
  threadTs: string;
  viewing?: string;
  teamId: string;
}): Args {
  return {
    type: "assistant_thread_started",
    assistant_thread: { user_id: o.user, context: threadContext(o), channel_id: o.dm, thread_ts: o.threadTs },
    event_ts: eventTs(),
  };
}

/** assistant_thread_context_changed: same shape (docs.slack.dev/reference/events/assistant_thread_context_changed). */
export function assistantThreadContextChanged(o: {
  user: string;
  dm: string;
  threadTs: string;
  viewing?: string;
  teamId: string;
}): Args {
  return {
    type: "assistant_thread_context_changed",
    assistant_thread: { user_id: o.user, context: threadContext(o), channel_id: o.dm, thread_ts: o.threadTs },
    event_ts: eventTs(),
  };
}

function threadContext(o: { viewing?: string; teamId: string }): Args {
  return o.viewing ? { channel_id: o.viewing, team_id: o.teamId, enterprise_id: null } : {};
}

/** One entity of an agent-view context, as docs.slack.dev/reference/events/app_context_changed and @slack/types' AppContextChangedEvent list them. */
export type ContextEntity =
  | {
      type: "slack#/types/channel_id" | "slack#/types/canvas_id" | "slack#/types/list_id";
      value: string;
      team_id?: string;
    }
  | { type: "slack#/types/message_context"; value: { channel_id: string; message_ts: string }; team_id?: string };

/**
 * app_context_changed: docs.slack.dev/reference/events/app_context_changed shows the inner event
 * with only `type` and `context` (the person is the envelope's non-bot authorization; slack-go
 * issue #1606 reports the same of live events); an empty context is `{}`. Send it with the
 * fake's `authorizedUser` option so the envelope names the person.
 */
export function appContextChanged(entities: ContextEntity[]): Args {
  return { type: "app_context_changed", context: entities.length ? { entities } : {} };
}

/**
 * app_home_opened on the Messages tab: docs.slack.dev/reference/events/app_home_opened (user,
 * channel, tab, event_ts); in the agent view this replaces assistant_thread_started
 * (docs.slack.dev/ai/migrating-to-agent-messaging), and it carries `context` like
 * app_context_changed (@slack/types' AppHomeOpenedEvent).
 */
export function appHomeOpened(o: {
  user: string;
  dm: string;
  tab?: "home" | "messages";
  entities?: ContextEntity[];
}): Args {
  return {
    type: "app_home_opened",
    user: o.user,
    channel: o.dm,
    tab: o.tab ?? "messages",
    ...(o.entities ? { context: { entities: o.entities } } : {}),
    event_ts: eventTs(),
  };
}

/**
 * agent_session_stopped: Slack's stop button was pressed (docs.slack.dev/reference/events/agent_session_stopped;
 * fields as @slack/types' AgentSessionStoppedEvent and node-slack-sdk PR #2707, checked there against live events).
 */
export function agentSessionStopped(o: {
  user: string;
  channel: string;
  threadTs: string;
  streamingTs?: string[];
}): Args {
  return {
    type: "agent_session_stopped",
    channel: o.channel,
    user: o.user,
    thread_ts: o.threadTs,
    streaming_message_ts: o.streamingTs ?? [],
    event_ts: eventTs(),
  };
}

/**
 * The `app_context` a DM carries in the agent view once the app subscribes to app_context_changed
 * (@slack/types' GenericMessageEvent.app_context; slack-go issue #1606): extra fields for a `message` event.
 */
export function withAppContext(entities: ContextEntity[]): Args {
  return { app_context: { entities } };
}

function eventTs(): string {
  const micros = Date.now() * 1000;
  return `${Math.floor(micros / 1e6)}.${String(micros % 1e6).padStart(6, "0")}`;
}
