// Shared by the chat page and the trace viewer: the API token (asked once when the server wants
// one, or taken from ?token=), JSON requests, event-stream addresses, and small helpers to build
// the page safely (text is always set as text, never parsed as HTML).

const TOKEN_KEY = "glassbox.token";

const storedToken = () => localStorage.getItem(TOKEN_KEY) ?? "";

/** Settles once a ?token= in the address is kept or declined; the first request waits for it. */
const addressToken = takeTokenFromAddress();

/**
 * ?token=... in the address leaves the address bar and is kept for later. A link must not quietly
 * make this browser act as someone else: when it carries another token than the one kept, the
 * person is asked first.
 */
function takeTokenFromAddress() {
  const url = new URL(location.href);
  const token = url.searchParams.get("token");
  if (token === null) return Promise.resolve();
  url.searchParams.delete("token");
  history.replaceState(null, "", url);
  if (storedToken() === "" || storedToken() === token) {
    localStorage.setItem(TOKEN_KEY, token);
    return Promise.resolve();
  }
  return askToSwitchToken(token);
}

export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

/** A JSON request to the API; a 401 asks the person for the token once, then tries again. */
export async function api(path, { method = "GET", body } = {}) {
  await addressToken;
  for (;;) {
    const headers = { accept: "application/json" };
    if (storedToken()) headers.authorization = `Bearer ${storedToken()}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    const response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (response.status === 401) {
      await askForToken(storedToken() !== "");
      continue;
    }
    const data = await response.json().catch(() => ({}));
    if (!response.ok)
      throw new ApiError(response.status, data.error ?? `The server answered HTTP ${response.status}.`, data);
    return data;
  }
}

/** An event stream's address; EventSource cannot send headers, so the token goes in the query. */
export function eventsUrl(path) {
  return storedToken() ? `${path}?token=${encodeURIComponent(storedToken())}` : path;
}

let asking;
/** Shows a small dialog asking for an API token (GLASSBOX_API_TOKEN or one of GLASSBOX_API_USERS); resolves once one is given. */
function askForToken(wasWrong) {
  asking ??= new Promise((resolve) => {
    const input = el("input", { id: "token-input", type: "password", autocomplete: "current-password", required: "" });
    const form = el(
      "form",
      { method: "dialog" },
      el("h2", { id: "token-title" }, "API token"),
      el(
        "p",
        {},
        wasWrong ? "That token was not accepted. " : "",
        "This glassbox asks for an API token (GLASSBOX_API_TOKEN, or your own from GLASSBOX_API_USERS). It is kept in this browser.",
      ),
      el("label", { for: "token-input" }, "Token"),
      input,
      el("div", { class: "buttons" }, el("button", { type: "submit", class: "primary" }, "Use this token")),
    );
    const dialog = el("dialog", { class: "token-dialog", "aria-labelledby": "token-title" }, form);
    form.addEventListener("submit", () => {
      localStorage.setItem(TOKEN_KEY, input.value.trim());
      dialog.remove();
      resolve();
    });
    dialog.addEventListener("cancel", (event) => event.preventDefault());
    document.body.append(dialog);
    dialog.showModal();
  }).finally(() => {
    asking = undefined;
  });
  return asking;
}

/** Asks whether to use a link's token instead of the one this browser keeps; resolves once answered. */
function askToSwitchToken(token) {
  return new Promise((resolve) => {
    const decide = (use) => {
      if (use) localStorage.setItem(TOKEN_KEY, token);
      dialog.remove();
      resolve();
    };
    const dialog = el(
      "dialog",
      { class: "token-dialog", "aria-labelledby": "switch-title" },
      el("h2", { id: "switch-title" }, "Another API token"),
      el(
        "p",
        {},
        "This link carries an API token other than the one this browser keeps. With it you act as whoever it belongs to. Use it from now on?",
      ),
      el(
        "div",
        { class: "buttons" },
        button("Keep my token", () => decide(false)),
        button("Use the link's token", () => decide(true), "primary"),
      ),
    );
    dialog.addEventListener("cancel", (event) => {
      event.preventDefault();
      decide(false);
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}

function button(label, onClick, className) {
  const made = el("button", { type: "button", ...(className ? { class: className } : {}) }, label);
  made.addEventListener("click", onClick);
  return made;
}

/** Says in the page's header whom a user's token acts as (GLASSBOX_API_USERS); nothing for the service token. */
export function showActingAs(user) {
  const acting = document.getElementById("acting");
  if (!acting) return;
  acting.hidden = !user;
  if (user) document.getElementById("acting-user").textContent = user;
}

/** Builds an element: attributes (strings; booleans add or leave out), then children (nodes or text). */
export function el(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  setAttributes(element, attributes);
  element.append(
    ...children.flat(Infinity).filter((child) => child !== null && child !== undefined && child !== false),
  );
  return element;
}

/** The same for SVG elements. */
export function svg(tag, attributes = {}, ...children) {
  const element = document.createElementNS("http://www.w3.org/2000/svg", tag);
  setAttributes(element, attributes);
  element.append(
    ...children.flat(Infinity).filter((child) => child !== null && child !== undefined && child !== false),
  );
  return element;
}

function setAttributes(element, attributes) {
  for (const [name, value] of Object.entries(attributes)) {
    if (value === false || value === null || value === undefined) continue;
    element.setAttribute(name, value === true ? "" : String(value));
  }
}

export const $ = (selector) => document.querySelector(selector);

const numberFormat = new Intl.NumberFormat("en-US");
export const formatNumber = (value) => numberFormat.format(value ?? 0);

/** Dollars, or "—" when the model has no known price (never a made-up 0). */
export function formatCost(cost) {
  if (cost === null || cost === undefined) return "—";
  if (cost === 0) return "$0";
  return cost < 0.01 ? `$${cost.toFixed(5)}` : `$${cost.toFixed(4)}`;
}

export function formatMs(ms) {
  if (ms === null || ms === undefined) return "—";
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
}

export function formatTime(iso) {
  if (!iso) return "";
  return new Date(iso).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

/** The time, with the date when it is not today ("Apr 10, 14:32:05"). */
export function formatWhen(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  if (date.toDateString() === new Date().toDateString()) return formatTime(iso);
  return `${date.toLocaleDateString([], { month: "short", day: "numeric", year: date.getFullYear() === new Date().getFullYear() ? undefined : "numeric" })}, ${formatTime(iso)}`;
}

/** A tool call as one short line: get_order_status(order_id: 20240315001). */
export function describeCall(name, args) {
  const parts = Object.entries(args ?? {}).map(
    ([key, value]) => `${key}: ${shorten(typeof value === "string" ? value : JSON.stringify(value), 60)}`,
  );
  return shorten(`${name}(${parts.join(", ")})`, 160);
}

export function shorten(text, maxLength) {
  const oneLine = String(text).replace(/\s+/g, " ");
  return oneLine.length > maxLength ? `${oneLine.slice(0, maxLength - 1)}…` : oneLine;
}

export const pretty = (value) => JSON.stringify(value, null, 2);

/**
 * A model's reasoning, collapsed under "Thinking" (it can be long, and it is not the answer); the
 * summary says how long it is, and a cut one says how much is missing and `why`.
 */
export function thinkingDetails(reasoning, cutChars, why) {
  return el(
    "details",
    { class: "thinking" },
    el("summary", {}, `Thinking · ${formatNumber(reasoning.length + (cutChars ?? 0))} characters`),
    el("div", { class: "thinking-text" }, reasoning),
    cutChars ? el("p", { class: "hint" }, `Cut here: ${formatNumber(cutChars)} more characters ${why}.`) : null,
  );
}

/** 16 hex digits. getRandomValues, not randomUUID: the page also runs over plain HTTP on a LAN address, where randomUUID is missing. */
export const randomId = () =>
  Array.from(crypto.getRandomValues(new Uint8Array(8)), (byte) => byte.toString(16).padStart(2, "0")).join("");

/**
 * A little Markdown as elements (never parsed as HTML): paragraphs, line breaks, "- " lists,
 * **bold** and `code` — enough for a model's answers to read well.
 */
export function markdown(text) {
  const fragment = document.createDocumentFragment();
  for (const block of String(text).split(/\n{2,}/)) {
    const lines = block.split("\n").filter((line) => line.trim() !== "");
    if (lines.length === 0) continue;
    if (lines.every((line) => /^\s*[-*] /.test(line))) {
      fragment.append(
        el(
          "ul",
          {},
          lines.map((line) => el("li", {}, inline(line.replace(/^\s*[-*] /, "")))),
        ),
      );
    } else {
      fragment.append(
        el(
          "p",
          {},
          lines.flatMap((line, index) => (index === 0 ? inline(line) : [el("br"), ...inline(line)])),
        ),
      );
    }
  }
  return fragment;
}

function inline(text) {
  return text
    .split(/(\*\*[^*]+\*\*|`[^`]+`)/)
    .filter((part) => part !== "")
    .map((part) =>
      part.startsWith("**") && part.endsWith("**") && part.length > 4
        ? el("strong", {}, part.slice(2, -2))
        : part.startsWith("`") && part.endsWith("`") && part.length > 2
          ? el("code", {}, part.slice(1, -1))
          : part,
    );
}
