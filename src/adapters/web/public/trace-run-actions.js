// What can be done with a finished run in the trace viewer: replay it (trace-replay), compare it with
// another run (#compare=<this>,<other>), and save it as an eval case file that `glassbox eval --cases`
// replays (the server writes it, for the service token only).
import { api, el, shorten } from "./common.js";
import { replayDetails } from "./trace-replay.js";

export function runActions(run) {
  return [replayDetails(run), compareWith(run), saveCase(run)];
}

/** "Compare with…": another run's id, offered from the runs of the same session. */
function compareWith(run) {
  const listId = `compare-runs-${run.runId}`;
  const input = el("input", {
    type: "text",
    name: "other",
    required: true,
    maxlength: "200",
    list: listId,
    placeholder: "a run id",
    "aria-label": "Run to compare with",
  });
  const list = el("datalist", { id: listId });
  const form = el(
    "form",
    { class: "compare-form" },
    el("label", {}, "Run ", input),
    list,
    el("button", { type: "submit" }, "Compare"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = `compare=${encodeURIComponent(run.runId)},${encodeURIComponent(input.value.trim())}`;
  });
  const details = el(
    "details",
    { class: "compare-with" },
    el("summary", {}, "Compare with…"),
    el("p", { class: "hint" }, `This run is ${run.runId}. Choose another of this session, or paste any run's id.`),
    form,
  );
  // The session's other runs are read once, when it is opened.
  details.addEventListener(
    "toggle",
    async () => {
      try {
        const { runs } = await api(`/api/sessions/${encodeURIComponent(run.sessionId)}/runs`);
        list.replaceChildren(
          ...runs
            .filter((other) => other.runId !== run.runId && !other.parentRunId)
            .map((other) => el("option", { value: other.runId }, shorten(other.input, 80))),
        );
      } catch {
        // The id can still be typed.
      }
    },
    { once: true },
  );
  return details;
}

/** "Save as eval case": the server writes the file (the service token only) and says where. */
function saveCase(run) {
  const status = el("p", { class: "save-case-status", role: "status" });
  const button = el("button", { type: "button", class: "save-case" }, "Save as eval case");
  button.addEventListener("click", async () => {
    button.disabled = true;
    status.textContent = "Saving…";
    try {
      const { saved } = await api(`/api/runs/${encodeURIComponent(run.runId)}/eval-case`, { method: "POST" });
      status.textContent = `Saved as ${saved[0].file}; glassbox eval --cases replays it.`;
    } catch (error) {
      status.textContent = `Not saved: ${error.message}`;
    } finally {
      button.disabled = false;
    }
  });
  return el("div", { class: "save-case-box" }, button, status);
}

/** "Save every 👎 run" of the sessions the filters find: `query` is their URLSearchParams. */
export async function saveRatedDown(query, status) {
  status.textContent = "Saving…";
  try {
    const { saved, skipped } = await api(`/api/eval-cases?${query}`, { method: "POST" });
    const none = saved.length === 0 ? "No 👎 run among these sessions to save." : "";
    const some = saved.length ? `Saved ${saved.length} eval case${saved.length === 1 ? "" : "s"}.` : "";
    const left = skipped.length ? ` ${skipped.length} left out: ${skipped.map((one) => one.reason).join(" ")}` : "";
    status.textContent = `${none}${some}${left}`;
  } catch (error) {
    status.textContent = `Not saved: ${error.message}`;
  }
}
