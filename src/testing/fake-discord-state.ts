// The fake Discord's state, shared by its gateway, REST routes and interactions: the bot, users,
// guilds, channels, messages, interactions and registered commands, with the JSON shapes Discord
// sends them in, and the message writes every route makes (storing, applying a body, refusing one).
import { allowedMentionsProblem, mentionedIds, pingsOf, type Pings } from "./platform-mentions.js";
import {
  ChannelType,
  DISCORD_EPOCH,
  MEMBER_PERMISSIONS,
  MessageType,
  arr,
  error,
  formError,
  isThread,
  str,
  type Answer,
  type ApiUser,
  type Channel,
  type Interaction,
  type Json,
  type StoredFile,
  type StoredMessage,
} from "./fake-discord-protocol.js";

export interface FakeDiscordChannelInput {
  id: string;
  name?: string;
  type?: number; // 0 text (default), 11 public thread, 12 private thread
  parent_id?: string; // a thread's channel
}
export interface FakeDiscordGuildInput {
  id: string;
  name?: string;
  channels: FakeDiscordChannelInput[];
  /** The guild's roles besides @everyone, each with the users who have it (a member's `roles` lists their ids). */
  roles?: FakeDiscordRoleInput[];
}

export interface FakeDiscordRoleInput {
  id: string;
  name: string;
  members: string[];
}

/**
 * A message the bot created or edited (channel messages, interaction replies and follow-ups, their
 * edits): `allowedMentions` exactly as the body carried it (undefined when it carried none), and
 * whom Discord would notify. The fake is stricter than Discord: it counts mentions inside code
 * too, and leaves out the permission check (a bot given Mention Everyone would ping).
 */
export interface MessageWrite {
  kind: "create" | "edit";
  channelId: string;
  messageId: string;
  content: string; // the message's content after the write
  allowedMentions: unknown;
  pings: Pings;
}

/** Who the bot is and what the fake starts with (options resolved to their defaults). */
export interface DiscordStateOptions {
  token: string;
  botUserId: string;
  applicationId: string;
  botUsername: string;
  appFlags: number; // the application's flags, as READY and GET /applications/@me carry them
  guilds: FakeDiscordGuildInput[];
  dmChannels: Array<{ id: string; recipientId: string }>;
}

export interface DiscordState {
  readonly token: string;
  readonly botUserId: string;
  readonly applicationId: string;
  readonly appFlags: number;
  /** http://127.0.0.1:PORT, set once the server listens. */
  origin: string;
  /** Set by close(): later() runs nothing from then on. */
  closed: boolean;
  readonly timers: Set<NodeJS.Timeout>; // later()'s, cleared by close()
  readonly users: Map<string, ApiUser>;
  readonly guilds: Map<string, { id: string; name: string; joinedAt: string; roles: FakeDiscordRoleInput[] }>;
  readonly channels: Map<string, Channel>;
  readonly messagesById: Map<string, StoredMessage>;
  readonly interactions: Map<string, Interaction>; // by id
  readonly interactionsByToken: Map<string, Interaction>;
  readonly commandScopes: Map<string, Json[]>; // "global" or a guild id
  readonly messageWrites: MessageWrite[]; // every message the bot created or edited, in order
  /** Snowflakes: milliseconds since 2015 in the top bits, then worker, process and an increment;
   * strictly increasing, so creation order is id order, as in Discord. */
  nextId(): string;
  /** Gateway events caused by a REST call go out after its HTTP answer, as they would from Discord. */
  later(fn: () => void): void;
  /** A user by id; one the fake has not seen yet is made up. */
  user(id: string): ApiUser;
  /** Resolves the guild of an event's channel and checks the test's guildId agrees with it. */
  channelFor(channelId: string, guildId: string | undefined, what: string): Channel;
  memberJson(userId: string, guildId: string, withUser: boolean): Json;
  /** A channel as GET /channels/{id} answers (GUILD_CREATE lists them without guild_id). */
  channelJson(c: Channel, withGuildId?: boolean): Json;
  guildCreateJson(guildId: string): Json;
  /** A message as REST answers it; the gateway adds guild_id, member and channel_type (see the gateway's gatewayMessage). */
  messageJson(m: StoredMessage, depth?: number): Json;
  storeMessage(fields: Partial<StoredMessage> & { channelId: string; authorId: string }): StoredMessage;
  /** Applies the message fields of a create/edit body (content, embeds, components, flags, attachments), and records the write. */
  applyBody(m: StoredMessage, body: Json, files: StoredFile[], kind: MessageWrite["kind"]): void;
}

export function createDiscordState(options: DiscordStateOptions): DiscordState {
  const { botUserId, applicationId } = options;
  const users = new Map<string, ApiUser>();
  const guilds = new Map<string, { id: string; name: string; joinedAt: string; roles: FakeDiscordRoleInput[] }>();
  const channels = new Map<string, Channel>();
  const messagesById = new Map<string, StoredMessage>();
  const messageWrites: MessageWrite[] = [];
  let lastId = 0n;

  const state: DiscordState = {
    token: options.token,
    botUserId,
    applicationId,
    appFlags: options.appFlags,
    origin: "",
    closed: false,
    timers: new Set(),
    users,
    guilds,
    channels,
    messagesById,
    interactions: new Map(),
    interactionsByToken: new Map(),
    commandScopes: new Map(),
    messageWrites,
    nextId() {
      const fromTime = (BigInt(Date.now()) - DISCORD_EPOCH) << 22n;
      lastId = fromTime > lastId ? fromTime | (1n << 17n) : lastId + 1n;
      return lastId.toString();
    },
    later(fn) {
      const timer = setTimeout(() => {
        state.timers.delete(timer);
        if (!state.closed) fn();
      });
      state.timers.add(timer);
    },
    user,
    channelFor,
    memberJson,
    channelJson,
    guildCreateJson,
    messageJson,
    storeMessage,
    applyBody,
  };

  // ---- Users, guilds, channels ----------------------------------------------------------------
  function user(id: string): ApiUser {
    let found = users.get(id);
    if (!found)
      users.set(
        id,
        (found = { id, username: `user_${id.slice(-6)}`, global_name: null, discriminator: "0", avatar: null }),
      );
    return found;
  }
  users.set(botUserId, {
    id: botUserId,
    username: options.botUsername,
    global_name: null,
    discriminator: "0",
    avatar: null,
    bot: true,
  });

  for (const g of options.guilds) {
    guilds.set(g.id, {
      id: g.id,
      name: g.name ?? `guild-${g.id}`,
      joinedAt: new Date().toISOString(),
      roles: g.roles ?? [],
    });
    for (const c of g.channels) {
      channels.set(c.id, {
        id: c.id,
        type: c.type ?? ChannelType.GuildText,
        name: c.name ?? `channel-${c.id}`,
        guildId: g.id,
        ...(c.parent_id ? { parentId: c.parent_id } : {}),
        ...(isThread(c.type ?? 0) ? { ownerId: botUserId } : {}),
        lastMessageId: null,
      });
    }
  }
  for (const dm of options.dmChannels) {
    channels.set(dm.id, { id: dm.id, type: ChannelType.DM, recipientId: dm.recipientId, lastMessageId: null });
  }

  function channelFor(channelId: string, guildId: string | undefined, what: string): Channel {
    const channel = channels.get(channelId);
    if (!channel)
      throw new Error(
        `fake-discord: ${what} in unknown channel ${channelId}; list it in options.guilds or options.dmChannels`,
      );
    if (guildId !== undefined && channel.guildId !== guildId)
      throw new Error(`fake-discord: channel ${channelId} is not in guild ${guildId}`);
    return channel;
  }

  function memberJson(userId: string, guildId: string, withUser: boolean): Json {
    return {
      ...(withUser ? { user: user(userId) } : {}),
      // The ids of the member's roles, @everyone left out, as Discord sends them.
      roles: (guilds.get(guildId)?.roles ?? []).filter((role) => role.members.includes(userId)).map((role) => role.id),
      nick: null,
      avatar: null,
      banner: null,
      premium_since: null,
      pending: false,
      joined_at: guilds.get(guildId)?.joinedAt ?? new Date().toISOString(),
      deaf: false,
      mute: false,
      flags: 0,
      communication_disabled_until: null,
    };
  }

  function channelJson(c: Channel, withGuildId = true): Json {
    if (c.type === ChannelType.DM)
      return {
        id: c.id,
        type: c.type,
        recipients: [user(c.recipientId ?? "")],
        last_message_id: c.lastMessageId,
        flags: 0,
      };
    const base: Json = {
      id: c.id,
      type: c.type,
      name: c.name,
      ...(withGuildId ? { guild_id: c.guildId } : {}),
      parent_id: c.parentId ?? null,
      last_message_id: c.lastMessageId,
      rate_limit_per_user: 0,
      flags: 0,
    };
    if (isThread(c.type)) {
      const count = [...messagesById.values()].filter((m) => m.channelId === c.id).length;
      return {
        ...base,
        owner_id: c.ownerId ?? botUserId,
        message_count: count,
        total_message_sent: count,
        member_count: 1,
        thread_metadata: {
          archived: false,
          locked: false,
          auto_archive_duration: 1440,
          archive_timestamp: new Date().toISOString(),
        },
      };
    }
    return { ...base, position: 0, permission_overwrites: [], nsfw: false, topic: null };
  }

  function guildCreateJson(guildId: string): Json {
    const g = guilds.get(guildId);
    const all = [...channels.values()].filter((c) => c.guildId === guildId);
    return {
      id: guildId,
      name: g?.name,
      icon: null,
      splash: null,
      discovery_splash: null,
      owner_id: "1100000000000000999",
      afk_channel_id: null,
      afk_timeout: 300,
      verification_level: 0,
      default_message_notifications: 0,
      explicit_content_filter: 0,
      mfa_level: 0,
      nsfw_level: 0,
      features: [],
      system_channel_id: null,
      system_channel_flags: 0,
      rules_channel_id: null,
      vanity_url_code: null,
      description: null,
      banner: null,
      premium_tier: 0,
      premium_subscription_count: 0,
      preferred_locale: "en-US",
      public_updates_channel_id: null,
      max_members: 500_000,
      max_video_channel_users: 25,
      application_id: null,
      premium_progress_bar_enabled: false,
      roles: [{ id: guildId, name: "@everyone" }, ...(g?.roles ?? [])].map((role, position) => ({
        id: role.id,
        name: role.name,
        color: 0,
        hoist: false,
        icon: null,
        unicode_emoji: null,
        position,
        permissions: position === 0 ? MEMBER_PERMISSIONS : "0",
        managed: false,
        mentionable: false,
        flags: 0,
      })),
      emojis: [],
      stickers: [],
      // GUILD_CREATE's own fields:
      joined_at: g?.joinedAt,
      large: false,
      unavailable: false,
      member_count: 2,
      members: [memberJson(botUserId, guildId, true)],
      voice_states: [],
      presences: [],
      stage_instances: [],
      guild_scheduled_events: [],
      soundboard_sounds: [],
      channels: all.filter((c) => !isThread(c.type)).map((c) => channelJson(c, false)),
      threads: all.filter((c) => isThread(c.type)).map((c) => channelJson(c)),
    };
  }

  // ---- Messages -------------------------------------------------------------------------------
  function messageJson(m: StoredMessage, depth = 0): Json {
    const referenced = m.reference ? messagesById.get(m.reference.message_id) : undefined;
    return {
      id: m.id,
      channel_id: m.channelId,
      type: m.type,
      content: m.content,
      author: user(m.authorId),
      timestamp: m.timestamp,
      edited_timestamp: m.editedTimestamp,
      tts: false,
      mention_everyone: false,
      mentions: m.mentionIds.map(user),
      mention_roles: [],
      attachments: m.attachments,
      embeds: m.embeds,
      components: m.components,
      pinned: false,
      flags: m.flags,
      ...(m.webhookId ? { webhook_id: m.webhookId, application_id: applicationId } : {}),
      ...(m.reference
        ? {
            message_reference: { type: 0, ...m.reference },
            referenced_message: referenced && depth === 0 ? messageJson(referenced, 1) : null,
          }
        : {}),
      ...(m.interaction
        ? {
            interaction_metadata: {
              id: m.interaction.id,
              type: m.interaction.type,
              user: user(m.interaction.userId),
              authorizing_integration_owners: {},
              ...(m.interaction.name ? { name: m.interaction.name } : {}),
            },
          }
        : {}),
    };
  }

  function storeMessage(fields: Partial<StoredMessage> & { channelId: string; authorId: string }): StoredMessage {
    const channel = channels.get(fields.channelId);
    const m: StoredMessage = {
      id: state.nextId(),
      content: "",
      components: [],
      embeds: [],
      attachments: [],
      type: MessageType.Default,
      flags: 0,
      ephemeral: false,
      timestamp: new Date().toISOString(),
      editedTimestamp: null,
      mentionIds: mentionedIds(fields.content ?? ""),
      ...(channel?.guildId ? { guildId: channel.guildId } : {}),
      ...fields,
    };
    messagesById.set(m.id, m);
    if (channel && !m.ephemeral) channel.lastMessageId = m.id;
    return m;
  }

  function applyBody(m: StoredMessage, body: Json, files: StoredFile[], kind: MessageWrite["kind"]): void {
    if (typeof body.content === "string") {
      m.content = body.content;
      m.mentionIds = mentionedIds(body.content);
    }
    const repliedTo = m.reference && kind === "create" ? messagesById.get(m.reference.message_id)?.authorId : undefined;
    messageWrites.push({
      kind,
      channelId: m.channelId,
      messageId: m.id,
      content: m.content,
      allowedMentions: structuredClone(body.allowed_mentions),
      pings: pingsOf(m.content, body.allowed_mentions, repliedTo),
    });
    if (body.embeds !== undefined) m.embeds = arr(body.embeds) ?? [];
    if (body.components !== undefined) m.components = arr(body.components) ?? [];
    if (files.length || body.attachments !== undefined) {
      m.attachments = files.map((f, i) => ({
        id: state.nextId(),
        filename: f.name,
        size: f.size,
        content_type: f.contentType,
        url: `${state.origin}/attachments/${m.channelId}/${i}/${encodeURIComponent(f.name)}`,
        proxy_url: `${state.origin}/attachments/${m.channelId}/${i}`,
      }));
    }
  }

  return state;
}

/**
 * Discord refuses a message with nothing in it, content over 2,000 characters, allowed_mentions it
 * cannot read, and buttons it cannot show.
 */
export function checkMessageBody(body: Json, files: StoredFile[], creating: boolean): Answer | undefined {
  const mentionsRefused = allowedMentionsProblem(body.allowed_mentions);
  if (mentionsRefused) return formError(mentionsRefused.field, mentionsRefused.code, mentionsRefused.message);
  const buttonRefused = buttonsProblem(body.components);
  if (buttonRefused) return formError("components", "COMPONENT_INVALID", buttonRefused);
  const content = str(body.content) ?? "";
  if (content.length > 2000) return formError("content", "BASE_TYPE_MAX_LENGTH", "Must be 2000 or fewer in length.");
  const empty =
    !content &&
    !arr(body.embeds)?.length &&
    !arr(body.components)?.length &&
    !files.length &&
    !body.sticker_ids &&
    !body.poll;
  if (creating && empty) return error(400, 50006, "Cannot send an empty message");
  return undefined;
}

const LINK_STYLE = 5;

/**
 * Discord's rules for buttons in action rows: at most 5 in a row; a link button (style 5) has an
 * http(s) url of at most 512 characters and no custom_id, every other button a custom_id and no url.
 */
function buttonsProblem(components: unknown): string | undefined {
  for (const row of (arr(components) ?? []) as Array<{ components?: unknown }>) {
    const inner = (arr(row?.components) ?? []) as Array<{
      type?: number;
      style?: number;
      url?: unknown;
      custom_id?: unknown;
    }>;
    if (inner.length > 5) return "An action row holds at most 5 components.";
    for (const button of inner.filter((component) => component?.type === 2)) {
      const url = str(button.url);
      if (button.style === LINK_STYLE) {
        if (!url || url.length > 512 || !/^https?:\/\//.test(url)) return "A link button needs an http(s) url.";
        if (button.custom_id !== undefined) return "A link button cannot have a custom_id.";
      } else if (url !== undefined || str(button.custom_id) === undefined)
        return "A button that is not a link needs a custom_id and no url.";
    }
  }
  return undefined;
}
