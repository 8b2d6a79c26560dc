// A fake Slack on 127.0.0.1 that speaks the real wire protocols, so tests can drive the real
// `@slack/bolt` App (and `@slack/web-api` WebClient) without a network or a workspace:
//
//  - Web API: POST <apiUrl><method>, form-encoded (what @slack/web-api sends) or JSON, with
//    `Authorization: Bearer <token>`. Answers are always HTTP 200 with `{ok:true,...}` or
//    `{ok:false,error}` — like Slack, and because web-api retries any non-200 for ~30 minutes.
//  - Events API over HTTP: signed POSTs to the app's request URL (`v0:` HMAC-SHA256 signing).
//  - Interactivity: `payload=<json>` form POSTs, plus a `response_url` that the fake serves.
//  - Socket Mode: `apps.connections.open` hands out a single-use ws:// URL; the fake says `hello`,
//    sends envelopes and waits for the client's `{envelope_id}` ack.
//  - OAuth (with `oauth`): installing the app in many workspaces, each with a token of its own
//    (fake-slack-oauth.ts); events can come from any of them (`team`).
//  - Agent apps: suggested prompts, thread titles and the status with loading messages, and the
//    events Slack sends an agent app (fake-slack-assistant.ts); `assistant` reads what they set.
//
// The fake also keeps each channel's messages (posts, updates, stream appends, deletes), so a test
// can read what a person would see via `messages(channel, threadTs)` (and the bot through
// conversations.replies / conversations.history, paged with cursors as Slack does), and records every call with
// the broadcasts its text would carry (`<!channel>`, `<!here>`, `<!everyone>`, `<!subteam^ID>`).
import { createHmac, randomBytes, randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { parse as parseQuery } from "node:querystring";
import { WebSocketServer, type WebSocket } from "ws";
import { undiciFetch } from "../undici-fetch.js";
import { createAssistantMethods, type FakeAssistantState } from "./fake-slack-assistant.js";
import { createFakeOAuth, type EventTeam, type FakeOAuth, type FakeOAuthOptions } from "./fake-slack-oauth.js";
import { createViewMethods, type FakeView, type ViewSubmissionInput } from "./fake-slack-views.js";
import { createFakeSlackFiles, type FakeSlackFiles } from "./fake-slack-files.js";
import { broadcastsOf } from "./platform-mentions.js";

export interface FakeSlackOptions {
  signingSecret?: string;
  botToken?: string; // xoxb-...; every Web API method except apps.connections.open requires it
  appToken?: string; // xapp-...; only apps.connections.open accepts it
  teamId?: string;
  botUserId?: string;
  botId?: string;
  appId?: string;
  /** Methods that answer `{ok:false}`. An array uses error "missing_scope"; a record names the error. */
  refuse?: string[] | Record<string, string>;
  /** How long sendSocketEvent waits for the client's ack (Slack's own deadline is 3 s). */
  ackTimeoutMs?: number;
  /** Workspaces that can install the app through OAuth, each with its own bot token. */
  oauth?: FakeOAuthOptions;
  /** Block types this Slack refuses with invalid_blocks (as where an app or surface does not support them). */
  unsupportedBlocks?: string[];
}

export interface RecordedCall {
  method: string;
  args: Record<string, unknown>; // as it arrived (form fields holding JSON parsed), text fields and blocks included
  token?: string;
  at: number;
  /**
   * The broadcasts anywhere in the call's text (text, markdown_text, chunks, blocks, status, ...):
   * special mentions, and plain `@channel`/`@here`/`@everyone` where Slack would read them (with
   * `link_names` or `parse=full`) or might (markdown, a status: Slack does not say, so the fake
   * assumes it does).
   */
  broadcasts: string[];
}

export interface FakeMessage {
  ts: string; text?: string; blocks?: unknown[]; user?: string; bot_id?: string; thread_ts?: string;
  reactions?: string[];
}

export interface SigningOverrides {
  signingSecret?: string; // sign with another secret to produce a bad signature
  timestamp?: number; // unix seconds; an old one makes the request stale
}
export interface SendEventOptions extends SigningOverrides {
  eventId?: string; retryNum?: number; retryReason?: string; team?: EventTeam;
  /** The envelope's authorization names this person (is_bot false) instead of the bot, as for app_context_changed. */
  authorizedUser?: string;
}
export interface BlockActionInput {
  userId: string; channel: string; messageTs: string; actionId: string; value: string; blockId?: string;
  /** The same click delivered again carries the trigger_id it had (default: a new click, a new trigger). */
  triggerId?: string;
  /** The workspace the click comes from (default the fake's); null as in an org-wide install. */
  teamId?: string | null;
  /** An Enterprise Grid org: `user.team_id` then says the org (E...), `team` and `enterprise` carry it. */
  enterpriseId?: string;
}
export interface SocketSendResult { acked: boolean; envelopeId: string; payload?: unknown /* the ack's payload, if any */ }
export interface WaitForCallOptions { timeoutMs?: number; since?: number /* only calls at index >= since */ }

export interface FakeSlack {
  apiUrl: string; // http://127.0.0.1:PORT/api/ — give it to `clientOptions.slackApiUrl`
  /** Present with the `oauth` option. */
  oauth?: FakeOAuth;
  /** What the agent-experience methods set: thread titles, suggested prompts. */
  assistant: FakeAssistantState;
  /** Files to share in events (`files.add`), served at their url_private_download; `files.downloads` records who fetched them. */
  files: FakeSlackFiles;
  calls: RecordedCall[];
  callsTo(method: string): RecordedCall[];
  /** Resolves with the first matching call, looking at already-recorded calls first (from `since`, default 0). */
  waitForCall(method: string, predicate?: (call: RecordedCall) => boolean, options?: number | WaitForCallOptions): Promise<RecordedCall>;
  /** A channel's messages in ts order (user messages from sent events included, ephemerals not);
   * without threadTs every message, top level and replies; with it the thread's parent (if known) and replies. */
  messages(channel: string, threadTs?: string): FakeMessage[];
  refuse(method: string, error?: string): void; // start refusing a method mid-test
  sendEvent(targetUrl: string, event: Record<string, unknown>, options?: SendEventOptions): Promise<{ status: number; body: string; eventId: string }>;
  sendBlockAction(targetUrl: string, action: BlockActionInput, options?: SigningOverrides): Promise<{ status: number; body: string }>;
  sendUrlVerification(targetUrl: string, options?: SigningOverrides): Promise<{ status: number; body: string; challenge: string }>;
  /** The modals views.open opened, oldest first. */
  views: FakeView[];
  /** Submits a modal as the person it was opened for (a signed view_submission). */
  sendViewSubmission(targetUrl: string, input: ViewSubmissionInput, options?: SigningOverrides): Promise<{ status: number; body: string }>;
  socketConnections(): number;
  waitForSocket(count?: number, timeoutMs?: number): Promise<void>;
  sendSocketEvent(event: Record<string, unknown>, options?: { eventId?: string; retryAttempt?: number; retryReason?: string; connection?: number; team?: EventTeam }): Promise<SocketSendResult & { eventId: string }>;
  sendSocketBlockAction(action: BlockActionInput, options?: { connection?: number }): Promise<SocketSendResult>;
  /** Sends Slack's `disconnect` message (the client should reconnect through apps.connections.open). */
  disconnectSocket(connection?: number, reason?: string): void;
  nextTs(): string;
  /** Stores a message a person wrote, with no event sent (for tests that drive a worker, which receives none); returns its ts. */
  addUserMessage(channel: string, message: { user: string; text: string; threadTs?: string }): string;
  close(): Promise<void>;
}

type Args = Record<string, unknown>;
type Reply = Record<string, unknown>;
const str = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);
const fail = (error: string): Reply => ({ ok: false, error });

/** Slack's missing_scope says which scope the call needed: for reading a conversation, by its kind (C public, G private or group DM, D DM). */
function refusalOf(method: string, error: string, args: Args): Reply {
  if (error !== "missing_scope") return fail(error);
  const channel = str(args.channel) ?? "";
  const reading = method === "conversations.replies" || method === "conversations.history";
  const needed = reading ? (channel.startsWith("D") ? "im:history" : channel.startsWith("G") ? "groups:history" : "channels:history") : undefined;
  return { ...fail(error), ...(needed ? { needed } : {}), provided: "app_mentions:read,chat:write,im:history" };
}

/** Compares Slack timestamps exactly ("1730000000.000100"); parseFloat would lose the micro part. */
function compareTs(a: string, b: string): number {
  const [ai = "0", af = ""] = a.split(".");
  const [bi = "0", bf = ""] = b.split(".");
  return Number(ai) - Number(bi) || af.padEnd(6, "0").localeCompare(bf.padEnd(6, "0"));
}

/** The markdown a stream call adds: `markdown_text` and/or `chunks: [{type:"markdown_text", text}]`
 * (web-api 8's ChatStreamer sends only chunks, and its first call may carry none). */
function streamText(args: Args): string {
  let text = str(args.markdown_text) ?? "";
  if (Array.isArray(args.chunks)) {
    for (const chunk of args.chunks as Array<{ type?: string; text?: string }>) {
      if (chunk?.type === "markdown_text" && typeof chunk.text === "string") text += chunk.text;
    }
  }
  return text;
}

/** Slack refuses blocks it cannot show: here, a section whose text is over its 3,000 characters. */
function blocksProblem(blocks: unknown, unsupported: string[] = []): string | undefined {
  for (const block of (Array.isArray(blocks) ? blocks : []) as Array<{ type?: string; text?: { text?: unknown } }>) {
    if (unsupported.includes(block.type ?? "")) return "invalid_blocks";
    if (block.type === "section" && typeof block.text?.text === "string" && block.text.text.length > 3000) return "invalid_blocks";
  }
  return undefined;
}

/** Finds a block element by action_id so a block action can carry its real block_id and label. */
function findElement(blocks: unknown[] | undefined, actionId: string, value: string): { blockId?: string; text?: unknown; type?: string } | undefined {
  type Element = { action_id?: string; type?: string; text?: unknown; positive_button?: { text?: unknown; value?: string }; negative_button?: { text?: unknown; value?: string } };
  for (const block of (blocks ?? []) as Array<{ block_id?: string; elements?: unknown[]; accessory?: unknown }>) {
    const candidates = [...(block.elements ?? []), block.accessory] as Array<Element | undefined>;
    const hit = candidates.find((el) => el?.action_id === actionId);
    // Feedback buttons send the value and label of the one of their two buttons that was clicked.
    const pressed = hit?.type === "feedback_buttons" ? [hit.positive_button, hit.negative_button].find((button) => button?.value === value) : undefined;
    if (hit) return { blockId: block.block_id, text: pressed?.text ?? hit.text, type: hit.type };
  }
  return undefined;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

/** Form values that hold JSON (blocks, chunks, metadata, ...) become objects; text stays text. */
function parseArgs(raw: string, contentType: string, query: string): Args {
  const args: Args = { ...parseQuery(query) };
  if (contentType.startsWith("application/json")) return { ...args, ...(raw ? (JSON.parse(raw) as Args) : {}) };
  for (const [key, value] of Object.entries(parseQuery(raw))) {
    const v = Array.isArray(value) ? value[0] : value;
    args[key] = v;
    if (typeof v === "string" && /^[[{]/.test(v) && key !== "text" && key !== "markdown_text") {
      try { args[key] = JSON.parse(v); } catch { /* not JSON after all: keep the string */ }
    }
  }
  return args;
}

export async function startFakeSlack(options: FakeSlackOptions = {}): Promise<FakeSlack> {
  const signingSecret = options.signingSecret ?? "fake-signing-secret";
  const botToken = options.botToken ?? "xoxb-fake-bot-token";
  const appToken = options.appToken ?? "xapp-1-fake-app-token";
  const teamId = options.teamId ?? "T0FAKE0001";
  const botUserId = options.botUserId ?? "U0FAKEBOT1";
  const botId = options.botId ?? "B0FAKEBOT1";
  const appId = options.appId ?? "A0FAKEAPP1";
  const ackTimeoutMs = options.ackTimeoutMs ?? 3000;
  const refused = new Map<string, string>(
    Array.isArray(options.refuse) ? options.refuse.map((m) => [m, "missing_scope"]) : Object.entries(options.refuse ?? {}),
  );

  const calls: RecordedCall[] = [];
  const waiters = new Set<{ check: (c: RecordedCall, i: number) => void; reject: (e: Error) => void }>();
  const channels = new Map<string, FakeMessage[]>();
  const responseUrls = new Map<string, { channel: string; messageTs: string }>();
  const tickets = new Set<string>(); // apps.connections.open URLs are single use, as in Slack
  const sockets: WebSocket[] = []; // open connections that got `hello`, oldest first
  const socketWaiters = new Set<() => void>();
  const pendingAcks = new Map<string, (acked: boolean, payload?: unknown) => void>(); // by envelope_id
  const streaming = new Set<string>(); // "channel/ts" of streams not yet stopped
  let lastMicros = 0;
  let origin = "";
  const oauth = options.oauth && createFakeOAuth(options.oauth, () => origin, appId);
  const assistant = createAssistantMethods();
  const modals = createViewMethods(teamId, appId);
  const unsupported = options.unsupportedBlocks ?? [];
  const files = await createFakeSlackFiles(() => origin, (token) => token === botToken || oauth?.workspaceOf(token) !== undefined, teamId);

  function nextTs(): string {
    lastMicros = Math.max(lastMicros + 1, Date.now() * 1000); // strictly increasing, like real ts
    return `${Math.floor(lastMicros / 1e6)}.${String(lastMicros % 1e6).padStart(6, "0")}`;
  }
  const channelMessages = (channel: string): FakeMessage[] => {
    let list = channels.get(channel);
    if (!list) channels.set(channel, (list = []));
    return list;
  };
  const findMessage = (channel: string, ts: string) => channels.get(channel)?.find((m) => m.ts === ts);
  const botMessage = (ts: string, fields: Partial<FakeMessage>): FakeMessage => ({ ts, user: botUserId, bot_id: botId, ...fields });
  const asMessageReply = (m: FakeMessage) => ({ type: "message", app_id: appId, team: teamId, ...m });

  // ---- Web API ------------------------------------------------------------------------------
  const methods: Record<string, (a: Args, token?: string) => Reply> = {
    "auth.test": (_a, token) => {
      const installed = oauth?.workspaceOf(token); // a token from OAuth answers as its workspace
      const team = installed?.teamId ?? teamId;
      return { ok: true, url: `https://${team.toLowerCase()}.slack.com/`, team: installed?.teamName ?? "Fake Team", user: "glassbox",
        team_id: team, user_id: installed?.botUserId ?? botUserId, bot_id: installed?.botId ?? botId, is_enterprise_install: installed?.orgWide === true,
        ...(installed?.enterpriseId ? { enterprise_id: installed.enterpriseId } : {}) };
    },
    "chat.postMessage": (a) => {
      const channel = str(a.channel);
      if (!channel) return fail("channel_not_found");
      if (!str(a.text) && !Array.isArray(a.blocks) && !str(a.markdown_text)) return fail("no_text");
      const blocksRefused = blocksProblem(a.blocks, unsupported);
      if (blocksRefused) return fail(blocksRefused);
      const msg = botMessage(nextTs(), { text: str(a.text) ?? str(a.markdown_text) ?? "",
        ...(Array.isArray(a.blocks) ? { blocks: a.blocks } : {}), ...(str(a.thread_ts) ? { thread_ts: str(a.thread_ts) } : {}) });
      channelMessages(channel).push(msg);
      return { ok: true, channel, ts: msg.ts, message: asMessageReply(msg) };
    },
    "chat.update": (a) => {
      const channel = str(a.channel) ?? "";
      const msg = findMessage(channel, str(a.ts) ?? "");
      if (!msg) return fail("message_not_found");
      if (msg.bot_id !== botId) return fail("cant_update_message"); // bots may edit only their own
      const blocksRefused = blocksProblem(a.blocks, unsupported);
      if (blocksRefused) return fail(blocksRefused);
      if (a.text !== undefined) msg.text = String(a.text);
      if (Array.isArray(a.blocks)) msg.blocks = a.blocks;
      return { ok: true, channel, ts: msg.ts, text: msg.text ?? "", message: asMessageReply(msg) };
    },
    "chat.postEphemeral": (a) => (str(a.channel) && str(a.user) ? { ok: true, message_ts: nextTs() } : fail("channel_not_found")),
    "chat.delete": (a) => {
      const channel = str(a.channel) ?? "";
      const list = channels.get(channel) ?? [];
      const index = list.findIndex((m) => m.ts === a.ts);
      if (index < 0) return fail("message_not_found");
      list.splice(index, 1);
      return { ok: true, channel, ts: a.ts };
    },
    "chat.startStream": (a) => {
      const channel = str(a.channel);
      if (!channel) return fail("channel_not_found");
      if (!str(a.thread_ts)) return fail("invalid_arguments"); // streams are always thread replies
      const msg = botMessage(nextTs(), { text: streamText(a), thread_ts: str(a.thread_ts) });
      channelMessages(channel).push(msg);
      streaming.add(`${channel}/${msg.ts}`);
      return { ok: true, channel, ts: msg.ts };
    },
    "chat.appendStream": (a) => appendToStream(a, false),
    "chat.stopStream": (a) => appendToStream(a, true),
    ...assistant.methods,
    ...modals.methods,
    "reactions.add": (a) => {
      const msg = findMessage(str(a.channel) ?? "", str(a.timestamp) ?? "");
      const name = str(a.name);
      if (!name) return fail("invalid_name");
      if (msg?.reactions?.includes(name)) return fail("already_reacted");
      if (msg) msg.reactions = [...(msg.reactions ?? []), name];
      return { ok: true };
    },
    "conversations.info": (a) => {
      const id = str(a.channel);
      if (!id) return fail("channel_not_found");
      const isIm = id.startsWith("D");
      return { ok: true, channel: { id, name: isIm ? undefined : `channel-${id.toLowerCase()}`, is_channel: id.startsWith("C"),
        is_im: isIm, is_private: !id.startsWith("C"), is_member: true, ...(isIm ? { user: "U0FAKEUSER" } : {}) } };
    },
    "conversations.replies": (a) => {
      const channel = str(a.channel);
      const ts = str(a.ts);
      if (!channel || !channels.has(channel)) return fail("channel_not_found");
      if (!ts) return fail("invalid_arguments");
      const thread = channelMessages(channel).filter((m) => m.ts === ts || m.thread_ts === ts).sort((x, y) => compareTs(x.ts, y.ts));
      if (thread.length === 0) return fail("thread_not_found");
      // The parent leads the first page; later pages (a cursor) hold replies only, as in Slack.
      const parent = thread.find((m) => m.ts === ts);
      const replies = thread.filter((m) => m !== parent && inRange(m.ts, a));
      return page(replies, a, (list, first) => (first && parent ? [parent, ...list] : list));
    },
    "conversations.history": (a) => {
      const channel = str(a.channel);
      if (!channel || !channels.has(channel)) return fail("channel_not_found");
      // Top-level messages only (a thread's parent, not its replies), newest first.
      const list = channelMessages(channel).filter((m) => (!m.thread_ts || m.thread_ts === m.ts) && inRange(m.ts, a)).sort((x, y) => compareTs(y.ts, x.ts));
      return page(list, a, (items) => items);
    },
    "users.info": (a) => {
      const id = str(a.user);
      if (!id) return fail("user_not_found");
      const name = id === botUserId ? "glassbox" : `user-${id.toLowerCase()}`;
      return { ok: true, user: { id, team_id: teamId, name, real_name: name, is_bot: id === botUserId, deleted: false,
        tz: "UTC", profile: { display_name: name, real_name: name } } };
    },
    "apps.connections.open": () => {
      const ticket = randomUUID();
      tickets.add(ticket);
      return { ok: true, url: `${origin.replace("http", "ws")}/link/?ticket=${ticket}&app_id=${appId}` };
    },
  };

  /** `oldest` and `latest` bound a listing, both exclusive unless `inclusive` (Slack's timestamps, compared exactly). */
  function inRange(ts: string, a: Args): boolean {
    const inclusive = a.inclusive === true || a.inclusive === "true" || a.inclusive === "1";
    const oldest = str(a.oldest);
    const latest = str(a.latest);
    if (oldest && (inclusive ? compareTs(ts, oldest) < 0 : compareTs(ts, oldest) <= 0)) return false;
    if (latest && (inclusive ? compareTs(ts, latest) > 0 : compareTs(ts, latest) >= 0)) return false;
    return true;
  }

  /**
   * One page of a listing (`limit`, default 100, at most 1,000) from `cursor`, an opaque string as in
   * Slack: each message as Slack lists it, has_more, and response_metadata.next_cursor ("" on the last page).
   */
  function page(list: FakeMessage[], a: Args, shape: (items: FakeMessage[], first: boolean) => FakeMessage[]): Reply {
    const cursor = str(a.cursor);
    const start = cursor ? Number(/^next:(\d+)$/.exec(Buffer.from(cursor, "base64").toString("utf8"))?.[1] ?? Number.NaN) : 0;
    if (!Number.isInteger(start)) return fail("invalid_cursor");
    const limit = Math.min(Math.max(Number(a.limit ?? 100) || 100, 1), 1000);
    const items = list.slice(start, start + limit);
    const more = start + limit < list.length;
    return { ok: true, messages: shape(items, start === 0).map(listedMessage),
      has_more: more, response_metadata: { next_cursor: more ? Buffer.from(`next:${start + limit}`).toString("base64") : "" } };
  }

  /** A stored message as a listing shows it: reactions as Slack describes them (the bot's own, here). */
  function listedMessage(m: FakeMessage): Reply {
    const { reactions, ...fields } = structuredClone(m);
    return { type: "message", ...fields, ...(m.bot_id ? { app_id: appId, team: teamId } : {}),
      ...(reactions?.length ? { reactions: reactions.map((name) => ({ name, users: [botUserId], count: 1 })) } : {}) };
  }

  function appendToStream(a: Args, stop: boolean): Reply {
    const channel = str(a.channel) ?? "";
    const msg = findMessage(channel, str(a.ts) ?? "");
    if (!msg) return fail("message_not_found");
    if (!streaming.has(`${channel}/${msg.ts}`)) return fail("message_not_in_streaming_state");
    const blocksRefused = blocksProblem(a.blocks, unsupported);
    if (blocksRefused) return fail(blocksRefused); // refused whole: the stream stays open
    msg.text = (msg.text ?? "") + streamText(a);
    if (stop) {
      streaming.delete(`${channel}/${msg.ts}`);
      if (Array.isArray(a.blocks)) msg.blocks = a.blocks; // rendered under the streamed text
      return { ok: true, channel, ts: msg.ts, message: asMessageReply(msg) };
    }
    return { ok: true, channel, ts: msg.ts };
  }

  function record(call: RecordedCall): void {
    calls.push(call);
    for (const waiter of [...waiters]) waiter.check(call, calls.length - 1);
  }

  async function handleApi(req: IncomingMessage, res: ServerResponse, method: string, query: string): Promise<void> {
    let args: Args;
    try {
      args = parseArgs(await readBody(req), req.headers["content-type"] ?? "", query);
    } catch {
      return sendJson(res, fail("invalid_json"));
    }
    const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1];
    const token = bearer ?? str(args.token); // Slack also takes a token form field
    delete args.token;
    // Recorded first so failed calls show up too; the handler below runs in the same tick, so a
    // waitForCall() continuation already sees its effect in messages().
    record({ method, args, token, at: Date.now(), get broadcasts() { return broadcastsOf(args); } }); // read by tests only: the benches' harness need not pay for it
    if (method === "oauth.v2.access" && oauth) return sendJson(res, oauth.access(args)); // the client id and secret are its credentials
    const handler = methods[method];
    if (!handler) return sendJson(res, fail("unknown_method"));
    const wanted = method === "apps.connections.open" ? appToken : botToken;
    if (!token) return sendJson(res, fail("not_authed"));
    const installedToken = method !== "apps.connections.open" && oauth?.workspaceOf(token) !== undefined;
    if (token !== wanted && !installedToken) return sendJson(res, fail(token === appToken || token === botToken ? "not_allowed_token_type" : "invalid_auth"));
    const refusal = refused.get(method);
    sendJson(res, refusal ? refusalOf(method, refusal, args) : handler(args, token));
  }

  // A response_url accepts JSON like Bolt's respond(); replace/delete act on the original message.
  async function handleResponseUrl(req: IncomingMessage, res: ServerResponse, id: string): Promise<void> {
    const raw = await readBody(req);
    let args: Args;
    try {
      const form = req.headers["content-type"]?.startsWith("application/x-www-form-urlencoded") ? parseQuery(raw).payload : raw;
      args = JSON.parse(String(form)) as Args;
    } catch {
      return sendJson(res, fail("invalid_payload"), 400);
    }
    record({ method: "response_url", args, at: Date.now(), get broadcasts() { return broadcastsOf(args); } });
    const target = responseUrls.get(id);
    if (!target) return sendJson(res, fail("expired_url"), 404);
    const original = findMessage(target.channel, target.messageTs);
    if (args.delete_original === true || args.delete_original === "true") {
      const list = channels.get(target.channel) ?? [];
      if (original) list.splice(list.indexOf(original), 1);
    } else if ((args.replace_original === true || args.replace_original === "true") && original) {
      if (typeof args.text === "string") original.text = args.text;
      if (Array.isArray(args.blocks)) original.blocks = args.blocks;
    } else if (args.response_type === "in_channel") {
      channelMessages(target.channel).push(botMessage(nextTs(), { text: str(args.text) ?? "",
        ...(Array.isArray(args.blocks) ? { blocks: args.blocks } : {}), ...(str(args.thread_ts) ? { thread_ts: str(args.thread_ts) } : {}) }));
    } // anything else is ephemeral: only the clicking user would see it, so it is not stored
    sendJson(res, { ok: true });
  }

  function sendJson(res: ServerResponse, body: Reply, status = 200): void {
    res.writeHead(status, { "Content-Type": "application/json" });
    res.end(JSON.stringify(body));
  }

  const server = createServer((req, res) => {
    const [path = "", query = ""] = (req.url ?? "").split("?", 2);
    const api = /^\/api\/([\w.]+)$/.exec(path);
    const response = /^\/response\/([\w-]+)$/.exec(path);
    if (oauth && path === "/oauth/v2/authorize" && req.method === "GET") return oauth.handleAuthorize(new URLSearchParams(query), res);
    if (files.handle(req, res)) return;
    const work = api?.[1] ? handleApi(req, res, api[1], query)
      : response?.[1] && req.method === "POST" ? handleResponseUrl(req, res, response[1])
      : Promise.resolve(sendJson(res, fail("not_found"), 404));
    work.catch((error: unknown) => { if (!res.headersSent) sendJson(res, fail(`fake_slack_error: ${String(error)}`), 500); });
  });

  // ---- Socket Mode --------------------------------------------------------------------------
  const wss = new WebSocketServer({ noServer: true });
  server.on("upgrade", (req, socket, head) => {
    const url = new URL(req.url ?? "/", origin);
    const ticket = url.searchParams.get("ticket") ?? "";
    if (url.pathname !== "/link/" || !tickets.delete(ticket)) {
      socket.end("HTTP/1.1 401 Unauthorized\r\nConnection: close\r\n\r\n");
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      ws.on("message", (data) => {
        let message: { envelope_id?: string; payload?: unknown };
        try { message = JSON.parse(String(data)) as typeof message; } catch { return; }
        const id = message.envelope_id;
        if (id) pendingAcks.get(id)?.(true, message.payload);
      });
      ws.on("close", () => {
        const index = sockets.indexOf(ws);
        if (index >= 0) sockets.splice(index, 1);
      });
      sockets.push(ws);
      ws.send(JSON.stringify({ type: "hello", num_connections: sockets.length, connection_info: { app_id: appId },
        debug_info: { host: "applink-fake", build_number: 1, approximate_connection_time: 18060 } }));
      for (const notify of [...socketWaiters]) notify();
    });
  });

  function sendEnvelope(type: "events_api" | "interactive", payload: Args, connection: number, extra: Args = {}): Promise<SocketSendResult> {
    const ws = sockets[connection];
    if (!ws) return Promise.reject(new Error(`fake-slack: no open socket connection #${connection} (open: ${sockets.length})`));
    const envelopeId = randomUUID();
    return new Promise((resolve) => {
      const timer = setTimeout(() => finish(false), ackTimeoutMs);
      function finish(acked: boolean, ackPayload?: unknown) {
        clearTimeout(timer);
        pendingAcks.delete(envelopeId);
        resolve({ acked, envelopeId, ...(ackPayload !== undefined ? { payload: ackPayload } : {}) });
      }
      pendingAcks.set(envelopeId, finish);
      ws.send(JSON.stringify({ envelope_id: envelopeId, type, payload, accepts_response_payload: false, ...extra }));
    });
  }

  // ---- Outgoing requests (Events API, interactivity) ----------------------------------------
  function eventCallback(event: Record<string, unknown>, eventId: string, from?: EventTeam, authorizedUser?: string): Args {
    const team = from?.teamId ?? teamId;
    const enterprise = from?.enterpriseId ?? null;
    const inner: Args = { ...event };
    const channel = str(inner.channel);
    const isMessage = inner.type === "message" || inner.type === "app_mention";
    if (channel && isMessage && !inner.ts) inner.ts = nextTs(); // other events with a channel (app_home_opened, ...) have no ts
    if (!inner.event_ts) inner.event_ts = inner.ts ?? nextTs();
    if (inner.type === "message" || inner.type === "app_mention") {
      inner.team ??= team;
      if (!inner.bot_id) inner.client_msg_id ??= randomUUID();
      if (inner.type === "message" && channel) inner.channel_type ??= channel.startsWith("D") ? "im" : channel.startsWith("G") ? "group" : "channel";
      // What the person typed is part of the conversation a test may read back.
      if (channel && typeof inner.ts === "string" && !inner.subtype && !findMessage(channel, inner.ts)) {
        channelMessages(channel).push({ ts: inner.ts, text: str(inner.text) ?? "", ...(str(inner.user) ? { user: str(inner.user) } : {}),
          ...(str(inner.thread_ts) ? { thread_ts: str(inner.thread_ts) } : {}) });
      }
    }
    // An org-wide install's authorization names the org, not the workspace (team_id null).
    return { token: "fake-verification-token", team_id: team, context_team_id: team, context_enterprise_id: enterprise, ...(enterprise ? { enterprise_id: enterprise } : {}),
      api_app_id: appId, event: inner, type: "event_callback", event_id: eventId, event_time: Math.floor(Date.now() / 1000),
      authorizations: [{ enterprise_id: enterprise, team_id: from?.orgWide ? null : team, user_id: authorizedUser ?? from?.botUserId ?? botUserId, is_bot: authorizedUser === undefined, is_enterprise_install: from?.orgWide === true }],
      is_ext_shared_channel: false, event_context: `4-${randomBytes(12).toString("base64url")}` };
  }

  function blockActionPayload(action: BlockActionInput): Args {
    const original = findMessage(action.channel, action.messageTs);
    const element = findElement(original?.blocks, action.actionId, action.value);
    const responseId = randomUUID();
    responseUrls.set(responseId, { channel: action.channel, messageTs: action.messageTs });
    const team = action.teamId === undefined ? teamId : action.teamId;
    const grid = action.enterpriseId ? { enterprise_id: action.enterpriseId, enterprise_name: "Fake Org" } : {};
    return {
      type: "block_actions", api_app_id: appId, token: "fake-verification-token", is_enterprise_install: false,
      enterprise: action.enterpriseId ? { id: action.enterpriseId, name: "Fake Org" } : null,
      // In an Enterprise Grid org, user.team_id is the org's id, not the workspace's.
      user: { id: action.userId, username: `user-${action.userId.toLowerCase()}`, name: `user-${action.userId.toLowerCase()}`, team_id: action.enterpriseId ?? team ?? teamId },
      team: team === null ? null : { id: team, domain: team.toLowerCase(), ...grid },
      container: { type: "message", message_ts: action.messageTs, channel_id: action.channel, is_ephemeral: false },
      channel: { id: action.channel, name: `channel-${action.channel.toLowerCase()}` },
      message: asMessageReply(original ?? botMessage(action.messageTs, { text: "" })),
      trigger_id: action.triggerId ?? modals.issueTrigger(action.userId),
      response_url: `${origin}/response/${responseId}`,
      state: { values: {} },
      actions: [{ type: element?.type === "feedback_buttons" ? "feedback_buttons" : "button", action_id: action.actionId, block_id: action.blockId ?? element?.blockId ?? randomBytes(3).toString("hex"),
        text: element?.text ?? { type: "plain_text", text: action.value, emoji: true }, value: action.value,
        action_ts: `${(Date.now() / 1000).toFixed(6)}` }],
    };
  }

  /** POSTs a body signed exactly like Slack: hex HMAC-SHA256 of `v0:<timestamp>:<raw body>`. */
  async function signedPost(url: string, body: string, contentType: string, o: SigningOverrides, headers: Record<string, string> = {}) {
    const timestamp = o.timestamp ?? Math.floor(Date.now() / 1000);
    const signature = createHmac("sha256", o.signingSecret ?? signingSecret).update(`v0:${timestamp}:${body}`).digest("hex");
    // glassbox's own transport: the sender stands for Slack's servers, whose work is not the bot's.
    const res = await undiciFetch(url, { method: "POST", body, headers: { ...headers, "Content-Type": contentType,
      "X-Slack-Request-Timestamp": String(timestamp), "X-Slack-Signature": `v0=${signature}` } });
    return { status: res.status, body: await res.text() };
  }

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    apiUrl: `${origin}/api/`,
    ...(oauth ? { oauth } : {}),
    assistant: assistant.state,
    files,
    calls,
    callsTo: (method) => calls.filter((c) => c.method === method),
    waitForCall(method, predicate = () => true, opts = {}) {
      const { timeoutMs = 5000, since = 0 } = typeof opts === "number" ? { timeoutMs: opts } : opts;
      const matches = (c: RecordedCall, i: number) => i >= since && c.method === method && predicate(c);
      const found = calls.find(matches);
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const waiter = {
          check: (c: RecordedCall, i: number) => { if (matches(c, i)) { done(); resolve(c); } },
          reject: (e: Error) => { done(); reject(e); },
        };
        const timer = setTimeout(() => waiter.reject(new Error(`fake-slack: no matching ${method} call within ${timeoutMs} ms; ` +
          `received: ${calls.map((c) => c.method).join(", ") || "nothing"}`)), timeoutMs);
        const done = () => { clearTimeout(timer); waiters.delete(waiter); };
        waiters.add(waiter);
      });
    },
    messages(channel, threadTs) {
      const list = (channels.get(channel) ?? []).filter((m) => threadTs === undefined || m.ts === threadTs || m.thread_ts === threadTs);
      return structuredClone([...list].sort((a, b) => compareTs(a.ts, b.ts)));
    },
    refuse: (method, error = "missing_scope") => void refused.set(method, error),
    async sendEvent(targetUrl, event, o = {}) {
      const eventId = o.eventId ?? `Ev${randomBytes(5).toString("hex").toUpperCase()}`;
      const retry: Record<string, string> = o.retryNum === undefined ? {}
        : { "X-Slack-Retry-Num": String(o.retryNum), "X-Slack-Retry-Reason": o.retryReason ?? "http_timeout" };
      const result = await signedPost(targetUrl, JSON.stringify(eventCallback(event, eventId, o.team, o.authorizedUser)), "application/json", o, retry);
      return { ...result, eventId };
    },
    sendBlockAction(targetUrl, action, o = {}) {
      // Bolt matches this content type exactly: a "; charset=..." suffix would make it parse JSON.
      const body = `payload=${encodeURIComponent(JSON.stringify(blockActionPayload(action)))}`;
      return signedPost(targetUrl, body, "application/x-www-form-urlencoded", o);
    },
    views: modals.views,
    sendViewSubmission(targetUrl, input, o = {}) {
      const body = `payload=${encodeURIComponent(JSON.stringify(modals.submissionPayload(input)))}`;
      return signedPost(targetUrl, body, "application/x-www-form-urlencoded", o);
    },
    async sendUrlVerification(targetUrl, o = {}) {
      const challenge = randomBytes(16).toString("hex");
      const body = JSON.stringify({ token: "fake-verification-token", challenge, type: "url_verification" });
      return { ...(await signedPost(targetUrl, body, "application/json", o)), challenge };
    },
    socketConnections: () => sockets.length,
    waitForSocket(count = 1, timeoutMs = 5000) {
      if (sockets.length >= count) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const notify = () => { if (sockets.length >= count) { finish(); resolve(); } };
        const timer = setTimeout(() => { finish(); reject(new Error(`fake-slack: ${sockets.length}/${count} sockets after ${timeoutMs} ms`)); }, timeoutMs);
        const finish = () => { clearTimeout(timer); socketWaiters.delete(notify); };
        socketWaiters.add(notify);
      });
    },
    async sendSocketEvent(event, o = {}) {
      const eventId = o.eventId ?? `Ev${randomBytes(5).toString("hex").toUpperCase()}`;
      const result = await sendEnvelope("events_api", eventCallback(event, eventId, o.team), o.connection ?? 0,
        { retry_attempt: o.retryAttempt ?? 0, retry_reason: o.retryReason ?? "" });
      return { ...result, eventId };
    },
    sendSocketBlockAction: (action, o = {}) => sendEnvelope("interactive", blockActionPayload(action), o.connection ?? 0),
    disconnectSocket(connection = 0, reason = "refresh_requested") {
      sockets[connection]?.send(JSON.stringify({ type: "disconnect", reason, debug_info: { host: "applink-fake" } }));
    },
    nextTs,
    addUserMessage(channel, { user, text, threadTs }) {
      const ts = nextTs();
      channelMessages(channel).push({ ts, text, user, ...(threadTs ? { thread_ts: threadTs } : {}) });
      return ts;
    },
    async close() {
      for (const waiter of [...waiters]) waiter.reject(new Error("fake-slack: closed"));
      for (const finishAck of [...pendingAcks.values()]) finishAck(false);
      for (const ws of [...sockets]) ws.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
      await files.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
