/**
 * Before a mention in a thread runs, its worker reads what the bot has not seen of the thread (the
 * platform's ReadThread, src/adapters/surfaces.ts): the messages after the point the session's last
 * reading got through, up to the mention, without the bot's own (its answers are in the session's
 * memory already). The newest that fit the channel's bounds are kept, and the reading goes with the
 * run (agent/thread-context.ts shows it to the model, the run's record keeps it). A reading that is
 * refused or limited says so and the run goes on; the next mention tries again from the same point.
 */
import type { TokenCounter } from "../agent/tokens.js";
import { fitThreadMessages, type ThreadMessage, type ThreadReading } from "../agent/thread-context.js";
import type { StorePort } from "../store/port.js";
import type { ThreadContextSettings } from "./channel-settings.js";

/** On for threads, off for channel history, 50 messages and 4,000 tokens at most, unless the channel settings say otherwise. */
export const THREAD_CONTEXT_DEFAULTS: Required<ThreadContextSettings> = {
  threads: true,
  channel: false,
  maxMessages: 50,
  maxTokens: 4_000,
};

/** What a platform read: the earlier messages, oldest first, and how far it got. */
export interface ThreadRead {
  messages: ThreadMessage[];
  /** The mention's own id, when everything before it (after `after`) was read. */
  through?: string;
  /** Why it could not read everything (a refusal, a rate limit), as a sentence. */
  problem?: string;
  /** Read from the channel's history (a mention outside a thread), not from a thread. */
  channel?: true;
}

/**
 * Reads a session's thread before the message that `eventIds` claimed (its platform ids), after the
 * last reading's point (`after()`, asked only where there is something to read); undefined where
 * there is nothing (a mention that starts its thread with `channel` off, a direct message, the web).
 * With `channel`, a mention outside a thread reads the channel's history before it instead, after
 * the point of the channel's last such reading (`after(place)`, the channel as `slack:T1:C1`).
 * Rejects only for what it cannot put in words.
 */
export type ReadThread = (
  where: {
    sessionId: string;
    eventIds: readonly string[];
    after: (channel?: string) => Promise<string | undefined>;
    maxMessages: number;
    threads: boolean;
    channel: boolean;
  },
  signal: AbortSignal,
) => Promise<ThreadRead | undefined>;

/** The settings that apply, with the defaults filled in. */
export const threadSettingsOf = (given: ThreadContextSettings | undefined): Required<ThreadContextSettings> => ({
  ...THREAD_CONTEXT_DEFAULTS,
  ...given,
});

/** The run's reading of its thread, bounded; undefined when there was nothing to read or it is off. */
export async function readThreadContext(
  reader: { store: StorePort; read: ReadThread; counter: TokenCounter },
  where: { sessionId: string; eventIds: readonly string[] },
  settings: Required<ThreadContextSettings>,
  signal: AbortSignal,
): Promise<ThreadReading | undefined> {
  if (!settings.threads && !settings.channel) return undefined;
  const after = async (channel?: string) => (await reader.store.latestThreadReading(where.sessionId, channel))?.through;
  let read: ThreadRead | undefined;
  try {
    const { maxMessages, threads, channel } = settings;
    read = await reader.read({ ...where, after, maxMessages, threads, channel }, signal);
  } catch (error) {
    read = { messages: [], problem: `reading the conversation failed (${(error as Error).message}).` };
  }
  if (!read) return undefined;
  const fitted = fitThreadMessages(read.messages, settings, reader.counter);
  return {
    messages: fitted.messages,
    leftOut: fitted.leftOut,
    ...(read.through && !read.problem ? { through: read.through } : {}),
    ...(read.problem ? { problem: read.problem } : {}),
    ...(read.channel ? { channel: true as const } : {}),
  };
}
