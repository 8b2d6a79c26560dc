/**
 * A Slack thread's earlier messages, read before a mention in it (conversations.replies, paged with
 * its cursor), or, for a mention outside a thread where the channel's history is read, the channel's
 * (conversations.history, newest first): after the last reading's point and before the mention, without the bot's own, each
 * with its author's display name (users.info, remembered), its files named and other bots marked.
 * The client must not wait out rate limits (rejectRateLimitedCalls): a limited or refused reading
 * comes back as a sentence with what was read so far, and the run goes on without the rest.
 */
import { ErrorCode, type WebClient } from "@slack/web-api";
import type { ThreadMessage } from "../../agent/thread-context.js";
import type { ThreadRead } from "../../conversations/thread-context.js";

/** At most this many pages of 200 are read of one thread (the newest that fit are kept). */
const MAX_PAGES = 5;
const PAGE_SIZE = 200;
const NAMES_KEPT = 2_000;

interface SlackFile {
  name?: string;
  title?: string;
}

interface SlackReply {
  ts?: string;
  user?: string;
  bot_id?: string;
  subtype?: string;
  username?: string;
  bot_profile?: { name?: string };
  text?: string;
  files?: SlackFile[];
}

export interface SlackThreadReader {
  read(
    client: WebClient,
    /** Without `threadTs`: the channel's history before the mention. */
    where: { channel: string; threadTs?: string; mentionTs: string; after?: string; teamId: string },
  ): Promise<ThreadRead>;
}

export function createSlackThreadReader(): SlackThreadReader {
  const names = new Map<string, string>();
  const botUsers = new Map<string, Promise<string>>();

  /** The bot's own user id in a workspace (auth.test, once). */
  const botUserOf = (client: WebClient, teamId: string): Promise<string> => {
    let known = botUsers.get(teamId);
    if (!known) {
      known = client.auth.test().then((answer) => String(answer.user_id ?? ""));
      known.catch(() => botUsers.delete(teamId));
      botUsers.set(teamId, known);
    }
    return known;
  };

  /** A person's display name (their profile's, else their real name, else their handle); their id if Slack will not say. */
  async function nameOf(client: WebClient, teamId: string, user: string): Promise<string> {
    const key = `${teamId}:${user}`;
    const known = names.get(key);
    if (known) return known;
    try {
      const { user: found } = await client.users.info({ user });
      const name = found?.profile?.display_name || found?.real_name || found?.name || user;
      if (names.size >= NAMES_KEPT) names.delete(names.keys().next().value as string);
      names.set(key, name);
      return name;
    } catch {
      return user;
    }
  }

  return {
    // A mention that starts its thread is not read (surfaces.ts): it has nothing before it.
    async read(client, { channel, threadTs, mentionTs, after, teamId }) {
      const replies: SlackReply[] = [];
      let problem: string | undefined;
      try {
        const botUser = await botUserOf(client, teamId);
        let cursor: string | undefined;
        // The channel's history, newest first: one page holds more than the bounds keep (at most 200).
        const pages = threadTs ? MAX_PAGES : 1;
        for (let page = 0; page < pages; page++) {
          const window = {
            channel,
            latest: mentionTs,
            ...(after ? { oldest: after } : {}),
            inclusive: false,
            limit: PAGE_SIZE,
            ...(cursor ? { cursor } : {}),
          };
          const answer = threadTs
            ? await client.conversations.replies({ ...window, ts: threadTs })
            : await client.conversations.history(window);
          for (const message of (answer.messages ?? []) as SlackReply[]) {
            const ts = message.ts ?? "";
            if (compareTs(ts, mentionTs) >= 0 || (after && compareTs(ts, after) <= 0)) continue;
            if (message.user === botUser) continue; // its answers are in the session's memory
            replies.push(message);
          }
          cursor = answer.response_metadata?.next_cursor || undefined;
          if (!cursor) break;
          if (threadTs && page === MAX_PAGES - 1)
            problem = `the thread is longer than ${MAX_PAGES * PAGE_SIZE} messages.`;
        }
      } catch (error) {
        problem = refusalOf(error, threadTs ? "this thread" : "this channel's history");
      }
      // The channel's history comes newest first: its newest pages were read, and are put in order.
      replies.sort((a, b) => compareTs(a.ts ?? "", b.ts ?? ""));
      const messages: ThreadMessage[] = [];
      for (const reply of replies) {
        const bot = reply.bot_id !== undefined || reply.subtype === "bot_message";
        const author = bot
          ? reply.bot_profile?.name || reply.username || "a bot"
          : reply.user
            ? await nameOf(client, teamId, reply.user)
            : "someone";
        const files = (reply.files ?? []).map((file) => file.name || file.title || "a file");
        messages.push({
          id: reply.ts ?? "",
          author,
          ...(bot ? { bot } : {}),
          text: reply.text ?? "",
          ...(files.length ? { files } : {}),
        });
      }
      return {
        messages,
        ...(problem ? { problem } : { through: mentionTs }),
        ...(threadTs ? {} : { channel: true as const }),
      };
    },
  };
}

/** What Slack said when it would not let the thread be read, as a sentence for the trace and the model. */
function refusalOf(error: unknown, what: string): string {
  const failure = error as { code?: string; retryAfter?: number; data?: { error?: string; needed?: string } };
  if (failure.code === ErrorCode.RateLimitedError)
    return `Slack rate-limited reading ${what} (try again in ${failure.retryAfter ?? "a few"} s), so it was not read.`;
  if (failure.data?.error === "missing_scope")
    return `Slack refused to let glassbox read ${what}: the app lacks the ${failure.data.needed ?? "history"} scope (add it and reinstall the app).`;
  if (failure.data?.error === "ratelimited") return `Slack rate-limited reading ${what}, so it was not read.`;
  if (failure.data?.error) return `Slack refused to let glassbox read ${what} (${failure.data.error}).`;
  return `reading ${what} from Slack failed (${(error as Error).message}).`;
}

/** Compares Slack timestamps exactly ("1730000000.000100"); parseFloat would lose the micro part. */
function compareTs(a: string, b: string): number {
  const [ai = "0", af = ""] = a.split(".");
  const [bi = "0", bf = ""] = b.split(".");
  return Number(ai) - Number(bi) || af.padEnd(6, "0").localeCompare(bf.padEnd(6, "0"));
}
