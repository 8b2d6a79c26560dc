/**
 * Tool calls a model wrote as text because the server's tool parser is off: Hermes/Qwen's
 * `<tool_call>{…}</tool_call>`, Llama 3.x's bare `{"name": …, "parameters": …}` (with or without
 * `<|python_tag|>`), and Mistral's `[TOOL_CALLS]` (a JSON list, or `name[ARGS]{…}`). They count as
 * calls only when every one names a tool on offer, so an answer that happens to be JSON stays an
 * answer. `TextCallGate` keeps such text out of the streamed answer until the reply has ended.
 */
import { jsonrepair } from "jsonrepair";
import { isPlainObject } from "../../tools/args.js";

export interface TextCall {
  name: string;
  /** The arguments as JSON text. */
  arguments: string;
}

export interface RecoveredCalls {
  calls: TextCall[];
  /** The text around the calls (what the model said besides them). */
  text: string;
  /** How the calls were written, for the trace. */
  format: string;
}

const MARKERS = ["<tool_call>", "[TOOL_CALLS]", "<|python_tag|>"] as const;

/** The calls written in `text`, if it holds calls to offered tools and only those. */
export function recoverTextCalls(text: string, offered: ReadonlySet<string>): RecoveredCalls | undefined {
  if (offered.size === 0) return undefined;
  const found = hermesCalls(text) ?? mistralCalls(text) ?? bareJsonCalls(text);
  if (!found || found.calls.length === 0) return undefined;
  if (!found.calls.every((call) => offered.has(call.name))) return undefined;
  return found;
}

/** `<tool_call>{"name": …, "arguments": …}</tool_call>`, one or more; the last may be cut off before its closing tag. */
function hermesCalls(text: string): RecoveredCalls | undefined {
  const first = text.indexOf("<tool_call>");
  if (first < 0) return undefined;
  const calls: TextCall[] = [];
  const around: string[] = [text.slice(0, first)];
  let position = first;
  while (position >= 0 && position < text.length) {
    const start = position + "<tool_call>".length;
    const end = text.indexOf("</tool_call>", start);
    const call = callOf(parseLoose(text.slice(start, end < 0 ? undefined : end)));
    if (!call) return undefined;
    calls.push(call);
    if (end < 0) break;
    const next = text.indexOf("<tool_call>", end);
    around.push(text.slice(end + "</tool_call>".length, next < 0 ? undefined : next));
    position = next;
  }
  return { calls, text: around.join("").trim(), format: "Hermes <tool_call> tags" };
}

/** `[TOOL_CALLS][{"name": …, "arguments": …}]` (older Mistral templates) or `[TOOL_CALLS]name[ARGS]{…}` (newer ones, `[CALL_ID]id` optional). */
function mistralCalls(text: string): RecoveredCalls | undefined {
  const first = text.indexOf("[TOOL_CALLS]");
  if (first < 0) return undefined;
  const before = text.slice(0, first).trim();
  const rest = text.slice(first);
  const calls: TextCall[] = [];
  for (const part of rest.split("[TOOL_CALLS]").slice(1)) {
    const args = part.indexOf("[ARGS]");
    if (args >= 0) {
      const name = part
        .slice(0, args)
        .replace(/\[CALL_ID\].*$/s, "")
        .trim();
      const value = parseLoose(part.slice(args + "[ARGS]".length));
      if (!name || !isPlainObject(value)) return undefined;
      calls.push({ name, arguments: JSON.stringify(value) });
      continue;
    }
    const value = parseLoose(part);
    const list = Array.isArray(value) ? value : [value];
    for (const item of list) {
      const call = callOf(item);
      if (!call) return undefined;
      calls.push(call);
    }
  }
  return { calls, text: before, format: "Mistral [TOOL_CALLS]" };
}

/**
 * The whole reply is JSON naming a function with its arguments: `{"name", "parameters"}` (Llama 3.x
 * templates), `{"name", "arguments"}`, `{"type": "function", "function": {…}}`, a list of them, or
 * several separated by `;` or new lines; optionally fenced or after `<|python_tag|>`.
 */
function bareJsonCalls(text: string): RecoveredCalls | undefined {
  let body = text.trim();
  if (body.startsWith("<|python_tag|>")) body = body.slice("<|python_tag|>".length).trim();
  const fenced = /^```(?:json)?\s*([\s\S]*?)\s*```$/.exec(body);
  if (fenced) body = fenced[1] ?? "";
  if (!body.startsWith("{") && !body.startsWith("[")) return undefined;
  const pieces = parseJson(body) !== undefined ? [body] : body.split(/(?<=\})\s*[;\n]\s*(?=\{)/);
  const calls: TextCall[] = [];
  for (const piece of pieces) {
    const value = parseLoose(piece);
    for (const item of Array.isArray(value) ? value : [value]) {
      // Only an object with both a name and an argument bag: `{"name": "Alice"}` is an answer.
      const call =
        isPlainObject(item) && ("parameters" in item || "arguments" in item || isPlainObject(item.function))
          ? callOf(item)
          : undefined;
      if (!call) return undefined;
      calls.push(call);
    }
  }
  return { calls, text: "", format: "bare JSON" };
}

/** A call from `{"name", "arguments"|"parameters"}` or `{"function": {…}}`; undefined when it is not one. */
function callOf(value: unknown): TextCall | undefined {
  if (!isPlainObject(value)) return undefined;
  if (isPlainObject(value.function)) return callOf(value.function);
  if (typeof value.name !== "string" || value.name.trim() === "") return undefined;
  const args = value.arguments ?? value.parameters ?? {};
  if (typeof args === "string") return { name: value.name.trim(), arguments: args };
  if (!isPlainObject(args)) return undefined;
  return { name: value.name.trim(), arguments: JSON.stringify(args) };
}

/** JSON as written, or repaired (a trailing comma, a missing brace at a cut-off end). */
function parseLoose(text: string): unknown {
  const direct = parseJson(text.trim());
  if (direct !== undefined) return direct;
  try {
    return JSON.parse(jsonrepair(text)) as unknown;
  } catch {
    return undefined;
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * Holds back the part of a streamed answer that may be a tool call written as text, so a person
 * never sees the JSON of a call that then runs. The answer streams up to a marker (or not at all
 * when it opens with `{`, `[` or a fence); at the end, what was held is released when it was not
 * a call after all.
 */
export class TextCallGate {
  private started = false; // some non-blank answer text has been seen
  private holding = false;
  private held: string[] = [];
  private tail = "";

  constructor(private readonly emit: (text: string) => void) {}

  push(piece: string): void {
    if (this.holding) return void this.held.push(piece);
    const text = this.tail + piece;
    this.tail = "";
    if (!this.started) {
      const trimmed = text.trimStart();
      if (trimmed === "") return void (this.tail = text);
      this.started = true;
      if (/^[{[]|^```/.test(trimmed) || (trimmed.length < 3 && "```".startsWith(trimmed))) {
        this.holding = true;
        this.held.push(text);
        return;
      }
    }
    const marker = firstMarker(text);
    if (marker >= 0) {
      this.emit(text.slice(0, marker));
      this.holding = true;
      this.held.push(text.slice(marker));
      return;
    }
    this.tail = partialMarkerAtEnd(text);
    const ready = text.slice(0, text.length - this.tail.length);
    if (ready) this.emit(ready);
  }

  /** The reply has ended; `wasCall` says whether what was held turned out to be tool calls. */
  end(wasCall: boolean): void {
    if (!wasCall) {
      if (this.tail) this.held.push(this.tail);
      for (const piece of this.held) if (piece) this.emit(piece);
    }
    this.held = [];
    this.tail = "";
  }
}

function firstMarker(text: string): number {
  let first = -1;
  for (const marker of MARKERS) {
    const index = text.indexOf(marker);
    if (index >= 0 && (first < 0 || index < first)) first = index;
  }
  return first;
}

function partialMarkerAtEnd(text: string): string {
  for (let length = Math.min(13, text.length); length > 0; length--) {
    const end = text.slice(-length);
    if (MARKERS.some((marker) => marker.startsWith(end))) return end;
  }
  return "";
}
