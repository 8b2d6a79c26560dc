// The fake Slack's messages: each channel's list (posts, updates, stream appends, deletes, what
// people wrote in sent events), the Web API methods that write and read it (chat.*, reactions.add,
// conversations.info / replies / history, paged with cursors as Slack does), and the block checks
// Slack makes before it shows a message.

type Args = Record<string, unknown>;
type Reply = Record<string, unknown>;
const str = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);
const fail = (error: string): Reply => ({ ok: false, error });

export interface FakeMessage {
  ts: string;
  text?: string;
  blocks?: unknown[];
  user?: string;
  bot_id?: string;
  thread_ts?: string;
  reactions?: string[];
  /** Files shared with it, as listings carry them (id and name here). */
  files?: Array<{ id: string; name: string }>;
  bot_profile?: { name: string };
}

/** Who the bot is, as its messages and listings name it. */
export interface BotIdentity {
  teamId: string;
  botUserId: string;
  botId: string;
  appId: string;
}

/** The channels' messages and the helpers every part of the fake that reads or writes them shares. */
export interface MessageStore {
  channels: Map<string, FakeMessage[]>;
  /** A new ts, strictly increasing like Slack's. */
  nextTs(): string;
  /** The channel's list, created empty if it has none yet. */
  channelMessages(channel: string): FakeMessage[];
  findMessage(channel: string, ts: string): FakeMessage | undefined;
  botMessage(ts: string, fields: Partial<FakeMessage>): FakeMessage;
  /** A message as a Web API reply carries it. */
  asMessageReply(m: FakeMessage): Reply;
}

export function createMessageStore(bot: BotIdentity): MessageStore {
  const channels = new Map<string, FakeMessage[]>();
  let lastMicros = 0;
  return {
    channels,
    nextTs() {
      lastMicros = Math.max(lastMicros + 1, Date.now() * 1000); // strictly increasing, like real ts
      return `${Math.floor(lastMicros / 1e6)}.${String(lastMicros % 1e6).padStart(6, "0")}`;
    },
    channelMessages(channel) {
      let list = channels.get(channel);
      if (!list) channels.set(channel, (list = []));
      return list;
    },
    findMessage: (channel, ts) => channels.get(channel)?.find((m) => m.ts === ts),
    botMessage: (ts, fields) => ({ ts, user: bot.botUserId, bot_id: bot.botId, ...fields }),
    asMessageReply: (m) => ({ type: "message", app_id: bot.appId, team: bot.teamId, ...m }),
  };
}

/** Compares Slack timestamps exactly ("1730000000.000100"); parseFloat would lose the micro part. */
export function compareTs(a: string, b: string): number {
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

/** What Slack's context_actions block takes (Block Kit reference): feedback buttons and icon buttons only. */
const CONTEXT_ACTIONS_ELEMENTS = ["feedback_buttons", "icon_button"];

/**
 * Slack refuses blocks it cannot show: here, a section whose text is over its 3,000 characters, a
 * context_actions block with another element than its two kinds, and a button whose url is not
 * http(s) or is over 3,000 characters.
 */
function blocksProblem(blocks: unknown, unsupported: string[] = []): string | undefined {
  type Element = { type?: string; url?: unknown };
  type Block = { type?: string; text?: { text?: unknown }; elements?: Element[] };
  for (const block of (Array.isArray(blocks) ? blocks : []) as Block[]) {
    if (unsupported.includes(block.type ?? "")) return "invalid_blocks";
    if (block.type === "section" && typeof block.text?.text === "string" && block.text.text.length > 3000)
      return "invalid_blocks";
    const elements = Array.isArray(block.elements) ? block.elements : [];
    if (block.type === "context_actions" && elements.some((e) => !CONTEXT_ACTIONS_ELEMENTS.includes(e?.type ?? "")))
      return "invalid_blocks";
    const badUrl = (url: unknown) => typeof url !== "string" || url.length > 3000 || !/^https?:\/\//.test(url);
    if (elements.some((e) => e?.type === "button" && e.url !== undefined && badUrl(e.url))) return "invalid_blocks";
  }
  return undefined;
}

/** Finds a block element by action_id so a block action can carry its real block_id and label. */
export function findElement(
  blocks: unknown[] | undefined,
  actionId: string,
  value: string,
): { blockId?: string; text?: unknown; type?: string; url?: string } | undefined {
  type Element = {
    action_id?: string;
    type?: string;
    text?: unknown;
    url?: string;
    positive_button?: { text?: unknown; value?: string };
    negative_button?: { text?: unknown; value?: string };
  };
  for (const block of (blocks ?? []) as Array<{ block_id?: string; elements?: unknown[]; accessory?: unknown }>) {
    const candidates = [...(block.elements ?? []), block.accessory] as Array<Element | undefined>;
    const hit = candidates.find((el) => el?.action_id === actionId);
    // Feedback buttons send the value and label of the one of their two buttons that was clicked.
    const pressed =
      hit?.type === "feedback_buttons"
        ? [hit.positive_button, hit.negative_button].find((button) => button?.value === value)
        : undefined;
    if (hit) return { blockId: block.block_id, text: pressed?.text ?? hit.text, type: hit.type, url: hit.url };
  }
  return undefined;
}

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
 * chat.postMessage / update / delete / postEphemeral / startStream / appendStream / stopStream,
 * reactions.add and conversations.info / replies / history, on the store's messages. Blocks of
 * the `unsupported` types are refused with invalid_blocks.
 */
export function createMessageMethods(
  store: MessageStore,
  bot: BotIdentity,
  unsupported: string[],
): Record<string, (a: Args) => Reply> {
  const { channels, nextTs, channelMessages, findMessage, botMessage, asMessageReply } = store;
  const streaming = new Set<string>(); // "channel/ts" of streams not yet stopped

  /**
   * One page of a listing (`limit`, default 100, at most 1,000) from `cursor`, an opaque string as in
   * Slack: each message as Slack lists it, has_more, and response_metadata.next_cursor ("" on the last page).
   */
  function page(list: FakeMessage[], a: Args, shape: (items: FakeMessage[], first: boolean) => FakeMessage[]): Reply {
    const cursor = str(a.cursor);
    const start = cursor
      ? Number(/^next:(\d+)$/.exec(Buffer.from(cursor, "base64").toString("utf8"))?.[1] ?? Number.NaN)
      : 0;
    if (!Number.isInteger(start)) return fail("invalid_cursor");
    const limit = Math.min(Math.max(Number(a.limit ?? 100) || 100, 1), 1000);
    const items = list.slice(start, start + limit);
    const more = start + limit < list.length;
    return {
      ok: true,
      messages: shape(items, start === 0).map(listedMessage),
      has_more: more,
      response_metadata: { next_cursor: more ? Buffer.from(`next:${start + limit}`).toString("base64") : "" },
    };
  }

  /** A stored message as a listing shows it: reactions as Slack describes them (the bot's own, here). */
  function listedMessage(m: FakeMessage): Reply {
    const { reactions, ...fields } = structuredClone(m);
    return {
      type: "message",
      ...fields,
      ...(m.bot_id ? { app_id: bot.appId, team: bot.teamId } : {}),
      ...(reactions?.length
        ? { reactions: reactions.map((name) => ({ name, users: [bot.botUserId], count: 1 })) }
        : {}),
    };
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

  return {
    "chat.postMessage": (a) => {
      const channel = str(a.channel);
      if (!channel) return fail("channel_not_found");
      if (!str(a.text) && !Array.isArray(a.blocks) && !str(a.markdown_text)) return fail("no_text");
      const blocksRefused = blocksProblem(a.blocks, unsupported);
      if (blocksRefused) return fail(blocksRefused);
      const msg = botMessage(nextTs(), {
        text: str(a.text) ?? str(a.markdown_text) ?? "",
        ...(Array.isArray(a.blocks) ? { blocks: a.blocks } : {}),
        ...(str(a.thread_ts) ? { thread_ts: str(a.thread_ts) } : {}),
      });
      channelMessages(channel).push(msg);
      return { ok: true, channel, ts: msg.ts, message: asMessageReply(msg) };
    },
    "chat.update": (a) => {
      const channel = str(a.channel) ?? "";
      const msg = findMessage(channel, str(a.ts) ?? "");
      if (!msg) return fail("message_not_found");
      if (msg.bot_id !== bot.botId) return fail("cant_update_message"); // bots may edit only their own
      const blocksRefused = blocksProblem(a.blocks, unsupported);
      if (blocksRefused) return fail(blocksRefused);
      if (a.text !== undefined) msg.text = String(a.text);
      if (Array.isArray(a.blocks)) msg.blocks = a.blocks;
      return { ok: true, channel, ts: msg.ts, text: msg.text ?? "", message: asMessageReply(msg) };
    },
    "chat.postEphemeral": (a) =>
      str(a.channel) && str(a.user) ? { ok: true, message_ts: nextTs() } : fail("channel_not_found"),
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
      return {
        ok: true,
        channel: {
          id,
          name: isIm ? undefined : `channel-${id.toLowerCase()}`,
          is_channel: id.startsWith("C"),
          is_im: isIm,
          is_private: !id.startsWith("C"),
          is_member: true,
          ...(isIm ? { user: "U0FAKEUSER" } : {}),
        },
      };
    },
    "conversations.replies": (a) => {
      const channel = str(a.channel);
      const ts = str(a.ts);
      if (!channel || !channels.has(channel)) return fail("channel_not_found");
      if (!ts) return fail("invalid_arguments");
      const thread = channelMessages(channel)
        .filter((m) => m.ts === ts || m.thread_ts === ts)
        .sort((x, y) => compareTs(x.ts, y.ts));
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
      const list = channelMessages(channel)
        .filter((m) => (!m.thread_ts || m.thread_ts === m.ts) && inRange(m.ts, a))
        .sort((x, y) => compareTs(y.ts, x.ts));
      return page(list, a, (items) => items);
    },
  };
}
