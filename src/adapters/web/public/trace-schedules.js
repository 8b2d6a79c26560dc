// The runs on a schedule (GET /api/schedules): shown above the sessions, each with where it runs, when,
// who it runs as and what it asks, with Pause/Resume and Delete. A person's token sees their own.
import { api, el, formatWhen } from "./common.js";

/** Fills `panel` (a <details>) from the API, and again after each change; hidden when there are none to show. */
export async function showSchedules(panel) {
  let schedules;
  try {
    ({ schedules } = await api("/api/schedules"));
  } catch {
    schedules = [];
  }
  panel.hidden = schedules.length === 0;
  const status = panel.querySelector(".schedules-status");
  const change = async (path, options) => {
    try {
      await api(path, options);
      status.textContent = "";
    } catch (error) {
      status.textContent = error.message;
    }
    await showSchedules(panel);
  };
  const items = schedules.map((schedule) => {
    const path = `/api/schedules/${encodeURIComponent(schedule.id)}`;
    return el(
      "li",
      { class: schedule.paused ? "paused" : "", "data-schedule": schedule.id },
      el("strong", {}, schedule.name ?? schedule.id),
      el("span", { class: "where", title: schedule.sessionId }, ` ${schedule.sessionId}`),
      el(
        "p",
        { class: "when" },
        `${schedule.cron} · ${schedule.timezone} · as ${schedule.userId} · `,
        schedule.paused ? "paused" : `next ${formatWhen(schedule.next)}`,
      ),
      el("p", { class: "prompt" }, schedule.prompt),
      el(
        "div",
        { class: "actions" },
        button(schedule.paused ? "Resume" : "Pause", "", () =>
          change(path, { method: "POST", body: { paused: !schedule.paused } }),
        ),
        schedule.source === "settings"
          ? el("span", { class: "hint" }, "from the settings file")
          : button("Delete", "danger", () => {
              if (confirm(`Delete the schedule "${schedule.prompt.slice(0, 80)}"?`))
                void change(path, { method: "DELETE" });
            }),
      ),
    );
  });
  panel.querySelector("ul").replaceChildren(...items);
}

function button(label, className, onClick) {
  const made = el("button", { type: "button", class: className }, label);
  made.addEventListener("click", onClick);
  return made;
}
