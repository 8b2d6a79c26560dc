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
//
// Each concern lives beside this file, which keeps the wiring (options, the FakeDiscord object):
// the shared state and its JSON shapes (fake-discord-state.ts), the gateway (fake-discord-gateway.ts),
// interactions (fake-discord-interactions.ts), the other REST routes (fake-discord-routes.ts), the
// HTTP serving, recording and waiting (fake-discord-server.ts), Discord's numbers and shapes
// (fake-discord-protocol.ts) and the CDN (fake-discord-files.ts).
import { mentionedIds } from "./platform-mentions.js";
import { createFakeDiscordCdn, type FakeDiscordCdn, type FakeDiscordFileInput } from "./fake-discord-files.js";
import { createGateway, type GatewayPayloadRecord } from "./fake-discord-gateway.js";
import { createInteractions } from "./fake-discord-interactions.js";
import {
  APP_FLAG_MESSAGE_CONTENT_LIMITED,
  ChannelType,
  MessageType,
  byId,
  matchesPath,
} from "./fake-discord-protocol.js";
import { createRestRoutes } from "./fake-discord-routes.js";
import {
  createWaiters,
  startFakeDiscordServer,
  type RecordedRequest,
  type RefuseOptions,
  type WaitOptions,
} from "./fake-discord-server.js";
import { createDiscordState, type FakeDiscordGuildInput, type MessageWrite } from "./fake-discord-state.js";

export type {
  FakeDiscordChannelInput,
  FakeDiscordGuildInput,
  FakeDiscordRoleInput,
  MessageWrite,
} from "./fake-discord-state.js";
export type { Pings } from "./platform-mentions.js";
export type { GatewayPayloadRecord } from "./fake-discord-gateway.js";
export type { RecordedRequest, RefuseOptions, WaitOptions } from "./fake-discord-server.js";

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
  waitForRequest(
    method: string,
    pathPattern: RegExp | string,
    predicate?: (r: RecordedRequest) => boolean,
    options?: WaitOptions,
  ): Promise<RecordedRequest>;
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
  sendMessage(input: {
    channelId: string;
    guildId?: string;
    authorId: string;
    content: string;
    bot?: boolean;
    mentionsBot?: boolean;
    type?: number;
    attachments?: FakeDiscordFileInput[];
    /** The message this one replies to (a reply: type 19 with its message_reference). */
    replyTo?: string;
  }): Promise<{ id: string; content: string }>;
  cdn: FakeDiscordCdn; // serves the attachments of sent messages (fake-discord-files.ts)
  clickButton(input: {
    channelId: string;
    guildId?: string;
    userId: string;
    messageId: string;
    customId: string;
  }): Promise<{ interactionId: string; token: string }>;
  runCommand(input: {
    channelId: string;
    guildId?: string;
    userId: string;
    name: string;
    options?: unknown[];
  }): Promise<{ interactionId: string; token: string }>;
  interactionResponses(interactionId: string): RecordedRequest[]; // callback + webhook calls, in order
  /** The modal an interaction was answered with (callback type 9), as Discord would show it; undefined if none. */
  modalOf(interactionId: string): { customId: string; title: string; components: unknown[] } | undefined;
  /** Submits that modal as the person who opened it, with what they typed by text input custom_id (a MODAL_SUBMIT interaction). */
  submitModal(input: {
    interactionId: string;
    values: Record<string, string>;
  }): Promise<{ interactionId: string; token: string }>;
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
  id: "1100000000000000100",
  name: "Fake Guild",
  channels: [{ id: "1100000000000000101", name: "general", type: 0 }],
};

export async function startFakeDiscord(options: FakeDiscordOptions = {}): Promise<FakeDiscord> {
  const botUserId = options.botUserId ?? DEFAULT_BOT_USER_ID;
  const state = createDiscordState({
    token: options.token ?? DEFAULT_TOKEN,
    botUserId,
    applicationId: options.applicationId ?? botUserId,
    botUsername: options.botUsername ?? "glassbox",
    appFlags: options.missingIntents ? 0 : APP_FLAG_MESSAGE_CONTENT_LIMITED,
    guilds: options.guilds ?? [DEFAULT_GUILD],
    dmChannels: options.dmChannels ?? [],
  });
  const { token, applicationId, channels, messagesById, user } = state;
  const requestWaiters = createWaiters();
  const gatewayWaiters = createWaiters();
  const gateway = createGateway(state, {
    heartbeatInterval: options.heartbeatIntervalMs ?? 41_250,
    missingIntents: options.missingIntents ?? false,
    waiters: gatewayWaiters,
  });
  const interactions = createInteractions(state, gateway);
  const cdn = createFakeDiscordCdn(() => state.origin);
  const server = await startFakeDiscordServer(state, {
    routes: [...createRestRoutes(state, gateway), ...interactions.routes],
    cdn,
    onUpgrade: gateway.handleUpgrade,
    waiters: requestWaiters,
  });
  const { requests } = server;
  const { identifies, payloads: gatewayPayloads } = gateway;

  return {
    apiUrl: `${state.origin}/api`,
    gatewayUrl: gateway.url(),
    token,
    botUserId,
    applicationId,
    requests,
    messageWrites: state.messageWrites,
    requestsTo: (method, pattern) =>
      requests.filter((r) => r.method === method.toUpperCase() && matchesPath(r.path, pattern)),
    waitForRequest(method, pattern, predicate = () => true, opts = {}) {
      return requestWaiters.waitFor(
        requests,
        (r) => r.method === method.toUpperCase() && matchesPath(r.path, pattern) && predicate(r),
        opts,
        () =>
          `no matching ${method} ${String(pattern)}; received: ${requests.map((r) => `${r.method} ${r.path}`).join(", ") || "nothing"}`,
      );
    },
    messages(channelId) {
      return [...messagesById.values()]
        .filter((m) => m.channelId === channelId && !m.ephemeral)
        .sort(byId)
        .map((m) => {
          const author = user(m.authorId);
          return structuredClone({
            id: m.id,
            channelId: m.channelId,
            ...(m.guildId ? { guildId: m.guildId } : {}),
            content: m.content,
            components: m.components,
            embeds: m.embeds,
            attachments: m.attachments,
            author: { id: author.id, username: author.username, ...(author.bot ? { bot: true } : {}) },
            type: m.type,
            flags: m.flags,
            editedTimestamp: m.editedTimestamp,
            ...(m.reference ? { referencedMessageId: m.reference.message_id } : {}),
            ...(m.interaction ? { interactionId: m.interaction.id } : {}),
          });
        });
    },
    identified({ timeoutMs = 5000 } = {}) {
      // Starting at the last entry: the latest IDENTIFY if there was one, else the next.
      return gatewayWaiters
        .waitFor(
          identifies,
          () => true,
          { timeoutMs, since: Math.max(0, identifies.length - 1) },
          () => "no IDENTIFY",
        )
        .then((found) => ({ ...found }));
    },
    connections: gateway.connections,
    gatewayPayloads,
    waitForGatewayPayload(op, opts = {}) {
      return gatewayWaiters.waitFor(
        gatewayPayloads,
        (p) => p.op === op,
        opts,
        () => `no gateway op ${op}; received ops: ${gatewayPayloads.map((p) => p.op).join(", ") || "none"}`,
      );
    },
    gatewayUrls: gateway.urls,
    cdn,
    async sendMessage(input) {
      let channel = channels.get(input.channelId);
      if (!channel && input.guildId === undefined) {
        // A DM the test did not declare: the channel is the author's DM with the bot.
        channels.set(
          input.channelId,
          (channel = { id: input.channelId, type: ChannelType.DM, recipientId: input.authorId, lastMessageId: null }),
        );
      }
      channel = state.channelFor(input.channelId, input.guildId, "sendMessage");
      const author = user(input.authorId);
      if (input.bot) author.bot = true;
      const mention = `<@${botUserId}>`;
      // Like typing "@glassbox hi": the mention is part of the content and of `mentions`.
      const content =
        input.mentionsBot && !mentionedIds(input.content).includes(botUserId)
          ? `${mention} ${input.content}`
          : input.content;
      const m = state.storeMessage({
        channelId: channel.id,
        authorId: author.id,
        content,
        type: input.type ?? (input.replyTo ? MessageType.Reply : MessageType.Default),
        attachments: (input.attachments ?? []).map((file) => cdn.add(input.channelId, file, state.nextId())),
        ...(input.replyTo
          ? {
              reference: {
                message_id: input.replyTo,
                channel_id: channel.id,
                ...(input.guildId ? { guild_id: input.guildId } : {}),
              },
            }
          : {}),
      });
      gateway.broadcastMessage("MESSAGE_CREATE", m);
      return { id: m.id, content };
    },
    clickButton: interactions.clickButton,
    runCommand: interactions.runCommand,
    modalOf: interactions.modalOf,
    submitModal: interactions.submitModal,
    interactionResponses(interactionId) {
      const i = state.interactions.get(interactionId);
      if (!i) return [];
      return requests.filter(
        (r) =>
          r.path.startsWith(`/interactions/${i.id}/`) || r.path.startsWith(`/webhooks/${applicationId}/${i.token}`),
      );
    },
    dropConnection: gateway.dropConnection,
    async redeliver(messageId) {
      const m = messagesById.get(messageId);
      if (!m) throw new Error(`fake-discord: no message ${messageId} to redeliver`);
      gateway.broadcastMessage("MESSAGE_CREATE", m);
    },
    commands: (scope) => structuredClone(state.commandScopes.get(scope) ?? []),
    refuse: server.refuse,
    nextId: state.nextId,
    async close() {
      state.closed = true;
      for (const timer of state.timers) clearTimeout(timer);
      requestWaiters.rejectAll();
      gatewayWaiters.rejectAll();
      await gateway.close();
      await server.close();
    },
  };
}
