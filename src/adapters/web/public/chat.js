// The chat page: one conversation (web:<id>, kept in this browser), its history, and its live
// events over Server-Sent Events — the model's thinking (collapsed), tool activity, the streamed
// answer, and Approve / Deny for dangerous tools, decided through the same durable approvals as in
// Slack or Discord. The newest message stays in view (chat-follow), a run in progress can be
// stopped, and a pipeline's stages show inside the one answer they make.
import { createApprovalCards } from "./chat-approval.js";
import { createAttachments } from "./chat-attach.js";
import { feedbackControls } from "./chat-feedback.js";
import { APPROVAL_NEWS, createFollower } from "./chat-follow.js";
import {
  $,
  api,
  describeCall,
  el,
  eventsUrl,
  formatMs,
  formatNumber,
  markdown,
  pretty,
  randomId,
  showActingAs,
  thinkingDetails,
} from "./common.js";
import { isNextStage } from "./pipelines.js";

const USER_KEY = "glassbox.user";
const SESSION_KEY = "glassbox.session";

/** Who this browser is: a stable id, sent with every message and decision. */
// A user's token (GLASSBOX_API_USERS) names its user; otherwise this browser keeps an id of its own.
let userId = localStorage.getItem(USER_KEY) ?? keep(USER_KEY, `web:${randomId()}`);
/** A new conversation has no history to load. */
let fresh = localStorage.getItem(SESSION_KEY) === null;
let session = `web:${localStorage.getItem(SESSION_KEY) ?? keep(SESSION_KEY, randomId())}`;

const dom = {
  messages: $("#messages"),
  empty: $("#empty"),
  capabilities: $("#capabilities"),
  form: $("#composer"),
  input: $("#message"),
  send: $("#send"),
  stop: $("#stop"),
  newChat: $("#new-chat"),
  jump: $("#jump"),
  connection: $("#connection"),
  sendError: $("#send-error"),
  announcer: $("#announcer"),
  problem: $("#problem"),
  model: $("#model-label"),
  traceLink: $("#trace-link"),
  files: $("#files"),
  attachments: $("#attachments"),
};

/** The page's view of each run of this session, by run id (a pipeline's stages share their first stage's view). */
const runs = new Map();
const follower = createFollower(dom.jump, dom.form);
const attached = createAttachments(dom.files, dom.attachments);
const cards = createApprovalCards(() => userId, {
  waiting: (card) => follower.hold(card),
  settled: (card) => follower.release(card),
});
let stream;
let live = false;
let problem = null;
let sending = false;

dom.form.addEventListener("submit", (event) => {
  event.preventDefault();
  void send();
});
dom.input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    void send();
  }
});
dom.stop.addEventListener("click", () => void stop());
// Answered by glassbox itself, for this user: its tools here, which ask first, their budget, memory.
dom.capabilities.addEventListener("click", () => {
  dom.input.value = "What can you do here?";
  void send();
});
dom.newChat.addEventListener("click", () => {
  session = `web:${keep(SESSION_KEY, randomId())}`;
  fresh = true;
  void openSession();
  dom.input.focus();
});

void start();

async function start() {
  try {
    const info = await api("/api/info");
    dom.model.textContent = info.model ?? "none configured";
    if (info.user) userId = info.user;
    showActingAs(info.user);
    showHints(info.hints ?? []);
    if (info.problem) showProblem(info.problem);
  } catch (error) {
    dom.problem.replaceChildren(el("strong", {}, "glassbox did not say which model answers. "), error.message);
    dom.problem.hidden = false;
  }
  await openSession();
}

/** The empty chat suggests what the tools this bot has can do (the server knows which). */
function showHints(hints) {
  if (hints.length === 0) return;
  dom.empty.replaceChildren(
    "Try, for example: ",
    ...hints.flatMap((hint, index) => [index > 0 ? " or " : "", el("q", {}, hint)]),
  );
}

function showProblem(sentence) {
  problem = sentence;
  dom.problem.replaceChildren(el("strong", {}, "No model yet. "), sentence, " Then restart glassbox.");
  dom.problem.hidden = false;
  updateSendButton();
}

/** Shows the session's history, then follows its events. */
async function openSession() {
  stream?.close();
  runs.clear();
  cards.clear();
  dom.messages.replaceChildren();
  dom.traceLink.href = `/trace#session=${encodeURIComponent(session)}`;
  if (!fresh) await loadHistory();
  fresh = false;
  updateEmpty();
  updateStopButton();
  follower.follow();
  connect();
}

async function loadHistory() {
  let history = [];
  try {
    history = (await api(`/api/sessions/${encodeURIComponent(session)}/runs`)).runs;
  } catch (error) {
    if (error.status !== 404) showSendError(`The conversation so far could not be loaded: ${error.message}`);
  }
  let previous = null;
  for (const run of history.filter((one) => !one.parentRunId)) {
    // A pipeline's later stage goes on in its first stage's answer, as it did live.
    const view = isNextStage(run, previous)
      ? addStage(runs.get(previous.runId), run.runId, previous.output)
      : viewOf(run.runId, run.input);
    previous = run;
    for (const approval of run.approvals) {
      cards.show(view.activity, approval);
      cards.decided(approval);
    }
    if (run.done || run.status === "awaiting_approval")
      endRun(
        view,
        {
          stopReason: run.status,
          output: run.output ?? "",
          steps: run.steps,
          usage: { promptTokens: run.promptTokens, completionTokens: run.completionTokens },
          feedback: run.feedback ?? [],
        },
        false,
      );
    else {
      view.state = run.status === "accepted" ? "waiting" : "running";
      setStatus(view, "Working…");
    }
  }
  updateEmpty();
}

/** Follows the session's events; the browser reconnects by itself and gets what it missed. */
function connect() {
  const opened = new EventSource(eventsUrl(`/api/sessions/${encodeURIComponent(session)}/events`));
  stream = opened;
  opened.addEventListener("open", () => setLive(true));
  opened.addEventListener("message", (message) => onEvent(JSON.parse(message.data)));
  opened.addEventListener("error", () => {
    setLive(false);
    // Closed for good (a refused token, say): ask the API, which asks for a token if needed, then again.
    if (opened.readyState === EventSource.CLOSED && stream === opened) {
      setTimeout(() => void api("/api/info").finally(() => stream === opened && connect()), 2000);
    }
  });
}

function setLive(value) {
  live = value;
  dom.connection.textContent = value ? "Live" : "Reconnecting…";
  dom.connection.classList.toggle("offline", !value);
  updateSendButton();
}

function updateSendButton() {
  dom.send.disabled = !live || sending || problem !== null;
}

async function send() {
  const input = dom.input.value.trim();
  if ((!input && attached.count === 0) || dom.send.disabled) return;
  sending = true;
  updateSendButton();
  dom.sendError.hidden = true;
  try {
    const { attachments, problems, names } = await attached.take();
    const sent = await api("/api/runs", {
      method: "POST",
      body: { session, input, userId, ...(attachments.length ? { attachments } : {}) },
    });
    const { runId } = sent;
    attached.clear();
    // What was typed, even when the run's start came first with less ("/pipeline name" taken off), and the files' names.
    viewOf(runId).userText.textContent = [input, ...names.map((name) => `Attached: ${name}`)]
      .filter(Boolean)
      .join("\n");
    const said = [...problems, ...(sent.problems ?? [])];
    if (said.length) showSendError(said.join(" "));
    dom.input.value = "";
    updateEmpty();
    follower.follow(); // sending brings the conversation back to its newest message
  } catch (error) {
    showSendError(error.message);
  } finally {
    sending = false;
    updateSendButton();
  }
}

/** The run in progress: the one run of this session that runs now (one at a time per session). */
function runningView() {
  return [...new Set(runs.values())].find((view) => view.state === "running");
}

function updateStopButton() {
  dom.stop.hidden = runningView() === undefined;
}

async function stop() {
  const view = runningView();
  if (!view) return;
  dom.stop.disabled = true;
  dom.sendError.hidden = true;
  try {
    await api(`/api/runs/${encodeURIComponent(view.currentRunId)}/cancel`, { method: "POST", body: {} });
    setStatus(view, "Stopping…");
  } catch (error) {
    showSendError(error.message);
  } finally {
    dom.stop.disabled = false;
  }
}

function showSendError(text) {
  dom.sendError.textContent = text;
  dom.sendError.hidden = false;
}

function onEvent(event) {
  // A notice follows an answer on this page; one for a run the page never showed has nothing to follow.
  if (event.type === "notice" && !runs.has(event.runId)) return;
  const view = event.type === "run_start" ? startedView(event) : viewOf(event.runId);
  switch (event.type) {
    case "run_start":
      view.state = "running";
      setStatus(view, "Thinking…");
      break;
    case "run_resumed":
      view.state = "running";
      view.currentRunId = event.runId;
      setStatus(view, "Continuing…");
      break;
    case "queued":
      setStatus(view, "Queued: glassbox is busy with other requests; yours starts as soon as one finishes.");
      break;
    case "model_start":
      view.text = "";
      view.answer.textContent = "";
      break;
    case "model_delta":
      view.text += event.text;
      view.answer.replaceChildren(markdown(view.text));
      break;
    case "model_end":
      view.tokens += event.promptTokens + event.completionTokens;
      // The step's thinking goes with the activity, in order, so it sits above the answer it led to.
      if (event.reasoning)
        view.activity.append(
          el(
            "li",
            { class: "thinking-item" },
            thinkingDetails(event.reasoning, event.reasoningCutChars, "are not shown here; the trace keeps more"),
          ),
        );
      break;
    case "tool_start":
      startTool(view, event);
      setStatus(view, `Calling ${event.name}…`);
      break;
    case "tool_end":
      endTool(view, event.record);
      setStatus(view, "Thinking…");
      break;
    case "note":
      view.activity.append(el("li", { class: "note" }, "Note to the model: ", event.text));
      break;
    case "approval_requested":
      waitingTool(view, event.approval.toolCallId);
      cards.show(view.activity, event.approval);
      announce(`Approval needed: glassbox wants to run ${event.approval.tool}.`);
      break;
    case "approval_decided":
      cards.decided(event.approval);
      break;
    case "run_end":
      endRun(view, event, true);
      break;
    case "notice":
      view.footer.before(el("p", { class: "notice" }, event.text));
      announce(event.text);
      break;
  }
  updateEmpty();
  updateStopButton();
  follower.changed(event.type === "approval_requested" ? APPROVAL_NEWS : undefined);
}

/** The view a starting run shows in: a pipeline's later stage goes on in the answer of the stage before. */
function startedView(event) {
  const running = runs.has(event.runId) || !(event.pipeline?.stage > 1) ? undefined : runningView();
  return running ? addStage(running, event.runId, running.text) : viewOf(event.runId, event.input);
}

/** A pipeline's next stage: the stage before keeps its answer, openable; the new stage's answer follows. */
function addStage(view, runId, previousAnswer) {
  view.stage += 1;
  view.activity.append(
    el(
      "li",
      { class: "stage" },
      el(
        "details",
        {},
        el("summary", {}, `Stage ${view.stage - 1} answered; stage ${view.stage} works on its answer`),
        el("div", { class: "stage-answer" }, markdown(previousAnswer || "(no answer)")),
      ),
    ),
  );
  view.text = "";
  view.answer.replaceChildren();
  view.currentRunId = runId;
  runs.set(runId, view);
  return view;
}

/** The user's message and the assistant's answer of one run, made on first sight. */
function viewOf(runId, input) {
  let view = runs.get(runId);
  if (view) {
    if (input && !view.userText.textContent) view.userText.textContent = input;
    return view;
  }
  const userText = el("p", { class: "text" }, input ?? "");
  const status = el("p", { class: "status" }, "Waiting for its turn…");
  // Tool activity and approvals, in the order they happened.
  const activity = el("ul", { class: "activity", "aria-label": "Tool activity and approvals" });
  const answer = el("div", { class: "answer" });
  const footer = el("p", { class: "run-footer" });
  const assistant = el(
    "li",
    { class: "message assistant", "data-run-id": runId },
    el("span", { class: "who" }, "glassbox"),
    status,
    activity,
    answer,
    footer,
  );
  dom.messages.append(el("li", { class: "message user" }, el("span", { class: "who" }, "You"), userText), assistant);
  // state: waiting (for its turn) | running | paused (for an approval) | ended
  view = {
    runId,
    currentRunId: runId,
    state: "waiting",
    stage: 1,
    userText,
    status,
    activity,
    answer,
    footer,
    assistant,
    tools: new Map(),
    text: "",
    tokens: 0,
  };
  runs.set(runId, view);
  follower.changed();
  return view;
}

function setStatus(view, text) {
  view.status.textContent = text;
  view.status.hidden = false;
}

function startTool(view, event) {
  const line = el("li", { class: "tool running" }, mark("…"), `calling ${describeCall(event.name, event.arguments)}`);
  view.tools.set(event.toolCallId, line);
  view.activity.append(line);
}

/**
 * A call shown running that turns out to wait for a person: its card stands in its place. (Read from
 * the store beside a worker, a call can be seen between the model's reply and the run's pause.)
 */
function waitingTool(view, toolCallId) {
  const line = view.tools.get(toolCallId);
  if (!line?.classList.contains("running")) return;
  line.remove();
  view.tools.delete(toolCallId);
}

function endTool(view, record) {
  const ok = record.envelope.status === "success";
  const summary = ok
    ? `${record.name} · ${formatMs(record.durationMs)}`
    : `${record.name}: ${record.envelope.error.type}`;
  const details = el(
    "details",
    {},
    el("summary", {}, mark(ok ? "✓" : "⚠"), summary),
    el("pre", { class: "payload" }, pretty(ok ? record.envelope.data : record.envelope.error)),
  );
  const line = el("li", { class: `tool ${ok ? "ok" : "failed"}` }, details);
  const started = view.tools.get(record.id);
  if (started) started.replaceWith(line);
  else view.activity.append(line);
  view.tools.set(record.id, line);
}

function endRun(view, end, announceIt) {
  view.state = end.stopReason === "awaiting_approval" ? "paused" : "ended";
  view.status.hidden = true;
  view.answer.classList.remove("error");
  if (end.stopReason === "final" || end.stopReason === "max_steps")
    view.answer.replaceChildren(markdown(end.output || "(no answer)"));
  else if (end.stopReason === "awaiting_approval") setStatus(view, "Waiting for a decision on the approval below.");
  else if (end.stopReason === "cancelled") view.answer.textContent = "Stopped.";
  else if (end.stopReason === "superseded")
    setStatus(view, "Ended: a newer message came before the approval was decided.");
  else if (end.stopReason === "interrupted")
    setStatus(view, "Interrupted: glassbox stopped while this was running; ask again.");
  else {
    view.answer.textContent = end.output;
    view.answer.classList.add("error");
  }
  const tokens = (end.usage?.promptTokens ?? 0) + (end.usage?.completionTokens ?? 0);
  view.footer.replaceChildren(
    `${end.steps ?? 0} step${end.steps === 1 ? "" : "s"} · ${formatNumber(tokens)} tokens · `,
    el(
      "a",
      { href: `/trace#session=${encodeURIComponent(session)}&run=${encodeURIComponent(view.runId)}` },
      "see every step in the trace",
    ),
  );
  // An answer can be rated: the one shown, a pipeline's last stage's.
  view.feedback?.remove();
  view.feedback = null;
  if (end.stopReason === "final" || end.stopReason === "max_steps") {
    view.feedback = feedbackControls(
      view.currentRunId,
      () => userId,
      end.feedback?.find((one) => one.userId === userId),
    );
    view.footer.after(view.feedback);
  }
  if (announceIt && end.stopReason !== "awaiting_approval") announce(view.answer.textContent);
}

/** A status symbol; screen readers get the words next to it instead. */
function mark(symbol) {
  return el("span", { class: "mark", "aria-hidden": "true" }, symbol);
}

function announce(text) {
  dom.announcer.textContent = text;
}

function updateEmpty() {
  dom.empty.hidden = runs.size > 0;
}

function keep(key, value) {
  localStorage.setItem(key, value);
  return value;
}
