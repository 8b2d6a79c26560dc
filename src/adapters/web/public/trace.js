// The trace viewer: every session in the store (from every adapter), found by the text of its
// messages and narrowed by adapter, status, feedback, tool and date; for one session its runs as
// waterfalls of spans (trace-session, trace-waterfall) read in a side panel (trace-panel), followed
// live while they run (trace-live), and a chart of prompt tokens per step (trace-chart).
import { $, api, el, formatCost, formatNumber, formatWhen, showActingAs } from "./common.js";
import { showBudgets } from "./trace-budgets.js";
import { followSession } from "./trace-live.js";
import { createPanel } from "./trace-panel.js";
import { showCompare } from "./trace-compare.js";
import { saveRatedDown } from "./trace-run-actions.js";
import { showSchedules } from "./trace-schedules.js";
import { loadSession, renderSession } from "./trace-session.js";
import { markSelected as markSpan } from "./trace-waterfall.js";

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
  return {
    session: params.get("session"),
    run: params.get("run"),
    span: params.get("span"),
    compare: params.get("compare"),
  };
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
      el("span", { class: "session-title" }, session.title ?? session.firstMessage ?? session.id),
      placeLine(session),
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

/** Where the session is and who started it, by their names; the ids show on hover. */
function placeLine(session) {
  if (!session.placeName) return null;
  // A place like "thread by Ana" or "DM with Ana" names who started it already.
  const who = session.userName && !session.placeName.includes(session.userName) ? ` · ${session.userName}` : "";
  const ids = [session.id, session.startedBy].filter(Boolean).join(" · ");
  return el("span", { class: "session-place", title: ids }, `${session.placeName}${who}`);
}

function markSelected() {
  const { session } = selected();
  for (const link of dom.sessions.querySelectorAll("a")) {
    if (link.dataset.sessionId === session) link.setAttribute("aria-current", "true");
    else link.removeAttribute("aria-current");
  }
}

/** What stays put while the open session re-renders (a live run): spans opened, the one chosen. */
let viewed = { session: null, state: null, spans: new Map(), context: null, stopFollowing: () => {} };
const panel = createPanel();

async function showSelected() {
  const { session, run, span, compare } = selected();
  markSelected();
  // #compare=<runA>,<runB>: the two runs side by side (trace-compare).
  const [runA, runB] = (compare ?? "").split(",");
  if (runA && runB) {
    // The session shown before is no longer followed, nor its span read.
    viewed.stopFollowing();
    panel.hide();
    viewed = { ...viewed, session: null, stopFollowing: () => {} };
    return showCompare(dom.detail, runA, runB);
  }
  if (!session) return;
  if (viewed.session !== session) {
    viewed.stopFollowing();
    panel.hide();
    viewed = {
      session,
      state: { expanded: new Map(), selected: null },
      spans: new Map(),
      context: null,
      // A run in progress grows in the waterfall as the session's events arrive.
      stopFollowing: followSession(session, () => void rerender(session)),
    };
  }
  dom.detail.replaceChildren(el("p", { class: "empty" }, "Loading…"));
  if (!(await rerender(session, { focus: true }))) return;
  // Focus follows the choice (for keyboards and screen readers); a chosen run is scrolled to, a chosen span opened.
  const target = run ? document.getElementById(`run-${run}`) : null;
  const chosen = span && viewed.spans.get(span);
  if (chosen) return openSpan(chosen, dom.detail.querySelector(`[data-key="${CSS.escape(span)}"]`));
  const heading = (target ?? dom.detail).querySelector("h2, h3");
  heading?.focus({ preventScroll: true });
  target?.scrollIntoView({ block: "start" });
}

/** Reads the session and draws it again, keeping the spans opened, the chosen one and the focus. */
async function rerender(session, { focus = false } = {}) {
  let data;
  try {
    data = await loadSession(session);
  } catch (error) {
    if (viewed.session !== session) return false;
    dom.detail.replaceChildren(
      el("p", { class: "error", role: "alert" }, `The session ${session} could not be loaded: ${error.message}`),
    );
    return false;
  }
  if (viewed.session !== session) return false;
  const focused = document.activeElement?.closest?.(".waterfall [data-key]")?.dataset.key;
  const rendered = renderSession(session, data, { priced, state: viewed.state, open: openSpan });
  viewed.spans = rendered.spans;
  viewed.context = rendered.context;
  const view = el("div", { class: "session-view" }, rendered.nodes);
  // A run that did not change keeps its elements (a Replay form being filled, details opened).
  for (const section of view.querySelectorAll("section.run")) {
    const before = document.getElementById(section.id);
    if (before?.dataset.version === section.dataset.version) section.replaceWith(before);
  }
  dom.detail.replaceChildren(view);
  if (!focus && focused)
    dom.detail.querySelector(`[data-key="${CSS.escape(focused)}"]`)?.focus({ preventScroll: true });
  // The span read in the panel follows what changed in it (a call that ended, an approval decided).
  const shown = panel.shown();
  const now = shown && viewed.spans.get(shown.key);
  if (now && signature(now) !== signature(shown)) panel.show(now, viewed.context, { focus: false, closed: spanClosed });
  return true;
}

const signature = (span) => JSON.stringify([span.end, span.status, span.label, span.step?.at, span.call?.id]);

function openSpan(span, row) {
  viewed.state.selected = span.key;
  if (row) markSpan(row.closest(".waterfall") ?? dom.detail, span.key);
  panel.show(span, viewed.context, { closed: spanClosed });
  // The address names the span, so a link opens it again.
  const params = new URLSearchParams(location.hash.slice(1));
  params.set("span", span.key);
  history.replaceState(null, "", `#${params}`);
}

function spanClosed() {
  const params = new URLSearchParams(location.hash.slice(1));
  params.delete("span");
  history.replaceState(null, "", `#${params}`);
}
