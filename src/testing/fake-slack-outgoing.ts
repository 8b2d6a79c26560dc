// What the fake Slack sends an app: event_callback envelopes (storing what a person wrote, so it is
// part of the conversation a test reads back), block_actions payloads with the response_url they
// carry and what a POST to that URL does to the message, and the POST signed as Slack signs it.
import { createHmac, randomBytes, randomUUID } from "node:crypto";
import { request } from "undici";
import type { EventTeam } from "./fake-slack-oauth.js";
import { findElement, type BotIdentity, type MessageStore } from "./fake-slack-messages.js";

type Args = Record<string, unknown>;
const str = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);

export interface SigningOverrides {
  signingSecret?: string; // sign with another secret to produce a bad signature
  timestamp?: number; // unix seconds; an old one makes the request stale
}
export interface BlockActionInput {
  userId: string;
  channel: string;
  messageTs: string;
  actionId: string;
  /** The clicked button's value; a link button has none. */
  value?: string;
  blockId?: string;
  /** The same click delivered again carries the trigger_id it had (default: a new click, a new trigger). */
  triggerId?: string;
  /** The workspace the click comes from (default the fake's); null as in an org-wide install. */
  teamId?: string | null;
  /** An Enterprise Grid org: `user.team_id` then says the org (E...), `team` and `enterprise` carry it. */
  enterpriseId?: string;
}

export interface OutgoingContext {
  store: MessageStore;
  bot: BotIdentity;
  signingSecret: string;
  origin: () => string;
  /** A trigger_id for a click, which views.open then accepts. */
  issueTrigger: (userId: string) => string;
}

export function createOutgoing(context: OutgoingContext) {
  const { store, bot, signingSecret, origin, issueTrigger } = context;
  const { teamId, appId, botUserId } = bot;
  const { nextTs, channelMessages, findMessage, botMessage, asMessageReply } = store;
  const responseUrls = new Map<string, { channel: string; messageTs: string }>();

  function eventCallback(
    event: Record<string, unknown>,
    eventId: string,
    from?: EventTeam,
    authorizedUser?: string,
  ): Args {
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
      if (inner.type === "message" && channel)
        inner.channel_type ??= channel.startsWith("D") ? "im" : channel.startsWith("G") ? "group" : "channel";
      // What the person typed is part of the conversation a test may read back.
      if (channel && typeof inner.ts === "string" && !inner.subtype && !findMessage(channel, inner.ts)) {
        channelMessages(channel).push({
          ts: inner.ts,
          text: str(inner.text) ?? "",
          ...(str(inner.user) ? { user: str(inner.user) } : {}),
          ...(str(inner.thread_ts) ? { thread_ts: str(inner.thread_ts) } : {}),
        });
      }
    }
    // An org-wide install's authorization names the org, not the workspace (team_id null).
    return {
      token: "fake-verification-token",
      team_id: team,
      context_team_id: team,
      context_enterprise_id: enterprise,
      ...(enterprise ? { enterprise_id: enterprise } : {}),
      api_app_id: appId,
      event: inner,
      type: "event_callback",
      event_id: eventId,
      event_time: Math.floor(Date.now() / 1000),
      authorizations: [
        {
          enterprise_id: enterprise,
          team_id: from?.orgWide ? null : team,
          user_id: authorizedUser ?? from?.botUserId ?? botUserId,
          is_bot: authorizedUser === undefined,
          is_enterprise_install: from?.orgWide === true,
        },
      ],
      is_ext_shared_channel: false,
      event_context: `4-${randomBytes(12).toString("base64url")}`,
    };
  }

  function blockActionPayload(action: BlockActionInput): Args {
    const original = findMessage(action.channel, action.messageTs);
    const element = findElement(original?.blocks, action.actionId, action.value ?? "");
    const responseId = randomUUID();
    responseUrls.set(responseId, { channel: action.channel, messageTs: action.messageTs });
    const team = action.teamId === undefined ? teamId : action.teamId;
    const grid = action.enterpriseId ? { enterprise_id: action.enterpriseId, enterprise_name: "Fake Org" } : {};
    return {
      type: "block_actions",
      api_app_id: appId,
      token: "fake-verification-token",
      is_enterprise_install: false,
      enterprise: action.enterpriseId ? { id: action.enterpriseId, name: "Fake Org" } : null,
      // In an Enterprise Grid org, user.team_id is the org's id, not the workspace's.
      user: {
        id: action.userId,
        username: `user-${action.userId.toLowerCase()}`,
        name: `user-${action.userId.toLowerCase()}`,
        team_id: action.enterpriseId ?? team ?? teamId,
      },
      team: team === null ? null : { id: team, domain: team.toLowerCase(), ...grid },
      container: { type: "message", message_ts: action.messageTs, channel_id: action.channel, is_ephemeral: false },
      channel: { id: action.channel, name: `channel-${action.channel.toLowerCase()}` },
      message: asMessageReply(original ?? botMessage(action.messageTs, { text: "" })),
      trigger_id: action.triggerId ?? issueTrigger(action.userId),
      response_url: `${origin()}/response/${responseId}`,
      state: { values: {} },
      actions: [
        {
          type: element?.type === "feedback_buttons" ? "feedback_buttons" : "button",
          action_id: action.actionId,
          block_id: action.blockId ?? element?.blockId ?? randomBytes(3).toString("hex"),
          text: element?.text ?? { type: "plain_text", text: action.value ?? action.actionId, emoji: true },
          ...(action.value === undefined ? {} : { value: action.value }),
          ...(element?.url ? { url: element.url } : {}), // a link button's click says where it went
          action_ts: `${(Date.now() / 1000).toFixed(6)}`,
        },
      ],
    };
  }

  /** What a POST to a response_url does (JSON like Bolt's respond()); false once the URL is unknown. */
  function applyResponse(id: string, args: Args): boolean {
    const target = responseUrls.get(id);
    if (!target) return false;
    const original = findMessage(target.channel, target.messageTs);
    if (args.delete_original === true || args.delete_original === "true") {
      const list = store.channels.get(target.channel) ?? [];
      if (original) list.splice(list.indexOf(original), 1);
    } else if ((args.replace_original === true || args.replace_original === "true") && original) {
      if (typeof args.text === "string") original.text = args.text;
      if (Array.isArray(args.blocks)) original.blocks = args.blocks;
    } else if (args.response_type === "in_channel") {
      channelMessages(target.channel).push(
        botMessage(nextTs(), {
          text: str(args.text) ?? "",
          ...(Array.isArray(args.blocks) ? { blocks: args.blocks } : {}),
          ...(str(args.thread_ts) ? { thread_ts: str(args.thread_ts) } : {}),
        }),
      );
    } // anything else is ephemeral: only the clicking user would see it, so it is not stored
    return true;
  }

  /** POSTs a body signed exactly like Slack: hex HMAC-SHA256 of `v0:<timestamp>:<raw body>`. */
  async function signedPost(
    url: string,
    body: string,
    contentType: string,
    o: SigningOverrides,
    headers: Record<string, string> = {},
  ) {
    const timestamp = o.timestamp ?? Math.floor(Date.now() / 1000);
    const signature = createHmac("sha256", o.signingSecret ?? signingSecret)
      .update(`v0:${timestamp}:${body}`)
      .digest("hex");
    // undici's request API, not the global fetch: the sender stands for Slack's servers, whose work is not the bot's.
    const response = await request(url, {
      method: "POST",
      body,
      headers: {
        ...headers,
        "Content-Type": contentType,
        "X-Slack-Request-Timestamp": String(timestamp),
        "X-Slack-Signature": `v0=${signature}`,
      },
    });
    return { status: response.statusCode, body: await response.body.text() };
  }

  return { eventCallback, blockActionPayload, applyResponse, signedPost };
}
