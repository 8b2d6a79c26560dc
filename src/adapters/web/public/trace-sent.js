// What the model saw: the exact messages a model call sent, with what changed since the run's
// previous model call marked (a new tool result, a summary folded into the system message, a note
// to the model, the thread's context, remembered notes), the tools it was offered, and the raw
// request on demand; for a fold, the messages it took out of view.
import { api, describeCall, el, formatNumber, pretty, shorten } from "./common.js";
import { jsonView, plainText, rawDetails } from "./trace-render.js";

const SUMMARY_HEADING = "## Earlier in this conversation (summary)";
/** Requests never change once written: each is fetched once per page. */
const payloads = new Map();

export function loadPayload(runId, step) {
  const key = `${runId}:${step}`;
  if (!payloads.has(key)) {
    const loading = api(`/api/runs/${encodeURIComponent(runId)}/steps/${step}/payload`);
    loading.catch(() => payloads.delete(key));
    payloads.set(key, loading);
  }
  return payloads.get(key);
}

/** "What the model saw" for step `step` of a run, compared with `previous` (a step of the same run, or null). */
export function sentSection(runId, step, previous) {
  const body = el("div", { class: "payload-body" }, el("p", {}, "Loading…"));
  void fill(body, async () => {
    const [sent, before] = await Promise.all([
      loadPayload(runId, step),
      previous === null ? null : loadPayload(runId, previous).catch(() => null),
    ]);
    return sentView(sent, before);
  });
  return el("section", { class: "sent", "aria-label": "What the model saw" }, el("h3", {}, "What the model saw"), body);
}

/** The messages a fold took out of view: in the previous model call's request and not in this one. */
export function replacedSection(fold, current, previous) {
  const body = el("div", { class: "payload-body" }, el("p", {}, "Loading…"));
  void fill(body, async () => {
    if (!previous) return el("p", { class: "hint" }, "No earlier model call is recorded in this session.");
    const [sent, before] = await Promise.all([
      loadPayload(current.runId, current.step),
      loadPayload(previous.runId, previous.step),
    ]);
    // The system message is not replaced but rewritten (the summary rides in it): it is not listed.
    const gone = compare(sent.messages, before.messages).removed.filter((message) => message !== before.messages[0]);
    const unseen = fold.foldedMessages - gone.length;
    return [
      el(
        "p",
        { class: "hint" },
        `${formatNumber(gone.length)} message${gone.length === 1 ? " was" : "s were"} sent in the model call before and not in this one.`,
        unseen > 0
          ? ` The other ${formatNumber(unseen)} folded (the answers and results after that call) were never sent before the fold.`
          : "",
      ),
      el(
        "ol",
        { class: "payload-messages replaced" },
        gone.map((message) => messageItem(message, null)),
      ),
    ];
  });
  return el(
    "section",
    { class: "sent", "aria-label": "Messages it replaced" },
    el("h3", {}, "Messages it replaced"),
    body,
  );
}

async function fill(body, build) {
  try {
    // el() leaves out what is null, at any depth.
    body.replaceChildren(el("div", { class: "payload-content" }, await build()));
  } catch (error) {
    body.replaceChildren(
      el("p", { class: "error", role: "alert" }, `This step's request could not be loaded: ${error.message}`),
    );
  }
}

function sentView(sent, before) {
  const { marks, removed } = before ? compare(sent.messages, before.messages) : firstCall(sent.messages);
  const changed = marks.filter((mark) => mark !== null).length;
  const summary = before
    ? `${changed} of ${sent.messages.length} messages are new or changed since model call ${before.step}` +
      (removed.length ? `; ${removed.length} sent then are not sent now.` : ".")
    : "The run's first model call: everything is new to it.";
  return [
    requestSettings(sent),
    el("h4", {}, `Messages (${sent.messages.length})`),
    el("p", { class: "hint diff-summary" }, summary),
    el(
      "ol",
      { class: "payload-messages" },
      sent.messages.map((message, index) => messageItem(message, marks[index])),
    ),
    removed.length
      ? el(
          "details",
          { class: "removed" },
          el("summary", {}, `No longer sent (${removed.length})`),
          el(
            "ol",
            { class: "payload-messages" },
            removed.map((message) => messageItem(message, null)),
          ),
        )
      : null,
    toolsOffered(sent.request?.tools, before?.request?.tools),
    rawDetails({ model: sent.model, ...(sent.request ?? {}), messages: sent.messages }, "Raw request (JSON)"),
  ];
}

/** Which messages are new (or changed) against the previous request, and what each is; and those it no longer has. */
function compare(messages, previousMessages) {
  const left = new Map();
  for (const message of previousMessages) {
    const key = JSON.stringify(message);
    left.set(key, [...(left.get(key) ?? []), message]);
  }
  const marks = messages.map((message, index) => {
    const kept = left.get(JSON.stringify(message));
    if (kept?.length) {
      kept.pop();
      return null;
    }
    return kindOf(message, index, previousMessages[0]);
  });
  return { marks, removed: [...left.values()].flat() };
}

/** A first call has nothing to compare with; what was put into it is still named. */
function firstCall(messages) {
  const marks = messages.map((message, index) => {
    const kind = kindOf(message, index, undefined);
    return ["summary", "thread", "remembered", "note"].includes(kind.kind) ? kind : null;
  });
  return { marks, removed: [] };
}

function kindOf(message, index, previousSystem) {
  const text = textOf(message.content);
  if (message.role === "tool") return { kind: "tool-result", label: "new tool result" };
  if (message.role === "assistant") return { kind: "reply", label: "the model's reply" };
  if (message.role === "system" && index === 0) {
    const hadSummary = textOf(previousSystem?.content).includes(SUMMARY_HEADING);
    if (text.includes(SUMMARY_HEADING))
      return { kind: "summary", label: hadSummary ? "summary rewritten: memory folded more" : "summary folded in" };
    return { kind: "system", label: "system prompt changed" };
  }
  if (message.role === "system") return { kind: "note", label: "note to the model" };
  if (text.includes("<thread-context>")) return { kind: "thread", label: "thread context" };
  if (text.includes("<remembered-notes>")) return { kind: "remembered", label: "remembered notes" };
  return { kind: "new", label: "new" };
}

function textOf(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((part) => part.text ?? "").join("\n");
  return "";
}

function messageItem(message, mark) {
  return el(
    "li",
    {
      class: `payload-message role-${message.role}${mark ? ` changed change-${mark.kind}` : ""}`,
      "data-change": mark?.kind ?? false,
    },
    el("span", { class: "role" }, message.role + (message.tool_call_id ? ` (${message.tool_call_id})` : "")),
    mark ? el("span", { class: "change-label" }, mark.label) : null,
    messageContent(message),
    message.tool_calls
      ? [
          el(
            "ul",
            { class: "asked-calls" },
            message.tool_calls.map((call) =>
              el("li", {}, el("code", {}, describeCall(call.function?.name ?? "?", parsedObject(call.function)))),
            ),
          ),
          rawDetails(message.tool_calls, "Raw tool calls"),
        ]
      : null,
  );
}

function messageContent(message) {
  const { content } = message;
  if (!content) return null;
  if (Array.isArray(content)) return content.map(contentPart);
  if (typeof content !== "string") return el("pre", {}, pretty(content));
  if (message.role === "tool") {
    try {
      return [jsonView(JSON.parse(content)), rawDetails(content)];
    } catch {
      return plainText(content);
    }
  }
  return plainText(content);
}

function parsedObject(fn) {
  try {
    return JSON.parse(fn?.arguments ?? "{}");
  } catch {
    return { arguments: fn?.arguments ?? "" };
  }
}

/** A part of a user message with attachments: its text, or the image as the model was sent it (small, with its type and size). */
function contentPart(part) {
  if (part.type === "text") return plainText(part.text);
  const url = part.image_url?.url ?? "";
  const [, type = "image", data = ""] = /^data:([^;,]+)(?:;[^,]*)?,(.*)$/.exec(url) ?? [];
  const about = url.startsWith("data:")
    ? `image part: ${type}, ${formatNumber(Math.floor((data.length * 3) / 4) - (data.match(/=*$/)?.[0].length ?? 0))} bytes`
    : `image part: ${shorten(url, 80)}`;
  return el(
    "figure",
    { class: "image-part" },
    url.startsWith("data:") ? el("img", { src: url, alt: about }) : null,
    el("figcaption", {}, about),
  );
}

/** The request around the messages: what the trace kept of it. */
function requestSettings({ model, request }) {
  const rows = [["Model", model ?? "not recorded"]];
  for (const [name, value] of Object.entries(request ?? {}))
    if (name !== "tools" && name !== "model")
      rows.push([name, typeof value === "string" ? value : JSON.stringify(value)]);
  return el(
    "dl",
    { class: "request-settings" },
    rows.map(([name, value]) => [el("dt", {}, name), el("dd", {}, value)]),
  );
}

function toolsOffered(tools, previousTools) {
  if (!Array.isArray(tools))
    return el(
      "p",
      { class: "hint" },
      "The trace keeps this step's messages and the model that answered; the tool schemas and settings it was sent with (tools, tool_choice, streaming) are not recorded.",
    );
  const before = Array.isArray(previousTools) ? new Set(previousTools.map((tool) => tool.function?.name)) : null;
  return [
    el("h4", {}, `Tools offered (${tools.length})`),
    el(
      "ul",
      { class: "payload-tools" },
      tools.map((tool) => {
        const name = tool.function?.name ?? "?";
        const added = before !== null && !before.has(name);
        return el(
          "li",
          { class: added ? "changed" : false },
          el(
            "details",
            {},
            el(
              "summary",
              {},
              el("code", {}, name),
              " — ",
              shorten(tool.function?.description ?? "", 120),
              added ? el("span", { class: "change-label" }, "newly offered") : null,
            ),
            el("pre", {}, pretty(tool.function?.parameters ?? {})),
          ),
        );
      }),
    ),
  ];
}
