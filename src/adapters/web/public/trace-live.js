// Follows the open session while its runs go on: each event of the session (a model call begun or
// ended, a tool's end, an approval asked or decided, a run's end) makes the page read it again, at
// most a few times a second. A model's streamed text is left to the chat page.
import { eventsUrl } from "./common.js";

const AT_MOST_EVERY_MS = 300;

/** Calls `changed` after the session's events (grouped); returns how to stop following. */
export function followSession(sessionId, changed) {
  const source = new EventSource(eventsUrl(`/api/sessions/${encodeURIComponent(sessionId)}/events`));
  let waiting;
  source.addEventListener("message", (message) => {
    if (waiting || JSON.parse(message.data).type === "model_delta") return;
    waiting = setTimeout(() => {
      waiting = undefined;
      changed();
    }, AT_MOST_EVERY_MS);
  });
  return () => {
    clearTimeout(waiting);
    source.close();
  };
}
