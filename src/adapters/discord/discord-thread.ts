/**
 * A Discord conversation's earlier messages, read over REST before a mention: in a thread, the
 * thread's messages before the mention (after the last reading's point); elsewhere (a channel, a
 * DM), the chain of messages the mention replies to, one reply after another, or, for a mention that
 * replies to nothing where the channel's history is read, the channel's messages before it (after
 * the point of the channel's last such reading). The bot's own are left out (its answers
 * are in the session's memory), other bots' are marked, files are named. A refusal (no access, a rate
 * limit) comes back as a sentence with what was read so far, and the run goes on without the rest.
 */
import { Routes, type Client } from "discord.js";
import type { ThreadMessage } from "../../agent/thread-context.js";
import type { ThreadRead } from "../../conversations/thread-context.js";

/** At most this many pages of 100 of a thread are read (the newest that fit are kept). */
const MAX_PAGES = 2;
const PAGE_SIZE = 100;

interface DiscordMessageJson {
  id: string;
  channel_id: string;
  content?: string;
  author?: { id: string; username?: string; global_name?: string | null; bot?: boolean };
  attachments?: Array<{ filename?: string }>;
  message_reference?: { message_id?: string; channel_id?: string };
}

export interface DiscordThreadReader {
  read(
    client: Client,
    where: {
      sessionId: string;
      mentionId: string;
      /** The last reading's point: the thread's, or with `channel` the channel history's. */
      after: (channel: boolean) => Promise<string | undefined>;
      maxMessages: number;
      threads: boolean;
      channel: boolean;
    },
  ): Promise<ThreadRead | undefined>;
}

export function createDiscordThreadReader(): DiscordThreadReader {
  let botUser: Promise<string> | undefined;
  const botUserOf = (client: Client): Promise<string> => {
    if (!botUser) {
      botUser = (client.rest.get(Routes.user()) as Promise<{ id: string }>).then((user) => user.id);
      botUser.catch(() => {
        botUser = undefined;
      });
    }
    return botUser;
  };

  /** A thread's messages before the mention and after `after`, newest pages first, returned oldest first. */
  async function threadMessages(client: Client, thread: string, mentionId: string, after?: string) {
    const found: DiscordMessageJson[] = [];
    let before = mentionId;
    for (let page = 0; page < MAX_PAGES; page++) {
      const list = (await client.rest.get(Routes.channelMessages(thread), {
        query: new URLSearchParams({ before, limit: String(PAGE_SIZE) }),
      })) as DiscordMessageJson[];
      const newer = list.filter((message) => !after || BigInt(message.id) > BigInt(after));
      found.push(...newer);
      const oldest = list.at(-1);
      if (list.length < PAGE_SIZE || newer.length < list.length || !oldest) break;
      before = oldest.id;
    }
    return found.reverse();
  }

  /**
   * The messages the mention replies to, one reply after another, oldest first, at most `most`. Read
   * whole each time: the person pointed at them, and a channel's session has not seen its other messages.
   */
  async function replyChain(client: Client, mention: DiscordMessageJson, most: number) {
    const chain: DiscordMessageJson[] = [];
    let message = mention;
    while (chain.length < most && message.message_reference?.message_id) {
      const { message_id: id, channel_id: where = message.channel_id } = message.message_reference;
      message = (await client.rest.get(Routes.channelMessage(where, id))) as DiscordMessageJson;
      chain.unshift(message);
    }
    return chain;
  }

  return {
    async read(client, { sessionId, mentionId, after, maxMessages, threads, channel: history }) {
      const [, guild = "", channel = "", thread] = sessionId.split(":");
      const inThread = guild !== "dm" && thread !== undefined;
      if (inThread && !threads) return undefined;
      const read: DiscordMessageJson[] = [];
      let problem: string | undefined;
      let fromChannel = false;
      try {
        const botId = await botUserOf(client);
        let found: DiscordMessageJson[] = [];
        if (inThread) found = await threadMessages(client, thread, mentionId, await after(false));
        else {
          const mention = (await client.rest.get(Routes.channelMessage(channel, mentionId))) as DiscordMessageJson;
          if (mention.message_reference?.message_id) {
            if (!threads) return undefined;
            found = await replyChain(client, mention, maxMessages);
          } else if (history) {
            fromChannel = true;
            found = await threadMessages(client, channel, mentionId, await after(true));
          } else return undefined;
        }
        read.push(...found.filter((message) => message.author?.id !== botId));
      } catch (error) {
        problem = `Discord refused to let glassbox read this conversation (${(error as Error).message}).`;
      }
      const messages = read.map((message): ThreadMessage => {
        const files = (message.attachments ?? []).map((file) => file.filename || "a file");
        const bot = message.author?.bot === true;
        return {
          id: message.id,
          author: message.author?.global_name || message.author?.username || "someone",
          ...(bot ? { bot } : {}),
          text: message.content ?? "",
          ...(files.length ? { files } : {}),
        };
      });
      return {
        messages,
        ...(problem ? { problem } : { through: mentionId }),
        ...(fromChannel ? { channel: true as const } : {}),
      };
    },
  };
}
