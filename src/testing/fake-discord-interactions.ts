// The fake Discord's interactions, both ways: what "users" do (click a button, run a slash command,
// submit a modal), dispatched as INTERACTION_CREATE, and how the bot answers: the one callback
// (POST /interactions/{id}/{token}/callback: a reply, a deferral, an update, a modal) and the
// interaction webhooks (follow-ups, and reading, editing or deleting @original or a follow-up).
import { randomBytes } from "node:crypto";
import type { FakeDiscord } from "./fake-discord.js";
import type { FakeGateway } from "./fake-discord-gateway.js";
import {
  Callback,
  ChannelType,
  ComponentType,
  InteractionType,
  MEMBER_PERMISSIONS,
  MessageFlag,
  MessageType,
  arr,
  error,
  formError,
  noContent,
  ok,
  route,
  unknownMessage,
  unknownWebhook,
  type Answer,
  type Interaction,
  type Json,
  type Route,
  type RouteContext,
  type StoredMessage,
} from "./fake-discord-protocol.js";
import { checkMessageBody, type DiscordState } from "./fake-discord-state.js";

export interface FakeInteractions extends Pick<FakeDiscord, "clickButton" | "runCommand" | "submitModal" | "modalOf"> {
  routes: Route[]; // the callback's and the interaction webhooks', which need no bot token
}

export function createInteractions(state: DiscordState, gateway: FakeGateway): FakeInteractions {
  const { botUserId, applicationId, channels, messagesById, interactions, user, memberJson, messageJson, later } =
    state;
  const { liveSessions, dispatch, broadcastMessage } = gateway;

  function newInteraction(fields: Omit<Interaction, "id" | "token" | "followUps">): Interaction {
    // Interaction tokens are long opaque strings; base64url keeps them safe in a URL path.
    const interaction: Interaction = {
      ...fields,
      id: state.nextId(),
      token: `aW50ZXJhY3Rpb24${randomBytes(48).toString("base64url")}`,
      followUps: new Set(),
    };
    interactions.set(interaction.id, interaction);
    state.interactionsByToken.set(interaction.token, interaction);
    return interaction;
  }

  function interactionJson(i: Interaction, data: Json, message?: StoredMessage): Json {
    const channel = channels.get(i.channelId);
    return {
      id: i.id,
      application_id: applicationId,
      type: i.type,
      data,
      token: i.token,
      version: 1,
      channel: channel
        ? { ...state.channelJson(channel), ...(i.guildId ? { permissions: MEMBER_PERMISSIONS } : {}) }
        : { id: i.channelId, type: ChannelType.GuildText },
      channel_id: i.channelId, // deprecated by Discord but still sent
      ...(i.guildId
        ? {
            guild_id: i.guildId,
            guild: { id: i.guildId, locale: "en-US", features: [] },
            guild_locale: "en-US",
            member: { ...memberJson(i.userId, i.guildId, true), permissions: MEMBER_PERMISSIONS },
          }
        : { user: user(i.userId) }),
      ...(message ? { message: messageJson(message) } : {}),
      app_permissions: MEMBER_PERMISSIONS,
      locale: "en-US",
      entitlements: [],
      attachment_size_limit: 10 * 1024 * 1024,
      authorizing_integration_owners: i.guildId ? { "0": i.guildId } : { "1": i.userId },
      context: i.guildId ? 0 : 1, // 0 guild, 1 the bot's DM
    };
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
      if (type === Callback.ChannelMessage) {
        const refused = checkMessageBody(data, files, true);
        if (refused) return refused;
      }
      message = state.storeMessage({
        channelId: i.channelId,
        authorId: botUserId,
        webhookId: applicationId,
        type: i.type === InteractionType.ApplicationCommand ? MessageType.ChatInputCommand : MessageType.Default,
        flags: (flags & MessageFlag.Ephemeral) | (type === Callback.DeferredChannelMessage ? MessageFlag.Loading : 0),
        ephemeral: (flags & MessageFlag.Ephemeral) !== 0,
        interaction: { id: i.id, type: i.type, userId: i.userId, ...(i.name ? { name: i.name } : {}) },
      });
      if (type === Callback.ChannelMessage) state.applyBody(message, data, files, "create");
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
        state.applyBody(message, data, files, "edit");
        message.editedTimestamp = new Date().toISOString();
        const edited = message;
        later(() => broadcastMessage("MESSAGE_UPDATE", edited));
      }
    } else if (type === Callback.Modal) {
      // Discord's limits: a custom_id of up to 100 characters, a title of up to 45, 1 to 5 top-level
      // components; and a modal cannot answer a modal.
      if (i.type === InteractionType.ModalSubmit)
        return error(400, 40043, "Interaction type not supported for this callback");
      const components = arr(data.components) ?? [];
      if (typeof data.custom_id !== "string" || data.custom_id.length > 100)
        return formError("data.custom_id", "BASE_TYPE_REQUIRED", "This field is required");
      if (typeof data.title !== "string" || data.title.length > 45)
        return formError("data.title", "BASE_TYPE_MAX_LENGTH", "Must be 45 or fewer in length.");
      if (components.length < 1 || components.length > 5)
        return formError("data.components", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 5 in length.");
      i.modal = { customId: data.custom_id, title: data.title, components };
    } else if (type !== Callback.Autocomplete) {
      return formError("type", "BASE_TYPE_CHOICES", `Value must be one of {4, 5, 6, 7, 8, 9}.`);
    }
    i.callbackType = type;
    if (query.with_response !== "true") return { status: 204 };
    return {
      status: 200,
      body: {
        interaction: {
          id: i.id,
          type: i.type,
          ...(message
            ? {
                response_message_id: message.id,
                response_message_loading: (message.flags & MessageFlag.Loading) !== 0,
                response_message_ephemeral: message.ephemeral,
              }
            : {}),
        },
        resource: { type, ...(message ? { message: messageJson(message) } : {}) },
      },
    };
  }

  /** The webhook of an interaction (application id + token), usable once the interaction is acknowledged. */
  function webhookInteraction(params: string[]): Interaction | undefined {
    const [appId = "", webhookToken = ""] = params;
    const i = state.interactionsByToken.get(webhookToken);
    return appId === applicationId && i && i.callbackType !== undefined ? i : undefined;
  }
  function webhookMessage(i: Interaction, messageId: string): StoredMessage | undefined {
    const id = messageId === "@original" ? i.originalId : messageId;
    return id && (id === i.originalId || i.followUps.has(id)) ? messagesById.get(id) : undefined;
  }

  const routes: Route[] = [
    route("POST", "/interactions/:id/:token/callback", interactionCallback, false),
    // Interaction webhooks: follow-ups, and reading/editing/deleting @original or a follow-up.
    route(
      "POST",
      "/webhooks/:id/:token",
      ({ params, query, body, files }) => {
        const i = webhookInteraction(params);
        if (!i) return unknownWebhook();
        const refused = checkMessageBody(body, files, true);
        if (refused) return refused;
        const flags = typeof body.flags === "number" ? body.flags : 0;
        const m = state.storeMessage({
          channelId: i.channelId,
          authorId: botUserId,
          webhookId: applicationId,
          flags: flags & MessageFlag.Ephemeral,
          ephemeral: (flags & MessageFlag.Ephemeral) !== 0,
          interaction: { id: i.id, type: i.type, userId: i.userId },
        });
        state.applyBody(m, body, files, "create");
        i.followUps.add(m.id);
        later(() => broadcastMessage("MESSAGE_CREATE", m));
        return query.wait === "true" ? ok(messageJson(m)) : noContent();
      },
      false,
    ),
    route(
      "GET",
      "/webhooks/:id/:token/messages/:token",
      ({ params }) => {
        const i = webhookInteraction(params);
        const m = i && webhookMessage(i, params[2] ?? "");
        return !i ? unknownWebhook() : m ? ok(messageJson(m)) : unknownMessage();
      },
      false,
    ),
    route(
      "PATCH",
      "/webhooks/:id/:token/messages/:token",
      ({ params, body, files }) => {
        const i = webhookInteraction(params);
        const m = i && webhookMessage(i, params[2] ?? "");
        if (!i) return unknownWebhook();
        if (!m) return unknownMessage();
        const refused = checkMessageBody(body, files, false);
        if (refused) return refused;
        state.applyBody(m, body, files, m.flags & MessageFlag.Loading ? "create" : "edit");
        if (m.flags & MessageFlag.Loading)
          m.flags &= ~MessageFlag.Loading; // a deferred reply's first edit is its content
        else m.editedTimestamp = new Date().toISOString();
        later(() => broadcastMessage("MESSAGE_UPDATE", m));
        return ok(messageJson(m));
      },
      false,
    ),
    route(
      "DELETE",
      "/webhooks/:id/:token/messages/:token",
      ({ params }) => {
        const i = webhookInteraction(params);
        const m = i && webhookMessage(i, params[2] ?? "");
        if (!i) return unknownWebhook();
        if (!m) return unknownMessage();
        messagesById.delete(m.id);
        return noContent();
      },
      false,
    ),
  ];

  /** Sends a new interaction to every live session; returns what the test needs to find its answers. */
  function deliver(i: Interaction, data: Json, message?: StoredMessage): { interactionId: string; token: string } {
    const payload = interactionJson(i, data, message);
    for (const s of liveSessions()) dispatch(s, "INTERACTION_CREATE", payload);
    return { interactionId: i.id, token: i.token };
  }

  return {
    routes,
    async clickButton(input) {
      const channel = state.channelFor(input.channelId, input.guildId, "clickButton");
      const message = messagesById.get(input.messageId);
      if (!message || message.channelId !== channel.id)
        throw new Error(`fake-discord: no message ${input.messageId} in channel ${channel.id}`);
      // The fake does not check that the button is still on the message, so a test can play a
      // click from a stale client (Discord itself rejects those with "This interaction failed").
      const i = newInteraction({
        type: InteractionType.MessageComponent,
        channelId: channel.id,
        ...(channel.guildId ? { guildId: channel.guildId } : {}),
        userId: input.userId,
        componentMessageId: message.id,
      });
      return deliver(i, { custom_id: input.customId, component_type: 2 }, message);
    },
    async runCommand(input) {
      const channel = state.channelFor(input.channelId, input.guildId, "runCommand");
      const guildCommand = channel.guildId
        ? state.commandScopes.get(channel.guildId)?.find((c) => c.name === input.name)
        : undefined;
      const command = guildCommand ?? state.commandScopes.get("global")?.find((c) => c.name === input.name);
      if (!command) {
        throw new Error(
          `fake-discord: /${input.name} is not registered (globally${channel.guildId ? ` or in guild ${channel.guildId}` : ""}), so no user could run it`,
        );
      }
      const i = newInteraction({
        type: InteractionType.ApplicationCommand,
        channelId: channel.id,
        ...(channel.guildId ? { guildId: channel.guildId } : {}),
        userId: input.userId,
        name: input.name,
      });
      return deliver(i, {
        id: command.id,
        name: input.name,
        type: 1,
        ...(input.options ? { options: input.options } : {}),
        ...(guildCommand ? { guild_id: channel.guildId } : {}),
      });
    },
    modalOf: (interactionId) => structuredClone(interactions.get(interactionId)?.modal),
    async submitModal(input) {
      const opened = interactions.get(input.interactionId);
      if (!opened?.modal) throw new Error(`fake-discord: interaction ${input.interactionId} showed no modal`);
      const channel = state.channelFor(opened.channelId, opened.guildId, "submitModal");
      // What Discord sends back mirrors the modal: a label holds its one input, an action row its inputs.
      type Shown = {
        type?: number;
        id?: number;
        component?: { type?: number; custom_id?: string };
        components?: Array<{ type?: number; custom_id?: string }>;
      };
      const valueOf = (field?: { type?: number; custom_id?: string }) => ({
        type: ComponentType.TextInput,
        custom_id: field?.custom_id ?? "",
        value: input.values[field?.custom_id ?? ""] ?? "",
      });
      const components = (opened.modal.components as Shown[]).map((shown, index) =>
        shown.type === ComponentType.Label
          ? { type: ComponentType.Label, id: shown.id ?? index + 1, component: valueOf(shown.component) }
          : { type: ComponentType.ActionRow, components: (shown.components ?? []).map(valueOf) },
      );
      const message = opened.componentMessageId ? messagesById.get(opened.componentMessageId) : undefined;
      const i = newInteraction({
        type: InteractionType.ModalSubmit,
        channelId: channel.id,
        ...(channel.guildId ? { guildId: channel.guildId } : {}),
        userId: opened.userId,
        ...(message ? { componentMessageId: message.id } : {}),
      });
      return deliver(i, { custom_id: opened.modal.customId, components }, message);
    },
  };
}
