// 👍 / 👎 under an answer of the chat page, and after a 👎 a short form asking why (optional). The
// person's latest choice is their answer: a second click replaces the first, on the server too.
import { api, el } from "./common.js";

const REASON_LIMIT = 1000;

/** The controls for the answer of `runId`; `who()` is this browser's user, `given` their stored rating if any. */
export function feedbackControls(runId, who, given) {
  const up = el(
    "button",
    { type: "button", class: "rate up", "aria-pressed": "false", "aria-label": "Good answer", title: "Good answer" },
    "👍 Good",
  );
  const down = el(
    "button",
    { type: "button", class: "rate down", "aria-pressed": "false", "aria-label": "Bad answer", title: "Bad answer" },
    "👎 Bad",
  );
  const status = el("span", { class: "feedback-status", role: "status" });
  const reason = el("textarea", {
    name: "reason",
    rows: 2,
    maxlength: REASON_LIMIT,
    placeholder: "What went wrong? (optional)",
  });
  const form = el(
    "form",
    { class: "feedback-reason", hidden: true },
    el("label", {}, "What went wrong? (optional)", reason),
    el("button", { type: "submit" }, "Send"),
  );

  const show = (rating) => {
    up.setAttribute("aria-pressed", String(rating === "up"));
    down.setAttribute("aria-pressed", String(rating === "down"));
  };
  const send = async (rating, text) => {
    status.classList.remove("error");
    try {
      await api(`/api/runs/${encodeURIComponent(runId)}/feedback`, {
        method: "POST",
        body: { rating, userId: who(), ...(text ? { reason: text } : {}) },
      });
      show(rating);
      return true;
    } catch (error) {
      status.textContent = error.message;
      status.classList.add("error");
      return false;
    }
  };

  up.addEventListener("click", async () => {
    form.hidden = true;
    if (await send("up")) status.textContent = "Thanks!";
  });
  down.addEventListener("click", async () => {
    if (!(await send("down"))) return;
    status.textContent = "";
    form.hidden = false;
    reason.focus();
  });
  // Enter sends, Shift+Enter starts a new line: as in the message box.
  reason.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!(await send("down", reason.value.trim()))) return;
    form.hidden = true;
    status.textContent = "Thanks, noted.";
  });

  show(given?.rating);
  return el("div", { class: "feedback", role: "group", "aria-label": "Rate this answer" }, up, down, status, form);
}
