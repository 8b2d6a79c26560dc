// The trace viewer: every session in the store (from every adapter), found by the text of its
// messages and narrowed by adapter, status, feedback, tool and date; for one session its runs as a timeline
// of steps (trace-session, trace-steps) and a chart of prompt tokens per step (trace-chart).
import { $, api, el, formatCost, formatNumber, formatWhen, showActingAs } from "./common.js";
import { showBudgets } from "./trace-budgets.js";
import { showCompare } from "./trace-compare.js";
import { saveRatedDown } from "./trace-run-actions.js";
import { showSchedules } from "./trace-schedules.js";
import { loadSession, renderSession } from "./trace-session.js";

const dom = {
  sessions: $("#sessions"),
  detail: $("#session-detail"),
  model: $("#model-label"),
  refresh: $("#refresh"),
  form: $("#session-search"),
  search: $("#search"),
  adapter: $("#filter-adapter"),
  status: $("#filter-status"),
  rated: $("#filter-rated"),
  tool: $("#filter-tool"),
  from: $("#filter-from"),
  to: $("#filter-to"),
  toolNames: $("#tool-names"),
  listStatus: $("#sessions-status"),
  listError: $("#sessions-error"),
  budgets: $("#budgets"),
  saveRatedDown: $("#save-rated-down"),
  saveStatus: $("#save-rated-down-status"),
  schedules: $("#schedules"),
};
const SEARCH_DELAY_MS = 250;
let priced = true;
/** Answers to older searches that come late are dropped. */
let latestSearch = 0;
let typing;

dom.refresh.addEventListener("click", () => void refresh());
dom.form.addEventListener("submit", (event) => {
  event.preventDefault();
  void loadSessions();
});
// Typing searches once it pauses; a choice searches at once.
for (const typed of [dom.search, dom.tool]) {
  typed.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => void loadSessions(), SEARCH_DELAY_MS);
  });
}
for (const filter of [dom.adapter, dom.status, dom.rated, dom.from, dom.to])
  filter.addEventListener("change", () => void loadSessions());
addEventListener("hashchange", () => void showSelected());
dom.saveRatedDown.addEventListener("click", () => void saveRatedDown(searchQuery(), dom.saveStatus));
void start();

async function start() {
  try {
    const info = await api("/api/info");
    dom.model.textContent = info.model ?? "none configured";
    priced = info.priced;
    showActingAs(info.user);
    dom.toolNames.replaceChildren(...(info.tools ?? []).map((name) => el("option", { value: name })));
  } catch (error) {
    dom.model.textContent = "unknown";
    showListError(`glassbox did not say which model answers: ${error.message}`);
  }
  await refresh();
}

async function refresh() {
  void showBudgets(dom.budgets);
  void showSchedules(dom.schedules);
  await loadSessions();
  await showSelected();
}

function selected() {
  const params = new URLSearchParams(location.hash.slice(1));
  return { session: params.get("session"), run: params.get("run"), compare: params.get("compare") };
}

/** The filters as the API's query; dates are the person's own days, sent as moments. */
function searchQuery() {
  const query = new URLSearchParams();
  const add = (name, value) => value && query.set(name, value);
  add("q", dom.search.value.trim());
  add("adapter", dom.adapter.value);
  add("status", dom.status.value);
  add("rated", dom.rated.value);
  add("tool", dom.tool.value.trim());
  if (dom.from.value) query.set("from", new Date(`${dom.from.value}T00:00`).toISOString());
  if (dom.to.value) {
    const end = new Date(`${dom.to.value}T00:00`);
    end.setDate(end.getDate() + 1);
    query.set("to", end.toISOString());
  }
  return query;
}

const filtering = () => [...searchQuery().keys()].length > 0;

async function loadSessions() {
  const search = ++latestSearch;
  let answer;
  try {
    answer = await api(`/api/sessions?${searchQuery()}`);
  } catch (error) {
    if (search !== latestSearch) return;
    dom.sessions.replaceChildren();
    dom.listStatus.textContent = "";
    showListError(`The sessions could not be loaded: ${error.message}`);
    return;
  }
  if (search !== latestSearch) return;
  dom.listError.hidden = true;
  const { sessions, more } = answer;
  dom.sessions.replaceChildren(...sessions.map(sessionItem));
  if (sessions.length === 0)
    dom.sessions.append(
      el(
        "li",
        { class: "empty" },
        filtering()
          ? "No session matches; loosen the search or the filters."
          : "No sessions yet: send a message on the chat page.",
      ),
    );
  const count = `${sessions.length} session${sessions.length === 1 ? "" : "s"}${filtering() ? ` match${sessions.length === 1 ? "es" : ""}` : ""}`;
  dom.listStatus.textContent = more
    ? `The ${sessions.length} most recently active are shown; search or filter to find others.`
    : count;
  markSelected();
}

function showListError(text) {
  dom.listError.textContent = text;
  dom.listError.hidden = false;
}

/** A session as the list shows it: its first message, then where, when, how much. */
function sessionItem(session) {
  const tokens = session.promptTokens + session.completionTokens;
  return el(
    "li",
    {},
    el(
      "a",
      { href: `#session=${encodeURIComponent(session.id)}`, "data-session-id": session.id },
      el("span", { class: "session-title" }, session.firstMessage ?? session.id),
      el(
        "span",
        { class: "session-meta" },
        el("span", { class: `adapter adapter-${session.adapter}` }, session.adapter),
        ` ${formatWhen(session.lastActivity)} · ${session.runCount} run${session.runCount === 1 ? "" : "s"} · ${formatNumber(tokens)} tokens · ${formatCost(session.cost)}`,
      ),
      session.hasErrors || session.awaitingApproval
        ? el(
            "span",
            { class: "session-flags" },
            session.hasErrors ? el("span", { class: "flag flag-error" }, "error") : null,
            session.awaitingApproval ? el("span", { class: "flag flag-waiting" }, "waiting for approval") : null,
          )
        : null,
    ),
  );
}

function markSelected() {
  const { session } = selected();
  for (const link of dom.sessions.querySelectorAll("a")) {
    if (link.dataset.sessionId === session) link.setAttribute("aria-current", "true");
    else link.removeAttribute("aria-current");
  }
}

async function showSelected() {
  const { session, run, compare } = selected();
  markSelected();
  // #compare=<runA>,<runB>: the two runs side by side (trace-compare).
  const [runA, runB] = (compare ?? "").split(",");
  if (runA && runB) return showCompare(dom.detail, runA, runB);
  if (!session) return;
  dom.detail.replaceChildren(el("p", { class: "empty" }, "Loading…"));
  try {
    dom.detail.replaceChildren(
      el("div", { class: "session-view" }, renderSession(session, await loadSession(session), { priced })),
    );
  } catch (error) {
    dom.detail.replaceChildren(
      el("p", { class: "error", role: "alert" }, `The session ${session} could not be loaded: ${error.message}`),
    );
    return;
  }
  // Focus follows the choice (for keyboards and screen readers); a chosen run is scrolled to (and opened, if nested).
  const target = run ? document.getElementById(`run-${run}`) : null;
  if (target?.tagName === "DETAILS") target.open = true;
  const heading = (target ?? dom.detail).querySelector("h2, h3, summary");
  heading?.focus({ preventScroll: true });
  target?.scrollIntoView({ block: "start" });
}
