/**
 * A web session's surface in a worker: the answer text the model streams, and a word each time the
 * run stored something a page shows, passed on through the store (StorePort.publishText: listeners
 * in this process on SQLite, a NOTIFY on PostgreSQL) to the web servers whose pages follow the
 * session. Those read the rest of the run from the store at once (store-events.ts); approvals are
 * buttons on the page. That a run waits for a run slot is a notice of its own, as the store does not say it.
 *
 * Text is gathered per run and sent about every `everyMs` and at each step's end, so a fast model
 * makes a few notices a second, not one a token; each notice stays under NOTIFY's 8,000 bytes.
 */
import type { AgentEvent } from "../../agent/events.js";
import type { ChatSurface } from "../../conversations/conversations.js";
import type { Logger } from "../../logger.js";
import type { TextNotice } from "../../store/port-data.js";

/** Most bytes of one notice's JSON (PostgreSQL refuses a payload of 8,000 or more). */
export const MAX_NOTICE_BYTES = 7_000;
const DEFAULT_EVERY_MS = 200;
/** A note is a sentence or two: cut well within one notice. */
const MAX_NOTE_CHARS = 2_000;
/**
 * Events announced once what they tell is stored (the loop announces a unit's events after its commit).
 * Not model_end: a step's calls are stored before they run or wait for an approval, and a page reading
 * them then would show a call waiting for a decision as running; the step is read with what follows
 * it at once (its first call starting, its pause, the run's end).
 */
const STORED_NEWS = new Set<AgentEvent["type"]>([
  "run_start",
  "run_resumed",
  "tool_start",
  "tool_end",
  "note",
  "run_end",
]);

export interface TextRelayOptions {
  publish(notice: TextNotice): Promise<void>;
  log: Logger;
  everyMs?: number;
}

export function createTextRelay(options: TextRelayOptions): (sessionId: string) => ChatSurface {
  const everyMs = options.everyMs ?? DEFAULT_EVERY_MS;
  let warned = false;
  const publish = (notice: TextNotice) =>
    options.publish(notice).catch((error: unknown) => {
      // Losing streamed text costs only the live view: the answer comes whole with the run's end.
      if (!warned)
        options.log.warn(
          { error: (error as Error).message },
          "worker: passing on streamed answer text failed; pages get the answer when the run ends",
        );
      warned = true;
    });

  return (sessionId) => {
    let pending: { runId: string; step: number; text: string } | undefined;
    /** The run whose end was shown last: a note follows it. */
    let ended: string | undefined;
    let timer: NodeJS.Timeout | undefined;
    // One at a time: two notices sent at once (on two connections) could arrive in either order.
    let sending: Promise<void> = Promise.resolve();
    const send = (notice: TextNotice) => void (sending = sending.then(() => publish(notice)));
    const flush = () => {
      clearTimeout(timer);
      timer = undefined;
      if (pending?.text) for (const notice of noticesOf({ sessionId, ...pending })) send(notice);
      pending = undefined;
    };
    /** The session is worth reading now (after the text before it). */
    const news = (runId: string, step: number, error?: TextNotice["error"]) => {
      flush();
      send({ sessionId, runId, step, text: "", ...(error ? { error } : {}) });
    };
    return {
      onEvent(event: AgentEvent) {
        if (event.type === "model_delta") {
          if (pending && (pending.runId !== event.runId || pending.step !== event.step)) flush();
          pending ??= { runId: event.runId, step: event.step, text: "" };
          pending.text += event.text;
          timer ??= setTimeout(flush, everyMs);
        } else if (STORED_NEWS.has(event.type)) news(event.runId, "step" in event ? event.step : 0);
        else if (event.type === "model_end") flush();
      },
      finish: async (result) => {
        ended = result.runId;
        news(result.runId, result.steps, result.error); // the run's end as the turn settled it
        await sending;
      },
      note: async (text) => {
        if (ended) send({ sessionId, runId: ended, step: 0, text: "", note: text.slice(0, MAX_NOTE_CHARS) });
        await sending;
      },
      askApproval: async (approval) => {
        news(approval.runId, 0);
        return undefined;
      },
      queued(runId) {
        if (runId) send({ sessionId, runId, step: 0, text: "", queued: true });
      },
    };
  };
}

/** The notice, or its text in order over several, each one's JSON within MAX_NOTICE_BYTES. */
export function noticesOf(notice: TextNotice): TextNotice[] {
  if (Buffer.byteLength(JSON.stringify(notice)) <= MAX_NOTICE_BYTES) return [notice];
  const characters = Array.from(notice.text); // never between the halves of a surrogate pair
  const half = Math.ceil(characters.length / 2);
  return [
    ...noticesOf({ ...notice, text: characters.slice(0, half).join("") }),
    ...noticesOf({ ...notice, text: characters.slice(half).join("") }),
  ];
}
