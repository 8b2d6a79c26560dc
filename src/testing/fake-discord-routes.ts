// The fake Discord's REST routes for the bot (all but the interactions', in
// fake-discord-interactions.ts): the gateway URL, users and DMs, the application, channels and their
// messages (create, read, edit, delete, react), threads, and registering application commands.
import {
  ChannelType,
  Intent,
  MessageType,
  arr,
  byId,
  error,
  formError,
  isThread,
  noContent,
  ok,
  route,
  str,
  unknownChannel,
  unknownMessage,
  type Answer,
  type Channel,
  type Json,
  type Route,
  type StoredMessage,
} from "./fake-discord-protocol.js";
import type { FakeGateway } from "./fake-discord-gateway.js";
import { checkMessageBody, type DiscordState } from "./fake-discord-state.js";

export function createRestRoutes(state: DiscordState, gateway: FakeGateway): Route[] {
  const {
    botUserId,
    applicationId,
    channels,
    messagesById,
    commandScopes,
    user,
    nextId,
    later,
    channelJson,
    messageJson,
  } = state;
  const { liveSessions, dispatch, broadcastMessage } = gateway;
  const botUser = () => ({
    ...user(botUserId),
    verified: true,
    mfa_enabled: false,
    flags: 0,
    email: null,
    locale: "en-US",
  });
  const applicationJson = () => ({
    id: applicationId,
    name: state.users.get(botUserId)?.username,
    icon: null,
    description: "",
    summary: "",
    type: null,
    bot_public: true,
    bot_require_code_grant: false,
    verify_key: "0".repeat(64),
    flags: state.appFlags,
    team: null,
    hook: true,
    bot: user(botUserId),
    owner: user("1100000000000000999"),
    approximate_guild_count: state.guilds.size,
    redirect_uris: [],
    interactions_endpoint_url: null,
    integration_types_config: { "0": {} },
    install_params: { scopes: ["bot", "applications.commands"], permissions: "0" },
  });

  function channelMessage(params: string[]): { channel?: Channel; message?: StoredMessage } {
    const channel = channels.get(params[0] ?? "");
    const message = messagesById.get(params[1] ?? "");
    return {
      channel,
      message: message && message.channelId === channel?.id && !message.ephemeral ? message : undefined,
    };
  }

  function registerCommands(scope: string, list: unknown[], replace: boolean): Json[] {
    const existing = commandScopes.get(scope) ?? [];
    const made = list.map((raw) => {
      const input = raw as Json;
      const previous = existing.find((c) => c.name === input.name && (c.type ?? 1) === (input.type ?? 1));
      return {
        type: 1,
        description: "",
        options: [],
        default_member_permissions: null,
        nsfw: false,
        contexts: null,
        integration_types: [0],
        name_localizations: null,
        description_localizations: null,
        ...input,
        id: previous?.id ?? nextId(),
        application_id: applicationId,
        version: nextId(),
        ...(scope === "global" ? {} : { guild_id: scope }),
      } as Json;
    });
    commandScopes.set(
      scope,
      replace ? made : [...existing.filter((c) => !made.some((m) => m.name === c.name)), ...made],
    );
    return made;
  }
  const scopeOf = (params: string[]) => (params.length > 1 ? (params[1] ?? "") : "global");
  const checkApp = (params: string[]) =>
    params[0] === applicationId ? undefined : error(403, 50001, "Missing Access");

  function startThread(parent: Channel, id: string, body: Json, type: number): Answer {
    if (!parent.guildId || isThread(parent.type))
      return error(400, 50024, "Cannot execute action on this channel type");
    if (channels.has(id)) return error(400, 160004, "A thread has already been created for this message");
    const thread: Channel = {
      id,
      type,
      name: str(body.name) ?? "thread",
      guildId: parent.guildId,
      parentId: parent.id,
      ownerId: botUserId,
      lastMessageId: null,
    };
    channels.set(id, thread);
    later(() => {
      for (const s of liveSessions(Intent.Guilds))
        dispatch(s, "THREAD_CREATE", { ...channelJson(thread), newly_created: true });
    });
    return { status: 201, body: channelJson(thread) };
  }

  function deleteCommand(scope: string, id: string): Answer {
    const list = commandScopes.get(scope) ?? [];
    if (!list.some((c) => c.id === id)) return error(404, 10063, "Unknown application command");
    commandScopes.set(
      scope,
      list.filter((c) => c.id !== id),
    );
    return noContent();
  }

  return [
    route("GET", "/gateway", () => ok({ url: gateway.url() }), false),
    route("GET", "/gateway/bot", () =>
      ok({
        url: gateway.url(),
        shards: 1,
        session_start_limit: { total: 1000, remaining: 999, reset_after: 86_400_000, max_concurrency: 1 },
      }),
    ),
    route("GET", "/users/@me", () => ok(botUser())),
    route("GET", "/users/:id", ({ params }) => ok(user(params[0] ?? ""))),
    // A server's member, as GET /guilds/{guild}/members/{user} answers it (Unknown Guild for another server).
    route("GET", "/guilds/:id/members/:id", ({ params }) =>
      state.guilds.has(params[0] ?? "")
        ? ok(state.memberJson(params[1] ?? "", params[0] ?? "", true))
        : error(404, 10004, "Unknown Guild"),
    ),
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
    route("POST", "/channels/:id/typing", ({ params }) =>
      channels.has(params[0] ?? "") ? noContent() : unknownChannel(),
    ),
    route("GET", "/channels/:id/messages", ({ params, query }) => {
      if (!channels.has(params[0] ?? "")) return unknownChannel();
      const limit = Math.min(Number(query.limit ?? 50) || 50, 100);
      let list = [...messagesById.values()]
        .filter((m) => m.channelId === params[0] && !m.ephemeral)
        .sort(byId)
        .reverse(); // newest first
      if (query.before) list = list.filter((m) => BigInt(m.id) < BigInt(query.before ?? "0"));
      if (query.after)
        list = list
          .filter((m) => BigInt(m.id) > BigInt(query.after ?? "0"))
          .reverse()
          .slice(0, limit)
          .reverse();
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
      const m = state.storeMessage({
        channelId: channel.id,
        authorId: botUserId,
        flags: typeof body.flags === "number" ? body.flags : 0,
        ...(target
          ? {
              type: MessageType.Reply,
              reference: {
                message_id: target.id,
                channel_id: target.channelId,
                ...(target.guildId ? { guild_id: target.guildId } : {}),
              },
            }
          : {}),
      });
      state.applyBody(m, body, files, "create");
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
      state.applyBody(message, body, files, "edit");
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
          dispatch(s, "MESSAGE_DELETE", {
            id: message.id,
            channel_id: message.channelId,
            ...(message.guildId ? { guild_id: message.guildId } : {}),
          });
        }
      });
      return noContent();
    }),
    route("PUT", "/channels/:id/messages/:id/reactions/:token/@me", ({ params }) =>
      channelMessage(params).message ? noContent() : unknownMessage(),
    ),
    route("DELETE", "/channels/:id/messages/:id/reactions/:token/@me", ({ params }) =>
      channelMessage(params).message ? noContent() : unknownMessage(),
    ),
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
      return startThread(
        channel,
        nextId(),
        body,
        typeof body.type === "number" ? body.type : ChannelType.PrivateThread,
      );
    }),
    route(
      "GET",
      "/applications/:id/commands",
      ({ params }) => checkApp(params) ?? ok(commandScopes.get("global") ?? []),
    ),
    route(
      "GET",
      "/applications/:id/guilds/:id/commands",
      ({ params }) => checkApp(params) ?? ok(commandScopes.get(scopeOf(params)) ?? []),
    ),
    route(
      "PUT",
      "/applications/:id/commands",
      ({ params, body }) => checkApp(params) ?? ok(registerCommands("global", arr(body) ?? [], true)),
    ),
    route(
      "PUT",
      "/applications/:id/guilds/:id/commands",
      ({ params, body }) => checkApp(params) ?? ok(registerCommands(scopeOf(params), arr(body) ?? [], true)),
    ),
    route(
      "POST",
      "/applications/:id/commands",
      ({ params, body }) => checkApp(params) ?? { status: 201, body: registerCommands("global", [body], false)[0] },
    ),
    route(
      "POST",
      "/applications/:id/guilds/:id/commands",
      ({ params, body }) =>
        checkApp(params) ?? { status: 201, body: registerCommands(scopeOf(params), [body], false)[0] },
    ),
    route("DELETE", "/applications/:id/commands/:id", ({ params }) => deleteCommand("global", params[1] ?? "")),
    route("DELETE", "/applications/:id/guilds/:id/commands/:id", ({ params }) =>
      deleteCommand(params[1] ?? "", params[2] ?? ""),
    ),
  ];
}
