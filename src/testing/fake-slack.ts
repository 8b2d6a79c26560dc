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
//
// Each concern lives beside this file, which keeps the wiring (options, shared state, the HTTP
// server and its routes, the FakeSlack object): messages (fake-slack-messages.ts), Socket Mode
// (fake-slack-socket.ts), what is sent to the app (fake-slack-outgoing.ts), OAuth, agent apps,
// modals and files.
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { parse as parseQuery } from "node:querystring";
import { createAssistantMethods, type FakeAssistantState } from "./fake-slack-assistant.js";
import { createFakeOAuth, type EventTeam, type FakeOAuth, type FakeOAuthOptions } from "./fake-slack-oauth.js";
import { createViewMethods, type FakeView, type ViewSubmissionInput } from "./fake-slack-views.js";
import { createFakeSlackFiles, type FakeSlackFiles } from "./fake-slack-files.js";
import { compareTs, createMessageMethods, createMessageStore, type FakeMessage } from "./fake-slack-messages.js";
import { createFakeSocketMode, type SocketSendResult } from "./fake-slack-socket.js";
import { createOutgoing, type BlockActionInput, type SigningOverrides } from "./fake-slack-outgoing.js";
import { broadcastsOf } from "./platform-mentions.js";

export type { FakeMessage } from "./fake-slack-messages.js";
export type { SocketSendResult } from "./fake-slack-socket.js";
export type { BlockActionInput, SigningOverrides } from "./fake-slack-outgoing.js";

export interface FakeSlackOptions {
  signingSecret?: string;
  botToken?: string; // xoxb-...; every Web API method except apps.connections.open requires it
  appToken?: string; // xapp-...; only apps.connections.open accepts it
  teamId?: string;
  botUserId?: string;
  botId?: string;
  appId?: string;
  /**
   * Methods that answer `{ok:false}`. An array uses error "missing_scope"; a record names the error;
   * "ratelimited" answers HTTP 429 with Retry-After, as Slack does.
   */
  refuse?: string[] | Record<string, string>;
  /** How long sendSocketEvent waits for the client's ack (Slack's own deadline is 3 s). */
  ackTimeoutMs?: number;
  /** Workspaces that can install the app through OAuth, each with its own bot token. */
  oauth?: FakeOAuthOptions;
  /** Block types this Slack refuses with invalid_blocks (as where an app or surface does not support them). */
  unsupportedBlocks?: string[];
  /** The workspace's user groups (S... ids) and their members, which usergroups.users.list answers. */
  userGroups?: Record<string, string[]>;
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

export interface SendEventOptions extends SigningOverrides {
  eventId?: string;
  retryNum?: number;
  retryReason?: string;
  team?: EventTeam;
  /** The envelope's authorization names this person (is_bot false) instead of the bot, as for app_context_changed. */
  authorizedUser?: string;
}
export interface WaitForCallOptions {
  timeoutMs?: number;
  since?: number /* only calls at index >= since */;
}

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
  waitForCall(
    method: string,
    predicate?: (call: RecordedCall) => boolean,
    options?: number | WaitForCallOptions,
  ): Promise<RecordedCall>;
  /** A channel's messages in ts order (user messages from sent events included, ephemerals not);
   * without threadTs every message, top level and replies; with it the thread's parent (if known) and replies. */
  messages(channel: string, threadTs?: string): FakeMessage[];
  refuse(method: string, error?: string): void; // start refusing a method mid-test
  /** Sets a user group's members (a new group, or a change to one), as an admin would in Slack. */
  setUserGroup(id: string, members: string[]): void;
  sendEvent(
    targetUrl: string,
    event: Record<string, unknown>,
    options?: SendEventOptions,
  ): Promise<{ status: number; body: string; eventId: string }>;
  sendBlockAction(
    targetUrl: string,
    action: BlockActionInput,
    options?: SigningOverrides,
  ): Promise<{ status: number; body: string }>;
  sendUrlVerification(
    targetUrl: string,
    options?: SigningOverrides,
  ): Promise<{ status: number; body: string; challenge: string }>;
  /** The modals views.open opened, oldest first. */
  views: FakeView[];
  /** Submits a modal as the person it was opened for (a signed view_submission). */
  sendViewSubmission(
    targetUrl: string,
    input: ViewSubmissionInput,
    options?: SigningOverrides,
  ): Promise<{ status: number; body: string }>;
  socketConnections(): number;
  waitForSocket(count?: number, timeoutMs?: number): Promise<void>;
  sendSocketEvent(
    event: Record<string, unknown>,
    options?: { eventId?: string; retryAttempt?: number; retryReason?: string; connection?: number; team?: EventTeam },
  ): Promise<SocketSendResult & { eventId: string }>;
  sendSocketBlockAction(action: BlockActionInput, options?: { connection?: number }): Promise<SocketSendResult>;
  /** Sends Slack's `disconnect` message (the client should reconnect through apps.connections.open). */
  disconnectSocket(connection?: number, reason?: string): void;
  /** Cuts a socket without a word (a lost network): the client finds out and connects again. */
  dropSocket(connection?: number): void;
  nextTs(): string;
  /** Stores a message a person wrote, with no event sent (for tests that drive a worker, which receives none); returns its ts. */
  addUserMessage(
    channel: string,
    message: { user: string; text: string; threadTs?: string; files?: Array<{ name: string }>; botName?: string },
  ): string;
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
  const needed = reading
    ? channel.startsWith("D")
      ? "im:history"
      : channel.startsWith("G")
        ? "groups:history"
        : "channels:history"
    : method.startsWith("usergroups.")
      ? "usergroups:read"
      : undefined;
  return { ...fail(error), ...(needed ? { needed } : {}), provided: "app_mentions:read,chat:write,im:history" };
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
      try {
        args[key] = JSON.parse(v);
      } catch {
        /* not JSON after all: keep the string */
      }
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
    Array.isArray(options.refuse)
      ? options.refuse.map((m) => [m, "missing_scope"])
      : Object.entries(options.refuse ?? {}),
  );

  const userGroups = new Map(Object.entries(options.userGroups ?? {}));
  const calls: RecordedCall[] = [];
  const waiters = new Set<{ check: (c: RecordedCall, i: number) => void; reject: (e: Error) => void }>();
  let origin = "";
  const oauth = options.oauth && createFakeOAuth(options.oauth, () => origin, appId);
  const assistant = createAssistantMethods();
  const modals = createViewMethods(teamId, appId);
  const files = await createFakeSlackFiles(
    () => origin,
    (token) => token === botToken || oauth?.workspaceOf(token) !== undefined,
    teamId,
  );
  const bot = { teamId, botUserId, botId, appId };
  const store = createMessageStore(bot);
  const { channels, nextTs, channelMessages } = store;
  const outgoing = createOutgoing({
    store,
    bot,
    signingSecret,
    origin: () => origin,
    issueTrigger: (userId) => modals.issueTrigger(userId),
  });
  const { eventCallback, blockActionPayload, signedPost } = outgoing;

  // ---- Web API ------------------------------------------------------------------------------
  const methods: Record<string, (a: Args, token?: string) => Reply> = {
    "auth.test": (_a, token) => {
      const installed = oauth?.workspaceOf(token); // a token from OAuth answers as its workspace
      const team = installed?.teamId ?? teamId;
      return {
        ok: true,
        url: `https://${team.toLowerCase()}.slack.com/`,
        team: installed?.teamName ?? "Fake Team",
        user: "glassbox",
        team_id: team,
        user_id: installed?.botUserId ?? botUserId,
        bot_id: installed?.botId ?? botId,
        is_enterprise_install: installed?.orgWide === true,
        ...(installed?.enterpriseId ? { enterprise_id: installed.enterpriseId } : {}),
      };
    },
    ...createMessageMethods(store, bot, options.unsupportedBlocks ?? []),
    ...assistant.methods,
    ...modals.methods,
    "users.info": (a) => {
      const id = str(a.user);
      if (!id) return fail("user_not_found");
      const name = id === botUserId ? "glassbox" : `user-${id.toLowerCase()}`;
      return {
        ok: true,
        user: {
          id,
          team_id: teamId,
          name,
          real_name: name,
          is_bot: id === botUserId,
          deleted: false,
          tz: "UTC",
          profile: { display_name: name, real_name: name },
        },
      };
    },
    // Slack answers the members' ids of a group (disabled ones only with include_disabled, which the fake keeps none of).
    "usergroups.users.list": (a) => {
      const members = userGroups.get(str(a.usergroup) ?? "");
      return members ? { ok: true, users: [...members] } : fail("no_such_subteam");
    },
    "apps.connections.open": () => socketMode.openConnection(),
  };

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
    record({
      method,
      args,
      token,
      at: Date.now(),
      get broadcasts() {
        return broadcastsOf(args);
      },
    }); // read by tests only: the benches' harness need not pay for it
    if (method === "oauth.v2.access" && oauth) return sendJson(res, oauth.access(args)); // the client id and secret are its credentials
    const handler = methods[method];
    if (!handler) return sendJson(res, fail("unknown_method"));
    const wanted = method === "apps.connections.open" ? appToken : botToken;
    if (!token) return sendJson(res, fail("not_authed"));
    const installedToken = method !== "apps.connections.open" && oauth?.workspaceOf(token) !== undefined;
    if (token !== wanted && !installedToken)
      return sendJson(res, fail(token === appToken || token === botToken ? "not_allowed_token_type" : "invalid_auth"));
    const refusal = refused.get(method);
    // Slack answers a rate-limited call with HTTP 429 and Retry-After (seconds), as the Web API documents.
    if (refusal === "ratelimited") {
      res.writeHead(429, { "Content-Type": "application/json", "Retry-After": "30" });
      return void res.end(JSON.stringify(fail("ratelimited")));
    }
    sendJson(res, refusal ? refusalOf(method, refusal, args) : handler(args, token));
  }

  // A response_url accepts JSON like Bolt's respond(); replace/delete act on the original message.
  async function handleResponseUrl(req: IncomingMessage, res: ServerResponse, id: string): Promise<void> {
    const raw = await readBody(req);
    let args: Args;
    try {
      const form = req.headers["content-type"]?.startsWith("application/x-www-form-urlencoded")
        ? parseQuery(raw).payload
        : raw;
      args = JSON.parse(String(form)) as Args;
    } catch {
      return sendJson(res, fail("invalid_payload"), 400);
    }
    record({
      method: "response_url",
      args,
      at: Date.now(),
      get broadcasts() {
        return broadcastsOf(args);
      },
    });
    if (!outgoing.applyResponse(id, args)) return sendJson(res, fail("expired_url"), 404);
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
    if (oauth && path === "/oauth/v2/authorize" && req.method === "GET")
      return oauth.handleAuthorize(new URLSearchParams(query), res);
    if (files.handle(req, res)) return;
    const work = api?.[1]
      ? handleApi(req, res, api[1], query)
      : response?.[1] && req.method === "POST"
        ? handleResponseUrl(req, res, response[1])
        : Promise.resolve(sendJson(res, fail("not_found"), 404));
    work.catch((error: unknown) => {
      if (!res.headersSent) sendJson(res, fail(`fake_slack_error: ${String(error)}`), 500);
    });
  });

  const socketMode = createFakeSocketMode(server, () => origin, appId, ackTimeoutMs);

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
          check: (c: RecordedCall, i: number) => {
            if (matches(c, i)) {
              done();
              resolve(c);
            }
          },
          reject: (e: Error) => {
            done();
            reject(e);
          },
        };
        const timer = setTimeout(
          () =>
            waiter.reject(
              new Error(
                `fake-slack: no matching ${method} call within ${timeoutMs} ms; ` +
                  `received: ${calls.map((c) => c.method).join(", ") || "nothing"}`,
              ),
            ),
          timeoutMs,
        );
        const done = () => {
          clearTimeout(timer);
          waiters.delete(waiter);
        };
        waiters.add(waiter);
      });
    },
    messages(channel, threadTs) {
      const list = (channels.get(channel) ?? []).filter(
        (m) => threadTs === undefined || m.ts === threadTs || m.thread_ts === threadTs,
      );
      return structuredClone([...list].sort((a, b) => compareTs(a.ts, b.ts)));
    },
    refuse: (method, error = "missing_scope") => void refused.set(method, error),
    setUserGroup: (id, members) => void userGroups.set(id, [...members]),
    async sendEvent(targetUrl, event, o = {}) {
      const eventId = o.eventId ?? `Ev${randomBytes(5).toString("hex").toUpperCase()}`;
      const retry: Record<string, string> =
        o.retryNum === undefined
          ? {}
          : { "X-Slack-Retry-Num": String(o.retryNum), "X-Slack-Retry-Reason": o.retryReason ?? "http_timeout" };
      const result = await signedPost(
        targetUrl,
        JSON.stringify(eventCallback(event, eventId, o.team, o.authorizedUser)),
        "application/json",
        o,
        retry,
      );
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
    socketConnections: () => socketMode.connections(),
    waitForSocket: (count = 1, timeoutMs = 5000) => socketMode.waitForSocket(count, timeoutMs),
    async sendSocketEvent(event, o = {}) {
      const eventId = o.eventId ?? `Ev${randomBytes(5).toString("hex").toUpperCase()}`;
      const result = await socketMode.sendEnvelope(
        "events_api",
        eventCallback(event, eventId, o.team),
        o.connection ?? 0,
        { retry_attempt: o.retryAttempt ?? 0, retry_reason: o.retryReason ?? "" },
      );
      return { ...result, eventId };
    },
    sendSocketBlockAction: (action, o = {}) =>
      socketMode.sendEnvelope("interactive", blockActionPayload(action), o.connection ?? 0),
    disconnectSocket: (connection = 0, reason = "refresh_requested") => socketMode.disconnect(connection, reason),
    dropSocket: (connection = 0) => socketMode.drop(connection),
    nextTs,
    addUserMessage(channel, { user, text, threadTs, files, botName }) {
      const ts = nextTs();
      channelMessages(channel).push({
        ts,
        text,
        user,
        ...(threadTs ? { thread_ts: threadTs } : {}),
        ...(files?.length
          ? { files: files.map((file, index) => ({ id: `F${ts.replace(".", "")}${index}`, ...file })) }
          : {}),
        // Another app's message: its bot_id and bot_profile, as Slack lists them.
        ...(botName ? { bot_id: `B${user}`, bot_profile: { name: botName } } : {}),
      });
      return ts;
    },
    async close() {
      for (const waiter of [...waiters]) waiter.reject(new Error("fake-slack: closed"));
      await socketMode.close();
      await files.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
