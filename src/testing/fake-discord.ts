// A fake Discord on 127.0.0.1 that speaks the real wire protocols, so tests can drive the REAL
// discord.js Client (REST through @discordjs/rest, gateway through @discordjs/ws) without a
// network, a bot token or a server:
//
//  - REST: <apiUrl>/v10/<route>, JSON (or multipart with `payload_json` when files are attached),
//    `Authorization: Bot <token>` except on interaction callbacks and interaction webhooks, which
//    discord.js calls with `auth: false`. Every answer carries generous rate-limit headers so
//    discord.js never queues or sleeps.
//  - Gateway: GET /gateway/bot hands out ws://.../gateway; the fake says HELLO (op 10), answers
//    heartbeats (op 1 → op 11), and on IDENTIFY (op 2) dispatches READY and then one GUILD_CREATE
//    per guild. Dispatches carry sequence numbers; a dropped client RESUMEs (op 6) and gets what it
//    missed replayed with the original numbers, then RESUMED.
//  - Interactions: button clicks and slash commands arrive as INTERACTION_CREATE; the callback route
//    and the interaction webhooks (follow-ups, @original) act on the fake's messages.
//
// The fake keeps every channel's messages (user messages it dispatched, bot posts, edits, deletes,
// interaction replies), so a test can read what a person would see via `messages(channelId)`, and
// each message the bot creates or edits, with its `allowed_mentions` as sent and whom Discord would
// ping for it, via `messageWrites`.
// Like Discord, it sends the bot its own messages back over the gateway (MESSAGE_CREATE/UPDATE),
// and it hides message content from a client without the Message Content intent, except in DMs
// and in messages that mention the bot.
//
// Point discord.js at it with `new Client({ intents, rest: { api: fake.apiUrl } })`: the apiUrl has
// no version, because @discordjs/rest appends `/v10` itself (`${api}/v${version}${route}`), and the
// gateway URL comes from GET /gateway/bot, so nothing else needs configuring.
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { parse as parseQuery } from "node:querystring";
import { WebSocketServer, type WebSocket } from "ws";
import { allowedMentionsProblem, mentionedIds, pingsOf, type Pings } from "./platform-mentions.js";
import { createFakeDiscordCdn, type FakeDiscordCdn, type FakeDiscordFileInput } from "./fake-discord-files.js";
import {
  API_VERSION, APP_FLAG_MESSAGE_CONTENT_LIMITED, Callback, ChannelType, Close, ComponentType,
  DISCORD_EPOCH, Intent, InteractionType, MEMBER_PERMISSIONS, MessageFlag, MessageType, Op,
  PRIVILEGED_INTENTS, RATE_LIMIT, arr, byId, error, formError, isThread, matchesPath, parseBody,
  readBody, str, unauthorized, unknownChannel, unknownMessage, unknownWebhook, type Answer,
  type ApiUser, type Channel, type Conn, type Dispatch, type Handler, type Interaction, type Json,
  type Route, type RouteContext, type Session, type StoredFile, type StoredMessage,
} from "./fake-discord-protocol.js";

export interface FakeDiscordChannelInput {
  id: string;
  name?: string;
  type?: number; // 0 text (default), 11 public thread, 12 private thread
  parent_id?: string; // a thread's channel
}
export interface FakeDiscordGuildInput { id: string; name?: string; channels: FakeDiscordChannelInput[] }

export interface FakeDiscordOptions {
  token?: string; // the valid bot token, default "fake-bot-token"
  botUserId?: string;
  applicationId?: string; // defaults to botUserId, as for apps made in the Developer Portal
  botUsername?: string;
  guilds?: FakeDiscordGuildInput[]; // default: one guild with one text channel (see DEFAULT_GUILD)
  dmChannels?: Array<{ id: string; recipientId: string }>;
  /** Close the gateway with 4014 (disallowed intents) when IDENTIFY asks for a privileged intent
   * (Message Content, Guild Members, Guild Presences): what Discord does when the app's toggle is off. */
  missingIntents?: boolean;
  heartbeatIntervalMs?: number; // what HELLO announces; Discord says about 41 s
}

export interface RecordedRequest {
  method: string;
  path: string; // e.g. "/channels/123/messages", without "/api/v10" and without the query
  query: Record<string, string>;
  body: unknown; // parsed JSON (for multipart: the payload_json part), undefined when empty
  files?: Array<{ name: string; size: number; contentType: string }>;
  status: number; // what the fake answered
  at: number;
}

export interface FakeDiscordMessage {
  id: string;
  channelId: string;
  guildId?: string;
  content: string;
  components: unknown[];
  embeds: unknown[];
  attachments: unknown[];
  author: { id: string; username: string; bot?: boolean };
  type: number;
  flags: number;
  editedTimestamp: string | null;
  referencedMessageId?: string; // a reply's target
  interactionId?: string; // set on an interaction's reply, deferred reply or follow-up
}


/**
 * A message the bot created or edited (channel messages, interaction replies and follow-ups, their
 * edits): `allowedMentions` exactly as the body carried it (undefined when it carried none), and
 * whom Discord would notify. The fake is stricter than Discord: it counts mentions inside code
 * too, and leaves out the permission check (a bot given Mention Everyone would ping).
 */
export type { Pings };

export interface MessageWrite {
  kind: "create" | "edit";
  channelId: string;
  messageId: string;
  content: string; // the message's content after the write
  allowedMentions: unknown;
  pings: Pings;
}

export interface GatewayPayloadRecord { op: number; d: unknown; at: number }
export interface WaitOptions { timeoutMs?: number; since?: number /* only entries at index >= since */ }
export interface RefuseOptions { status?: number; code?: number; message?: string; times?: number }

export interface FakeDiscord {
  apiUrl: string; // http://127.0.0.1:PORT/api — pass as `rest: { api }`; discord.js adds "/v10"
  gatewayUrl: string; // what GET /gateway/bot answers (discord.js adds "?v=10&encoding=json")
  token: string;
  botUserId: string;
  applicationId: string;
  requests: RecordedRequest[]; // every REST request, in arrival order
  messageWrites: MessageWrite[]; // every message the bot created or edited, in order
  requestsTo(method: string, pathPattern: RegExp | string): RecordedRequest[];
  /** Resolves with the first matching request, looking at already-recorded ones first (from `since`). */
  waitForRequest(method: string, pathPattern: RegExp | string, predicate?: (r: RecordedRequest) => boolean, options?: WaitOptions): Promise<RecordedRequest>;
  /** A channel's messages in creation order, as a person sees them (ephemeral replies left out). */
  messages(channelId: string): FakeDiscordMessage[];
  /** Resolves with the latest IDENTIFY's intents, or the next IDENTIFY's if none came yet. */
  identified(options?: { timeoutMs?: number }): Promise<{ intents: number }>;
  connections(): number; // open gateway sockets
  gatewayPayloads: GatewayPayloadRecord[]; // everything clients sent on the gateway (heartbeats included)
  waitForGatewayPayload(op: number, options?: WaitOptions): Promise<GatewayPayloadRecord>;
  gatewayUrls: string[]; // the URL (path and query) of every gateway connection, in order
  // events from "users" — each goes to every session that is identified, and is kept for replay
  // while the session's socket is down; with no session at all it is only stored:
  sendMessage(input: { channelId: string; guildId?: string; authorId: string; content: string; bot?: boolean; mentionsBot?: boolean; type?: number; attachments?: FakeDiscordFileInput[] }): Promise<{ id: string; content: string }>;
  cdn: FakeDiscordCdn; // serves the attachments of sent messages (fake-discord-files.ts)
  clickButton(input: { channelId: string; guildId?: string; userId: string; messageId: string; customId: string }): Promise<{ interactionId: string; token: string }>;
  runCommand(input: { channelId: string; guildId?: string; userId: string; name: string; options?: unknown[] }): Promise<{ interactionId: string; token: string }>;
  interactionResponses(interactionId: string): RecordedRequest[]; // callback + webhook calls, in order
  /** The modal an interaction was answered with (callback type 9), as Discord would show it; undefined if none. */
  modalOf(interactionId: string): { customId: string; title: string; components: unknown[] } | undefined;
  /** Submits that modal as the person who opened it, with what they typed by text input custom_id (a MODAL_SUBMIT interaction). */
  submitModal(input: { interactionId: string; values: Record<string, string> }): Promise<{ interactionId: string; token: string }>;
  /** Closes every gateway socket with 4000, so discord.js RESUMEs; `resumable: false` also ends the
   * sessions, so the RESUME gets op 9 (invalid session) and the client identifies again. */
  dropConnection(options?: { resumable?: boolean; code?: number }): void;
  /** Dispatches a stored message's MESSAGE_CREATE again (same message id, next sequence number). */
  redeliver(messageId: string): Promise<void>;
  commands(scope: "global" | string /* guild id */): unknown[]; // registered application commands
  /** Makes matching REST requests fail (default 500 / code 0) `times` times (default: until close). */
  refuse(method: string, pathPattern: RegExp | string, options?: RefuseOptions): void;
  nextId(): string; // a fresh snowflake
  close(): Promise<void>;
}

export const DEFAULT_TOKEN = "fake-bot-token";
export const DEFAULT_BOT_USER_ID = "1100000000000000001";
export const DEFAULT_GUILD: FakeDiscordGuildInput = {
  id: "1100000000000000100", name: "Fake Guild", channels: [{ id: "1100000000000000101", name: "general", type: 0 }],
};

export async function startFakeDiscord(options: FakeDiscordOptions = {}): Promise<FakeDiscord> {
  const token = options.token ?? DEFAULT_TOKEN;
  const botUserId = options.botUserId ?? DEFAULT_BOT_USER_ID;
  const applicationId = options.applicationId ?? botUserId;
  const heartbeatInterval = options.heartbeatIntervalMs ?? 41_250;
  const appFlags = options.missingIntents ? 0 : APP_FLAG_MESSAGE_CONTENT_LIMITED;

  const requests: RecordedRequest[] = [];
  const messageWrites: MessageWrite[] = [];
  const gatewayPayloads: GatewayPayloadRecord[] = [];
  const gatewayUrls: string[] = [];
  const requestWaiters = new Set<{ check: () => void; reject: (e: Error) => void }>();
  const gatewayWaiters = new Set<{ check: () => void; reject: (e: Error) => void }>();
  const users = new Map<string, ApiUser>();
  const guilds = new Map<string, { id: string; name: string; joinedAt: string }>();
  const channels = new Map<string, Channel>();
  const messagesById = new Map<string, StoredMessage>();
  const interactions = new Map<string, Interaction>(); // by id
  const interactionsByToken = new Map<string, Interaction>();
  const commandScopes = new Map<string, Json[]>(); // "global" or a guild id
  const sessions = new Map<string, Session>();
  const conns = new Set<Conn>();
  const timers = new Set<NodeJS.Timeout>();
  const refusals: Array<{ method: string; pattern: RegExp | string; status: number; code: number; message: string; times: number }> = [];
  const identifies: Array<{ intents: number }> = [];
  let lastId = 0n;
  let origin = "";
  let closed = false;

  /** Snowflakes: milliseconds since 2015 in the top bits, then worker, process and an increment;
   * strictly increasing, so creation order is id order, as in Discord. */
  function nextId(): string {
    const fromTime = (BigInt(Date.now()) - DISCORD_EPOCH) << 22n;
    lastId = fromTime > lastId ? fromTime | (1n << 17n) : lastId + 1n;
    return lastId.toString();
  }
  /** Gateway events caused by a REST call go out after its HTTP answer, as they would from Discord. */
  const later = (fn: () => void) => {
    const timer = setTimeout(() => { timers.delete(timer); if (!closed) fn(); });
    timers.add(timer);
  };

  // ---- State: users, guilds, channels ---------------------------------------------------------
  function user(id: string): ApiUser {
    let found = users.get(id);
    if (!found) users.set(id, (found = { id, username: `user_${id.slice(-6)}`, global_name: null, discriminator: "0", avatar: null }));
    return found;
  }
  users.set(botUserId, { id: botUserId, username: options.botUsername ?? "glassbox", global_name: null, discriminator: "0", avatar: null, bot: true });

  for (const g of options.guilds ?? [DEFAULT_GUILD]) {
    guilds.set(g.id, { id: g.id, name: g.name ?? `guild-${g.id}`, joinedAt: new Date().toISOString() });
    for (const c of g.channels) {
      channels.set(c.id, { id: c.id, type: c.type ?? ChannelType.GuildText, name: c.name ?? `channel-${c.id}`, guildId: g.id,
        ...(c.parent_id ? { parentId: c.parent_id } : {}), ...(isThread(c.type ?? 0) ? { ownerId: botUserId } : {}), lastMessageId: null });
    }
  }
  for (const dm of options.dmChannels ?? []) {
    channels.set(dm.id, { id: dm.id, type: ChannelType.DM, recipientId: dm.recipientId, lastMessageId: null });
  }

  const memberJson = (userId: string, guildId: string, withUser: boolean) => ({
    ...(withUser ? { user: user(userId) } : {}), roles: [], nick: null, avatar: null, banner: null, premium_since: null, pending: false,
    joined_at: guilds.get(guildId)?.joinedAt ?? new Date().toISOString(), deaf: false, mute: false, flags: 0, communication_disabled_until: null,
  });

  /** A channel as GET /channels/{id} answers (GUILD_CREATE lists them without guild_id). */
  function channelJson(c: Channel, withGuildId = true): Json {
    if (c.type === ChannelType.DM) return { id: c.id, type: c.type, recipients: [user(c.recipientId ?? "")], last_message_id: c.lastMessageId, flags: 0 };
    const base: Json = { id: c.id, type: c.type, name: c.name, ...(withGuildId ? { guild_id: c.guildId } : {}), parent_id: c.parentId ?? null,
      last_message_id: c.lastMessageId, rate_limit_per_user: 0, flags: 0 };
    if (isThread(c.type)) {
      const count = [...messagesById.values()].filter((m) => m.channelId === c.id).length;
      return { ...base, owner_id: c.ownerId ?? botUserId, message_count: count, total_message_sent: count, member_count: 1,
        thread_metadata: { archived: false, locked: false, auto_archive_duration: 1440, archive_timestamp: new Date().toISOString() } };
    }
    return { ...base, position: 0, permission_overwrites: [], nsfw: false, topic: null };
  }

  function guildCreateJson(guildId: string): Json {
    const g = guilds.get(guildId);
    const all = [...channels.values()].filter((c) => c.guildId === guildId);
    return {
      id: guildId, name: g?.name, icon: null, splash: null, discovery_splash: null, owner_id: "1100000000000000999", afk_channel_id: null,
      afk_timeout: 300, verification_level: 0, default_message_notifications: 0, explicit_content_filter: 0, mfa_level: 0, nsfw_level: 0,
      features: [], system_channel_id: null, system_channel_flags: 0, rules_channel_id: null, vanity_url_code: null, description: null,
      banner: null, premium_tier: 0, premium_subscription_count: 0, preferred_locale: "en-US", public_updates_channel_id: null,
      max_members: 500_000, max_video_channel_users: 25, application_id: null, premium_progress_bar_enabled: false,
      roles: [{ id: guildId, name: "@everyone", color: 0, hoist: false, icon: null, unicode_emoji: null, position: 0,
        permissions: MEMBER_PERMISSIONS, managed: false, mentionable: false, flags: 0 }],
      emojis: [], stickers: [],
      // GUILD_CREATE's own fields:
      joined_at: g?.joinedAt, large: false, unavailable: false, member_count: 2,
      members: [memberJson(botUserId, guildId, true)], voice_states: [], presences: [], stage_instances: [], guild_scheduled_events: [],
      soundboard_sounds: [],
      channels: all.filter((c) => !isThread(c.type)).map((c) => channelJson(c, false)),
      threads: all.filter((c) => isThread(c.type)).map((c) => channelJson(c)),
    };
  }

  // ---- State: messages ------------------------------------------------------------------------
  /** A message as REST answers it; the gateway adds guild_id, member and channel_type (see gatewayMessage). */
  function messageJson(m: StoredMessage, depth = 0): Json {
    const referenced = m.reference ? messagesById.get(m.reference.message_id) : undefined;
    return {
      id: m.id, channel_id: m.channelId, type: m.type, content: m.content, author: user(m.authorId), timestamp: m.timestamp,
      edited_timestamp: m.editedTimestamp, tts: false, mention_everyone: false, mentions: m.mentionIds.map(user), mention_roles: [],
      attachments: m.attachments, embeds: m.embeds, components: m.components, pinned: false, flags: m.flags,
      ...(m.webhookId ? { webhook_id: m.webhookId, application_id: applicationId } : {}),
      ...(m.reference ? { message_reference: { type: 0, ...m.reference },
        referenced_message: referenced && depth === 0 ? messageJson(referenced, 1) : null } : {}),
      ...(m.interaction ? { interaction_metadata: { id: m.interaction.id, type: m.interaction.type, user: user(m.interaction.userId),
        authorizing_integration_owners: {}, ...(m.interaction.name ? { name: m.interaction.name } : {}) } } : {}),
    };
  }

  function storeMessage(fields: Partial<StoredMessage> & { channelId: string; authorId: string }): StoredMessage {
    const channel = channels.get(fields.channelId);
    const m: StoredMessage = {
      id: nextId(), content: "", components: [], embeds: [], attachments: [], type: MessageType.Default, flags: 0, ephemeral: false,
      timestamp: new Date().toISOString(), editedTimestamp: null, mentionIds: mentionedIds(fields.content ?? ""),
      ...(channel?.guildId ? { guildId: channel.guildId } : {}), ...fields,
    };
    messagesById.set(m.id, m);
    if (channel && !m.ephemeral) channel.lastMessageId = m.id;
    return m;
  }

  /** Applies the message fields of a create/edit body (content, embeds, components, flags, attachments), and records the write. */
  function applyBody(m: StoredMessage, body: Json, files: StoredFile[], kind: MessageWrite["kind"]): void {
    if (typeof body.content === "string") { m.content = body.content; m.mentionIds = mentionedIds(body.content); }
    const repliedTo = m.reference && kind === "create" ? messagesById.get(m.reference.message_id)?.authorId : undefined;
    messageWrites.push({ kind, channelId: m.channelId, messageId: m.id, content: m.content, allowedMentions: structuredClone(body.allowed_mentions),
      pings: pingsOf(m.content, body.allowed_mentions, repliedTo) });
    if (body.embeds !== undefined) m.embeds = arr(body.embeds) ?? [];
    if (body.components !== undefined) m.components = arr(body.components) ?? [];
    if (files.length || body.attachments !== undefined) {
      m.attachments = files.map((f, i) => ({ id: nextId(), filename: f.name, size: f.size, content_type: f.contentType,
        url: `${origin}/attachments/${m.channelId}/${i}/${encodeURIComponent(f.name)}`, proxy_url: `${origin}/attachments/${m.channelId}/${i}` }));
    }
  }

  /** Discord refuses a message with nothing in it, content over 2,000 characters, and allowed_mentions it cannot read. */
  function checkMessageBody(body: Json, files: StoredFile[], creating: boolean): Answer | undefined {
    const mentionsRefused = allowedMentionsProblem(body.allowed_mentions);
    if (mentionsRefused) return formError(mentionsRefused.field, mentionsRefused.code, mentionsRefused.message);
    const content = str(body.content) ?? "";
    if (content.length > 2000) return formError("content", "BASE_TYPE_MAX_LENGTH", "Must be 2000 or fewer in length.");
    const empty = !content && !(arr(body.embeds)?.length) && !(arr(body.components)?.length) && !files.length && !body.sticker_ids && !body.poll;
    if (creating && empty) return error(400, 50006, "Cannot send an empty message");
    return undefined;
  }

  // ---- Gateway --------------------------------------------------------------------------------
  const send = (conn: Conn, payload: unknown) => { if (conn.ws.readyState === conn.ws.OPEN) conn.ws.send(JSON.stringify(payload)); };

  function dispatch(session: Session, t: string, d: unknown): void {
    const payload: Dispatch = { op: Op.Dispatch, t, s: ++session.seq, d };
    session.events.push(payload); // kept for a RESUME, which replays from the client's last seq
    if (session.conn) send(session.conn, payload);
  }

  /** Every live session (identified, not ended; its socket may be down) that holds one of `intents`. */
  const liveSessions = (intents = 0) => [...sessions.values()].filter((s) => !s.ended && (intents === 0 || (s.intents & intents) !== 0));

  /** MESSAGE_CREATE/UPDATE data for one session: a client without Message Content sees empty content,
   * embeds, attachments and components, except in DMs, when the bot is mentioned, or in its own messages. */
  function gatewayMessage(m: StoredMessage, session: Session): Json {
    const channel = channels.get(m.channelId);
    const data: Json = { ...messageJson(m), ...(m.guildId ? { guild_id: m.guildId } : {}), channel_type: channel?.type ?? ChannelType.GuildText,
      ...(m.guildId && !m.webhookId ? { member: memberJson(m.authorId, m.guildId, false) } : {}) };
    const readable = (session.intents & Intent.MessageContent) !== 0 || !m.guildId || m.authorId === botUserId || m.mentionIds.includes(botUserId);
    return readable ? data : { ...data, content: "", embeds: [], attachments: [], components: [] };
  }

  function broadcastMessage(t: "MESSAGE_CREATE" | "MESSAGE_UPDATE", m: StoredMessage): void {
    if (m.ephemeral) return; // only the clicking user sees it; the gateway never sends it
    for (const session of liveSessions(m.guildId ? Intent.GuildMessages : Intent.DirectMessages)) dispatch(session, t, gatewayMessage(m, session));
  }

  function identify(conn: Conn, d: Json): void {
    if (conn.session) return conn.ws.close(Close.AlreadyAuthenticated, "Already authenticated.");
    if (d.token !== token) return conn.ws.close(Close.AuthenticationFailed, "Authentication failed.");
    const intents = typeof d.intents === "number" ? d.intents : 0;
    identifies.push({ intents });
    for (const waiter of [...gatewayWaiters]) waiter.check();
    if (options.missingIntents && (intents & PRIVILEGED_INTENTS) !== 0) return conn.ws.close(Close.DisallowedIntents, "Disallowed intent(s).");
    const session: Session = { id: randomBytes(16).toString("hex"), intents, seq: 0, events: [], conn, ended: false };
    sessions.set(session.id, session);
    conn.session = session;
    const shard = Array.isArray(d.shard) ? d.shard : [0, 1];
    dispatch(session, "READY", {
      v: Number(API_VERSION), user: { ...user(botUserId), verified: true, mfa_enabled: false, flags: 0, email: null },
      guilds: [...guilds.keys()].map((id) => ({ id, unavailable: true })), session_id: session.id, session_type: "normal",
      resume_gateway_url: `${origin.replace("http", "ws")}/resume-gateway`, shard, application: { id: applicationId, flags: appFlags },
      private_channels: [], relationships: [], presences: [], geo_ordered_rtc_regions: ["fake"], guild_join_requests: [], user_settings: {},
    });
    // discord.js holds back 'clientReady' until every guild in READY has had its GUILD_CREATE (or
    // waitGuildTimeout, 15 s, passes), so they follow at once. Without the Guilds intent Discord
    // sends none, and discord.js does not wait for them. Note that discord.js's login() resolves on
    // READY, so 'clientReady' comes before or after it: listen for it before calling login().
    if (intents & Intent.Guilds) for (const id of guilds.keys()) dispatch(session, "GUILD_CREATE", guildCreateJson(id));
  }

  function resume(conn: Conn, d: Json): void {
    if (d.token !== token) return conn.ws.close(Close.AuthenticationFailed, "Authentication failed.");
    const session = sessions.get(str(d.session_id) ?? "");
    const seq = typeof d.seq === "number" ? d.seq : 0;
    // An unknown or ended session cannot resume: op 9 with d=false tells the client to identify anew.
    if (!session || session.ended) return send(conn, { op: Op.InvalidSession, d: false, s: null, t: null });
    if (seq > session.seq) return conn.ws.close(Close.InvalidSeq, "Invalid seq.");
    if (session.conn && session.conn !== conn) session.conn.ws.close(Close.Dropped, "Session resumed elsewhere.");
    session.conn = conn;
    conn.session = session;
    for (const event of session.events) if (event.s > seq) send(conn, event); // with their original numbers
    dispatch(session, "RESUMED", {});
  }

  function onGatewayMessage(conn: Conn, data: string): void {
    let payload: { op?: unknown; d?: unknown };
    try { payload = JSON.parse(data) as typeof payload; } catch { return conn.ws.close(Close.DecodeError, "Error while decoding payload."); }
    const op = typeof payload.op === "number" ? payload.op : -1;
    gatewayPayloads.push({ op, d: payload.d, at: Date.now() });
    for (const waiter of [...gatewayWaiters]) waiter.check();
    const d = (payload.d ?? {}) as Json;
    switch (op) {
      case Op.Heartbeat: return send(conn, { op: Op.HeartbeatAck, d: null, s: null, t: null });
      case Op.Identify: return identify(conn, d);
      case Op.Resume: return resume(conn, d);
      case Op.PresenceUpdate: case Op.VoiceStateUpdate: case Op.RequestGuildMembers:
        if (!conn.session) conn.ws.close(Close.NotAuthenticated, "Not authenticated.");
        return; // accepted and ignored
      default: return conn.ws.close(conn.session ? Close.UnknownOpcode : Close.NotAuthenticated, "Unknown opcode.");
    }
  }

  // ---- Interactions ---------------------------------------------------------------------------
  function newInteraction(fields: Omit<Interaction, "id" | "token" | "followUps">): Interaction {
    // Interaction tokens are long opaque strings; base64url keeps them safe in a URL path.
    const interaction: Interaction = { ...fields, id: nextId(), token: `aW50ZXJhY3Rpb24${randomBytes(48).toString("base64url")}`, followUps: new Set() };
    interactions.set(interaction.id, interaction);
    interactionsByToken.set(interaction.token, interaction);
    return interaction;
  }

  function interactionJson(i: Interaction, data: Json, message?: StoredMessage): Json {
    const channel = channels.get(i.channelId);
    return {
      id: i.id, application_id: applicationId, type: i.type, data, token: i.token, version: 1,
      channel: channel ? { ...channelJson(channel), ...(i.guildId ? { permissions: MEMBER_PERMISSIONS } : {}) } : { id: i.channelId, type: ChannelType.GuildText },
      channel_id: i.channelId, // deprecated by Discord but still sent
      ...(i.guildId
        ? { guild_id: i.guildId, guild: { id: i.guildId, locale: "en-US", features: [] }, guild_locale: "en-US",
            member: { ...memberJson(i.userId, i.guildId, true), permissions: MEMBER_PERMISSIONS } }
        : { user: user(i.userId) }),
      ...(message ? { message: messageJson(message) } : {}),
      app_permissions: MEMBER_PERMISSIONS, locale: "en-US", entitlements: [], attachment_size_limit: 10 * 1024 * 1024,
      authorizing_integration_owners: i.guildId ? { "0": i.guildId } : { "1": i.userId },
      context: i.guildId ? 0 : 1, // 0 guild, 1 the bot's DM
    };
  }

  /** Resolves the guild of an event's channel and checks the test's guildId agrees with it. */
  function channelFor(channelId: string, guildId: string | undefined, what: string): Channel {
    const channel = channels.get(channelId);
    if (!channel) throw new Error(`fake-discord: ${what} in unknown channel ${channelId}; list it in options.guilds or options.dmChannels`);
    if (guildId !== undefined && channel.guildId !== guildId) throw new Error(`fake-discord: channel ${channelId} is not in guild ${guildId}`);
    return channel;
  }

  /** POST /interactions/{id}/{token}/callback: the one initial response Discord accepts. */
  function interactionCallback({ params, query, body, files }: RouteContext): Answer {
    const [id = "", interactionToken = ""] = params;
    const i = interactions.get(id);
    if (!i || i.token !== interactionToken) return error(404, 10062, "Unknown interaction");
    if (i.callbackType !== undefined) return error(400, 40060, "Interaction has already been acknowledged.");
    const type = typeof body.type === "number" ? body.type : -1;
    const data = (body.data ?? {}) as Json;
    const flags = typeof data.flags === "number" ? data.flags : 0;
    const isComponent = i.type === InteractionType.MessageComponent;
    let message: StoredMessage | undefined;
    if (type === Callback.ChannelMessage || type === Callback.DeferredChannelMessage) {
      if (type === Callback.ChannelMessage) { const refused = checkMessageBody(data, files, true); if (refused) return refused; }
      message = storeMessage({ channelId: i.channelId, authorId: botUserId, webhookId: applicationId,
        type: i.type === InteractionType.ApplicationCommand ? MessageType.ChatInputCommand : MessageType.Default,
        flags: (flags & MessageFlag.Ephemeral) | (type === Callback.DeferredChannelMessage ? MessageFlag.Loading : 0),
        ephemeral: (flags & MessageFlag.Ephemeral) !== 0, interaction: { id: i.id, type: i.type, userId: i.userId, ...(i.name ? { name: i.name } : {}) } });
      if (type === Callback.ChannelMessage) applyBody(message, data, files, "create");
      i.originalId = message.id;
      const created = message;
      later(() => broadcastMessage("MESSAGE_CREATE", created));
    } else if (type === Callback.DeferredUpdate || type === Callback.UpdateMessage) {
      if (!isComponent) return error(400, 40043, "Interaction type not supported for this callback");
      i.originalId = i.componentMessageId; // for a component, @original is the message it sits on
      message = messagesById.get(i.componentMessageId ?? "");
      if (type === Callback.UpdateMessage && message) {
        const refused = checkMessageBody(data, files, false);
        if (refused) return refused;
        applyBody(message, data, files, "edit");
        message.editedTimestamp = new Date().toISOString();
        const edited = message;
        later(() => broadcastMessage("MESSAGE_UPDATE", edited));
      }
    } else if (type === Callback.Modal) {
      // Discord's limits: a custom_id of up to 100 characters, a title of up to 45, 1 to 5 top-level
      // components; and a modal cannot answer a modal.
      if (i.type === InteractionType.ModalSubmit) return error(400, 40043, "Interaction type not supported for this callback");
      const components = arr(data.components) ?? [];
      if (typeof data.custom_id !== "string" || data.custom_id.length > 100) return formError("data.custom_id", "BASE_TYPE_REQUIRED", "This field is required");
      if (typeof data.title !== "string" || data.title.length > 45) return formError("data.title", "BASE_TYPE_MAX_LENGTH", "Must be 45 or fewer in length.");
      if (components.length < 1 || components.length > 5) return formError("data.components", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 5 in length.");
      i.modal = { customId: data.custom_id, title: data.title, components };
    } else if (type !== Callback.Autocomplete) {
      return formError("type", "BASE_TYPE_CHOICES", `Value must be one of {4, 5, 6, 7, 8, 9}.`);
    }
    i.callbackType = type;
    if (query.with_response !== "true") return { status: 204 };
    return { status: 200, body: {
      interaction: { id: i.id, type: i.type, ...(message ? { response_message_id: message.id, response_message_loading: (message.flags & MessageFlag.Loading) !== 0,
        response_message_ephemeral: message.ephemeral } : {}) },
      resource: { type, ...(message ? { message: messageJson(message) } : {}) },
    } };
  }

  /** The webhook of an interaction (application id + token), usable once the interaction is acknowledged. */
  function webhookInteraction(params: string[]): Interaction | undefined {
    const [appId = "", webhookToken = ""] = params;
    const i = interactionsByToken.get(webhookToken);
    return appId === applicationId && i && i.callbackType !== undefined ? i : undefined;
  }
  function webhookMessage(i: Interaction, messageId: string): StoredMessage | undefined {
    const id = messageId === "@original" ? i.originalId : messageId;
    return id && (id === i.originalId || i.followUps.has(id)) ? messagesById.get(id) : undefined;
  }

  // ---- REST routes ----------------------------------------------------------------------------
  const ID = "(\\d+)";
  const route = (method: string, path: string, handler: Handler, auth = true): Route =>
    ({ method, pattern: new RegExp(`^${path.replaceAll(":id", ID).replaceAll(":token", "([^/]+)")}$`), auth, bucket: `${method} ${path}`, handler });
  const ok = (body: unknown): Answer => ({ status: 200, body });
  const noContent = (): Answer => ({ status: 204 });
  const botUser = () => ({ ...user(botUserId), verified: true, mfa_enabled: false, flags: 0, email: null, locale: "en-US" });
  const applicationJson = () => ({
    id: applicationId, name: users.get(botUserId)?.username, icon: null, description: "", summary: "", type: null, bot_public: true,
    bot_require_code_grant: false, verify_key: "0".repeat(64), flags: appFlags, team: null, hook: true, bot: user(botUserId),
    owner: user("1100000000000000999"), approximate_guild_count: guilds.size, redirect_uris: [], interactions_endpoint_url: null,
    integration_types_config: { "0": {} }, install_params: { scopes: ["bot", "applications.commands"], permissions: "0" },
  });

  function channelMessage(params: string[]): { channel?: Channel; message?: StoredMessage } {
    const channel = channels.get(params[0] ?? "");
    const message = messagesById.get(params[1] ?? "");
    return { channel, message: message && message.channelId === channel?.id && !message.ephemeral ? message : undefined };
  }

  function registerCommands(scope: string, list: unknown[], replace: boolean): Json[] {
    const existing = commandScopes.get(scope) ?? [];
    const made = list.map((raw) => {
      const input = raw as Json;
      const previous = existing.find((c) => c.name === input.name && (c.type ?? 1) === (input.type ?? 1));
      return { type: 1, description: "", options: [], default_member_permissions: null, nsfw: false, contexts: null, integration_types: [0],
        name_localizations: null, description_localizations: null, ...input, id: previous?.id ?? nextId(), application_id: applicationId,
        version: nextId(), ...(scope === "global" ? {} : { guild_id: scope }) } as Json;
    });
    commandScopes.set(scope, replace ? made : [...existing.filter((c) => !made.some((m) => m.name === c.name)), ...made]);
    return made;
  }
  const scopeOf = (params: string[]) => (params.length > 1 ? params[1] ?? "" : "global");
  const checkApp = (params: string[]) => (params[0] === applicationId ? undefined : error(403, 50001, "Missing Access"));

  const routes: Route[] = [
    route("GET", "/gateway", () => ok({ url: gatewayUrl() }), false),
    route("GET", "/gateway/bot", () => ok({ url: gatewayUrl(), shards: 1,
      session_start_limit: { total: 1000, remaining: 999, reset_after: 86_400_000, max_concurrency: 1 } })),
    route("GET", "/users/@me", () => ok(botUser())),
    route("GET", "/users/:id", ({ params }) => ok(user(params[0] ?? ""))),
    route("POST", "/users/@me/channels", ({ body }) => {
      const recipientId = str(body.recipient_id);
      if (!recipientId) return formError("recipient_id", "BASE_TYPE_REQUIRED", "This field is required");
      let dm = [...channels.values()].find((c) => c.type === ChannelType.DM && c.recipientId === recipientId);
      if (!dm) channels.set((dm = { id: nextId(), type: ChannelType.DM, recipientId, lastMessageId: null }).id, dm);
      return ok(channelJson(dm));
    }),
    route("GET", "/applications/@me", () => ok(applicationJson())),
    route("GET", "/oauth2/applications/@me", () => ok(applicationJson())),
    route("GET", "/channels/:id", ({ params }) => {
      const channel = channels.get(params[0] ?? "");
      return channel ? ok(channelJson(channel)) : unknownChannel();
    }),
    route("POST", "/channels/:id/typing", ({ params }) => (channels.has(params[0] ?? "") ? noContent() : unknownChannel())),
    route("GET", "/channels/:id/messages", ({ params, query }) => {
      if (!channels.has(params[0] ?? "")) return unknownChannel();
      const limit = Math.min(Number(query.limit ?? 50) || 50, 100);
      let list = [...messagesById.values()].filter((m) => m.channelId === params[0] && !m.ephemeral).sort(byId).reverse(); // newest first
      if (query.before) list = list.filter((m) => BigInt(m.id) < BigInt(query.before ?? "0"));
      if (query.after) list = list.filter((m) => BigInt(m.id) > BigInt(query.after ?? "0")).reverse().slice(0, limit).reverse();
      return ok(list.slice(0, limit).map((m) => messageJson(m)));
    }),
    route("POST", "/channels/:id/messages", ({ params, body, files }) => {
      const channel = channels.get(params[0] ?? "");
      if (!channel) return unknownChannel();
      const refused = checkMessageBody(body, files, true);
      if (refused) return refused;
      const ref = body.message_reference as { message_id?: string; fail_if_not_exists?: boolean } | undefined;
      const target = ref?.message_id ? messagesById.get(ref.message_id) : undefined;
      if (ref?.message_id && !target && ref.fail_if_not_exists !== false) {
        return formError("message_reference", "MESSAGE_REFERENCE_UNKNOWN_MESSAGE", "Unknown message");
      }
      const m = storeMessage({ channelId: channel.id, authorId: botUserId, flags: typeof body.flags === "number" ? body.flags : 0,
        ...(target ? { type: MessageType.Reply, reference: { message_id: target.id, channel_id: target.channelId,
          ...(target.guildId ? { guild_id: target.guildId } : {}) } } : {}) });
      applyBody(m, body, files, "create");
      later(() => broadcastMessage("MESSAGE_CREATE", m));
      return ok(messageJson(m));
    }),
    route("GET", "/channels/:id/messages/:id", ({ params }) => {
      const { channel, message } = channelMessage(params);
      return !channel ? unknownChannel() : message ? ok(messageJson(message)) : unknownMessage();
    }),
    route("PATCH", "/channels/:id/messages/:id", ({ params, body, files }) => {
      const { channel, message } = channelMessage(params);
      if (!channel) return unknownChannel();
      if (!message) return unknownMessage();
      if (message.authorId !== botUserId) return error(403, 50005, "Cannot edit a message authored by another user");
      const refused = checkMessageBody(body, files, false);
      if (refused) return refused;
      applyBody(message, body, files, "edit");
      message.editedTimestamp = new Date().toISOString();
      later(() => broadcastMessage("MESSAGE_UPDATE", message));
      return ok(messageJson(message));
    }),
    route("DELETE", "/channels/:id/messages/:id", ({ params }) => {
      const { channel, message } = channelMessage(params);
      if (!channel) return unknownChannel();
      if (!message) return unknownMessage();
      messagesById.delete(message.id);
      later(() => {
        for (const s of liveSessions(message.guildId ? Intent.GuildMessages : Intent.DirectMessages)) {
          dispatch(s, "MESSAGE_DELETE", { id: message.id, channel_id: message.channelId, ...(message.guildId ? { guild_id: message.guildId } : {}) });
        }
      });
      return noContent();
    }),
    route("PUT", "/channels/:id/messages/:id/reactions/:token/@me", ({ params }) => (channelMessage(params).message ? noContent() : unknownMessage())),
    route("DELETE", "/channels/:id/messages/:id/reactions/:token/@me", ({ params }) => (channelMessage(params).message ? noContent() : unknownMessage())),
    // Threads: one started from a message takes the message's id, as in Discord.
    route("POST", "/channels/:id/messages/:id/threads", ({ params, body }) => {
      const { channel, message } = channelMessage(params);
      if (!channel) return unknownChannel();
      if (!message) return unknownMessage();
      return startThread(channel, message.id, body, ChannelType.PublicThread);
    }),
    route("POST", "/channels/:id/threads", ({ params, body }) => {
      const channel = channels.get(params[0] ?? "");
      if (!channel) return unknownChannel();
      return startThread(channel, nextId(), body, typeof body.type === "number" ? body.type : ChannelType.PrivateThread);
    }),
    route("GET", "/applications/:id/commands", ({ params }) => checkApp(params) ?? ok(commandScopes.get("global") ?? [])),
    route("GET", "/applications/:id/guilds/:id/commands", ({ params }) => checkApp(params) ?? ok(commandScopes.get(scopeOf(params)) ?? [])),
    route("PUT", "/applications/:id/commands", ({ params, body }) => checkApp(params) ?? ok(registerCommands("global", arr(body) ?? [], true))),
    route("PUT", "/applications/:id/guilds/:id/commands", ({ params, body }) => checkApp(params) ?? ok(registerCommands(scopeOf(params), arr(body) ?? [], true))),
    route("POST", "/applications/:id/commands", ({ params, body }) => checkApp(params) ?? { status: 201, body: registerCommands("global", [body], false)[0] }),
    route("POST", "/applications/:id/guilds/:id/commands", ({ params, body }) => checkApp(params) ?? { status: 201, body: registerCommands(scopeOf(params), [body], false)[0] }),
    route("DELETE", "/applications/:id/commands/:id", ({ params }) => deleteCommand("global", params[1] ?? "")),
    route("DELETE", "/applications/:id/guilds/:id/commands/:id", ({ params }) => deleteCommand(params[1] ?? "", params[2] ?? "")),
    route("POST", "/interactions/:id/:token/callback", interactionCallback, false),
    // Interaction webhooks: follow-ups, and reading/editing/deleting @original or a follow-up.
    route("POST", "/webhooks/:id/:token", ({ params, query, body, files }) => {
      const i = webhookInteraction(params);
      if (!i) return unknownWebhook();
      const refused = checkMessageBody(body, files, true);
      if (refused) return refused;
      const flags = typeof body.flags === "number" ? body.flags : 0;
      const m = storeMessage({ channelId: i.channelId, authorId: botUserId, webhookId: applicationId, flags: flags & MessageFlag.Ephemeral,
        ephemeral: (flags & MessageFlag.Ephemeral) !== 0, interaction: { id: i.id, type: i.type, userId: i.userId } });
      applyBody(m, body, files, "create");
      i.followUps.add(m.id);
      later(() => broadcastMessage("MESSAGE_CREATE", m));
      return query.wait === "true" ? ok(messageJson(m)) : noContent();
    }, false),
    route("GET", "/webhooks/:id/:token/messages/:token", ({ params }) => {
      const i = webhookInteraction(params);
      const m = i && webhookMessage(i, params[2] ?? "");
      return !i ? unknownWebhook() : m ? ok(messageJson(m)) : unknownMessage();
    }, false),
    route("PATCH", "/webhooks/:id/:token/messages/:token", ({ params, body, files }) => {
      const i = webhookInteraction(params);
      const m = i && webhookMessage(i, params[2] ?? "");
      if (!i) return unknownWebhook();
      if (!m) return unknownMessage();
      const refused = checkMessageBody(body, files, false);
      if (refused) return refused;
      applyBody(m, body, files, m.flags & MessageFlag.Loading ? "create" : "edit");
      if (m.flags & MessageFlag.Loading) m.flags &= ~MessageFlag.Loading; // a deferred reply's first edit is its content
      else m.editedTimestamp = new Date().toISOString();
      later(() => broadcastMessage("MESSAGE_UPDATE", m));
      return ok(messageJson(m));
    }, false),
    route("DELETE", "/webhooks/:id/:token/messages/:token", ({ params }) => {
      const i = webhookInteraction(params);
      const m = i && webhookMessage(i, params[2] ?? "");
      if (!i) return unknownWebhook();
      if (!m) return unknownMessage();
      messagesById.delete(m.id);
      return noContent();
    }, false),
  ];

  function startThread(parent: Channel, id: string, body: Json, type: number): Answer {
    if (!parent.guildId || isThread(parent.type)) return error(400, 50024, "Cannot execute action on this channel type");
    if (channels.has(id)) return error(400, 160004, "A thread has already been created for this message");
    const thread: Channel = { id, type, name: str(body.name) ?? "thread", guildId: parent.guildId, parentId: parent.id, ownerId: botUserId, lastMessageId: null };
    channels.set(id, thread);
    later(() => { for (const s of liveSessions(Intent.Guilds)) dispatch(s, "THREAD_CREATE", { ...channelJson(thread), newly_created: true }); });
    return { status: 201, body: channelJson(thread) };
  }

  function deleteCommand(scope: string, id: string): Answer {
    const list = commandScopes.get(scope) ?? [];
    if (!list.some((c) => c.id === id)) return error(404, 10063, "Unknown application command");
    commandScopes.set(scope, list.filter((c) => c.id !== id));
    return noContent();
  }

  function record(entry: RecordedRequest): void {
    requests.push(entry);
    for (const waiter of [...requestWaiters]) waiter.check();
  }

  async function handleRest(req: IncomingMessage, res: ServerResponse, path: string, rawQuery: string): Promise<void> {
    const method = (req.method ?? "GET").toUpperCase();
    const query = Object.fromEntries(Object.entries(parseQuery(rawQuery)).map(([k, v]) => [k, Array.isArray(v) ? v[0] ?? "" : v ?? ""]));
    const at = Date.now();
    let parsed: { body: unknown; files: StoredFile[] };
    try {
      parsed = await parseBody(await readBody(req), req.headers["content-type"] ?? "");
    } catch {
      record({ method, path, query, body: undefined, status: 400, at });
      return reply(res, error(400, 50109, "The request body contains invalid JSON."), "invalid");
    }
    const found = routes.map((r) => ({ r, m: r.method === method ? r.pattern.exec(path) : null })).find((x) => x.m);
    const refusal = refusals.find((f) => f.times > 0 && f.method === method && matchesPath(path, f.pattern));
    let answer: Answer;
    if (!found) answer = error(404, 0, "404: Not Found");
    else if (found.r.auth && req.headers.authorization !== `Bot ${token}`) answer = unauthorized();
    else if (refusal) { refusal.times--; answer = error(refusal.status, refusal.code, refusal.message); }
    else {
      const body = (parsed.body && typeof parsed.body === "object" ? parsed.body : {}) as Json;
      answer = found.r.handler({ params: (found.m ?? []).slice(1), query, body, files: parsed.files });
    }
    // Recorded before answering, and the handler already ran: a waitForRequest() continuation sees
    // its effect in messages(). Gateway events it caused go out after the HTTP answer (later()).
    record({ method, path, query, body: parsed.body, ...(parsed.files.length ? { files: parsed.files } : {}), status: answer.status, at });
    reply(res, answer, found?.r.bucket ?? "unknown");
  }

  function reply(res: ServerResponse, answer: Answer, bucket: string): void {
    const resetAfter = 1;
    const headers: Record<string, string> = {
      "X-RateLimit-Limit": String(RATE_LIMIT), "X-RateLimit-Remaining": String(RATE_LIMIT - 1),
      "X-RateLimit-Reset": ((Date.now() + resetAfter * 1000) / 1000).toFixed(3), "X-RateLimit-Reset-After": resetAfter.toFixed(3),
      "X-RateLimit-Bucket": Buffer.from(bucket).toString("hex").slice(0, 32),
    };
    if (answer.body === undefined) {
      res.writeHead(answer.status, headers);
      res.end();
      return;
    }
    res.writeHead(answer.status, { ...headers, "Content-Type": "application/json" });
    res.end(JSON.stringify(answer.body));
  }

  const cdn = createFakeDiscordCdn(() => origin);
  const server = createServer((req, res) => {
    if (cdn.handle(req, res)) return;
    const [path = "", query = ""] = (req.url ?? "").split("?", 2);
    const api = /^\/api\/v(\d+)(\/.*)$/.exec(path);
    if (!api?.[2] || api[1] !== API_VERSION) return reply(res, error(404, 0, "404: Not Found"), "unknown");
    // Segments arrive percent-encoded ("messages/%40original", emoji); routes and records use them decoded.
    const decoded = api[2].split("/").map((segment) => { try { return decodeURIComponent(segment); } catch { return segment; } }).join("/");
    handleRest(req, res, decoded, query).catch((e: unknown) => {
      if (!res.headersSent) reply(res, error(500, 0, `fake-discord error: ${String(e)}`), "error");
    });
  });

  const wss = new WebSocketServer({ noServer: true });
  server.on("upgrade", (req, socket, head) => {
    const url = new URL(req.url ?? "/", origin);
    if (url.pathname !== "/gateway" && url.pathname !== "/resume-gateway") {
      socket.end("HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n");
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      const conn: Conn = { ws };
      conns.add(conn);
      gatewayUrls.push(req.url ?? "");
      ws.on("message", (data: Buffer, isBinary: boolean) => {
        if (isBinary) return ws.close(Close.DecodeError, "Binary (ETF) payloads are not supported by the fake.");
        onGatewayMessage(conn, data.toString("utf8"));
      });
      ws.on("close", (code: number) => {
        conns.delete(conn);
        const session = conn.session;
        if (session?.conn !== conn) return;
        session.conn = null;
        // A client that closes with 1000/1001 ends its session (Discord's rule); other codes, such
        // as discord.js's 4200 "resuming", keep it resumable.
        if (code === 1000 || code === 1001) session.ended = true;
      });
      if (url.searchParams.get("v") !== API_VERSION) return ws.close(Close.InvalidApiVersion, "Invalid API version.");
      send(conn, { op: Op.Hello, d: { heartbeat_interval: heartbeatInterval, _trace: ["fake-discord"] }, s: null, t: null });
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const gatewayUrl = () => `${origin.replace("http", "ws")}/gateway`;

  /** Shared by waitForRequest and waitForGatewayPayload: look at what is recorded, then wait. */
  function waitFor<T>(list: T[], matches: (entry: T) => boolean, waiters: typeof requestWaiters, opts: WaitOptions, describe: () => string): Promise<T> {
    const { timeoutMs = 5000, since = 0 } = opts;
    const find = () => list.slice(since).find(matches);
    const found = find();
    if (found !== undefined) return Promise.resolve(found);
    return new Promise((resolve, reject) => {
      const waiter = {
        check: () => { const hit = find(); if (hit !== undefined) { done(); resolve(hit); } },
        reject: (e: Error) => { done(); reject(e); },
      };
      const timer = setTimeout(() => waiter.reject(new Error(`fake-discord: ${describe()} within ${timeoutMs} ms`)), timeoutMs);
      const done = () => { clearTimeout(timer); waiters.delete(waiter); };
      waiters.add(waiter);
    });
  }

  return {
    apiUrl: `${origin}/api`,
    gatewayUrl: gatewayUrl(),
    token,
    botUserId,
    applicationId,
    requests,
    messageWrites,
    requestsTo: (method, pattern) => requests.filter((r) => r.method === method.toUpperCase() && matchesPath(r.path, pattern)),
    waitForRequest(method, pattern, predicate = () => true, opts = {}) {
      return waitFor(requests, (r) => r.method === method.toUpperCase() && matchesPath(r.path, pattern) && predicate(r), requestWaiters, opts,
        () => `no matching ${method} ${String(pattern)}; received: ${requests.map((r) => `${r.method} ${r.path}`).join(", ") || "nothing"}`);
    },
    messages(channelId) {
      return [...messagesById.values()].filter((m) => m.channelId === channelId && !m.ephemeral).sort(byId).map((m) => {
        const author = user(m.authorId);
        return structuredClone({
          id: m.id, channelId: m.channelId, ...(m.guildId ? { guildId: m.guildId } : {}), content: m.content, components: m.components,
          embeds: m.embeds, attachments: m.attachments, author: { id: author.id, username: author.username, ...(author.bot ? { bot: true } : {}) },
          type: m.type, flags: m.flags, editedTimestamp: m.editedTimestamp, ...(m.reference ? { referencedMessageId: m.reference.message_id } : {}),
          ...(m.interaction ? { interactionId: m.interaction.id } : {}),
        });
      });
    },
    identified({ timeoutMs = 5000 } = {}) {
      // Starting at the last entry: the latest IDENTIFY if there was one, else the next.
      return waitFor(identifies, () => true, gatewayWaiters, { timeoutMs, since: Math.max(0, identifies.length - 1) }, () => "no IDENTIFY")
        .then((found) => ({ ...found }));
    },
    connections: () => [...conns].filter((c) => c.ws.readyState === c.ws.OPEN).length,
    gatewayPayloads,
    waitForGatewayPayload(op, opts = {}) {
      return waitFor(gatewayPayloads, (p) => p.op === op, gatewayWaiters, opts,
        () => `no gateway op ${op}; received ops: ${gatewayPayloads.map((p) => p.op).join(", ") || "none"}`);
    },
    gatewayUrls,
    cdn,
    async sendMessage(input) {
      let channel = channels.get(input.channelId);
      if (!channel && input.guildId === undefined) {
        // A DM the test did not declare: the channel is the author's DM with the bot.
        channels.set(input.channelId, (channel = { id: input.channelId, type: ChannelType.DM, recipientId: input.authorId, lastMessageId: null }));
      }
      channel = channelFor(input.channelId, input.guildId, "sendMessage");
      const author = user(input.authorId);
      if (input.bot) author.bot = true;
      const mention = `<@${botUserId}>`;
      // Like typing "@glassbox hi": the mention is part of the content and of `mentions`.
      const content = input.mentionsBot && !mentionedIds(input.content).includes(botUserId) ? `${mention} ${input.content}` : input.content;
      const m = storeMessage({ channelId: channel.id, authorId: author.id, content, type: input.type ?? MessageType.Default, attachments: (input.attachments ?? []).map((file) => cdn.add(input.channelId, file, nextId())) });
      broadcastMessage("MESSAGE_CREATE", m);
      return { id: m.id, content };
    },
    async clickButton(input) {
      const channel = channelFor(input.channelId, input.guildId, "clickButton");
      const message = messagesById.get(input.messageId);
      if (!message || message.channelId !== channel.id) throw new Error(`fake-discord: no message ${input.messageId} in channel ${channel.id}`);
      // The fake does not check that the button is still on the message, so a test can play a
      // click from a stale client (Discord itself rejects those with "This interaction failed").
      const i = newInteraction({ type: InteractionType.MessageComponent, channelId: channel.id, ...(channel.guildId ? { guildId: channel.guildId } : {}),
        userId: input.userId, componentMessageId: message.id });
      const payload = interactionJson(i, { custom_id: input.customId, component_type: 2 }, message);
      for (const s of liveSessions()) dispatch(s, "INTERACTION_CREATE", payload);
      return { interactionId: i.id, token: i.token };
    },
    async runCommand(input) {
      const channel = channelFor(input.channelId, input.guildId, "runCommand");
      const guildCommand = channel.guildId ? commandScopes.get(channel.guildId)?.find((c) => c.name === input.name) : undefined;
      const command = guildCommand ?? commandScopes.get("global")?.find((c) => c.name === input.name);
      if (!command) {
        throw new Error(`fake-discord: /${input.name} is not registered (globally${channel.guildId ? ` or in guild ${channel.guildId}` : ""}), so no user could run it`);
      }
      const i = newInteraction({ type: InteractionType.ApplicationCommand, channelId: channel.id, ...(channel.guildId ? { guildId: channel.guildId } : {}),
        userId: input.userId, name: input.name });
      const payload = interactionJson(i, { id: command.id, name: input.name, type: 1, ...(input.options ? { options: input.options } : {}),
        ...(guildCommand ? { guild_id: channel.guildId } : {}) });
      for (const s of liveSessions()) dispatch(s, "INTERACTION_CREATE", payload);
      return { interactionId: i.id, token: i.token };
    },
    modalOf: (interactionId) => structuredClone(interactions.get(interactionId)?.modal),
    async submitModal(input) {
      const opened = interactions.get(input.interactionId);
      if (!opened?.modal) throw new Error(`fake-discord: interaction ${input.interactionId} showed no modal`);
      const channel = channelFor(opened.channelId, opened.guildId, "submitModal");
      // What Discord sends back mirrors the modal: a label holds its one input, an action row its inputs.
      type Shown = { type?: number; id?: number; component?: { type?: number; custom_id?: string }; components?: Array<{ type?: number; custom_id?: string }> };
      const valueOf = (field?: { type?: number; custom_id?: string }) => ({ type: ComponentType.TextInput, custom_id: field?.custom_id ?? "", value: input.values[field?.custom_id ?? ""] ?? "" });
      const components = (opened.modal.components as Shown[]).map((shown, index) =>
        shown.type === ComponentType.Label ? { type: ComponentType.Label, id: shown.id ?? index + 1, component: valueOf(shown.component) } : { type: ComponentType.ActionRow, components: (shown.components ?? []).map(valueOf) });
      const message = opened.componentMessageId ? messagesById.get(opened.componentMessageId) : undefined;
      const i = newInteraction({ type: InteractionType.ModalSubmit, channelId: channel.id, ...(channel.guildId ? { guildId: channel.guildId } : {}), userId: opened.userId,
        ...(message ? { componentMessageId: message.id } : {}) });
      const payload = interactionJson(i, { custom_id: opened.modal.customId, components }, message);
      for (const s of liveSessions()) dispatch(s, "INTERACTION_CREATE", payload);
      return { interactionId: i.id, token: i.token };
    },
    interactionResponses(interactionId) {
      const i = interactions.get(interactionId);
      if (!i) return [];
      return requests.filter((r) => r.path.startsWith(`/interactions/${i.id}/`) || r.path.startsWith(`/webhooks/${applicationId}/${i.token}`));
    },
    dropConnection({ resumable = true, code = Close.Dropped } = {}) {
      for (const conn of [...conns]) {
        if (conn.session?.conn === conn) {
          conn.session.conn = null; // from now on its events are kept for the RESUME
          if (!resumable) conn.session.ended = true;
        }
        conn.ws.close(code, "fake-discord: connection dropped");
      }
    },
    async redeliver(messageId) {
      const m = messagesById.get(messageId);
      if (!m) throw new Error(`fake-discord: no message ${messageId} to redeliver`);
      broadcastMessage("MESSAGE_CREATE", m);
    },
    commands: (scope) => structuredClone(commandScopes.get(scope) ?? []),
    refuse(method, pattern, o = {}) {
      refusals.push({ method: method.toUpperCase(), pattern, status: o.status ?? 500, code: o.code ?? 0,
        message: o.message ?? `${o.status ?? 500}: refused by fake-discord`, times: o.times ?? Number.POSITIVE_INFINITY });
    },
    nextId,
    async close() {
      closed = true;
      for (const timer of timers) clearTimeout(timer);
      for (const waiter of [...requestWaiters, ...gatewayWaiters]) waiter.reject(new Error("fake-discord: closed"));
      for (const conn of conns) conn.ws.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
