/**
 * A web session's surface in a worker: the answer text the model streams, passed on through the
 * store (StorePort.publishText, a NOTIFY on PostgreSQL) to the ingress processes whose pages follow
 * the session, which show it as the web surface does in one process. Everything else of the run
 * reaches the pages from the store (store-events.ts); approvals are buttons on the page.
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
    return {
      onEvent(event: AgentEvent) {
        if (event.type === "model_delta") {
          if (pending && (pending.runId !== event.runId || pending.step !== event.step)) flush();
          pending ??= { runId: event.runId, step: event.step, text: "" };
          pending.text += event.text;
          timer ??= setTimeout(flush, everyMs);
        } else if (event.type === "model_end" || event.type === "run_end") flush();
      },
      finish: async () => {
        flush();
        await sending;
      },
      askApproval: async () => undefined,
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
