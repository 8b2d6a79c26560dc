/**
 * Turning the text a model sent as tool arguments into an object, repairing what can be repaired
 * and saying exactly what was repaired, so the trace shows what the model sent and what ran.
 */
import { jsonrepair } from "jsonrepair";

export type ParsedArguments =
  | { ok: true; value: Record<string, unknown>; repairs: string[] }
  | { ok: false; message: string; repairs: string[] };

export function parseToolArguments(raw: string | null | undefined): ParsedArguments {
  const text = (raw ?? "").trim();
  if (text === "") return { ok: true, value: {}, repairs: [] };

  const repairs: string[] = [];
  let value = parseJson(text) ?? repairJson(text, repairs);
  // Some models encode the object twice: "{\"a\":1}".
  if (typeof value === "string" && value.trim().startsWith("{")) {
    const inner = parseJson(value) ?? repairJson(value, repairs);
    if (inner !== undefined) {
      repairs.push("decoded arguments that were JSON inside a JSON string");
      value = inner;
    }
  }
  if (value === null) return { ok: true, value: {}, repairs: ["null arguments read as {}"] };
  if (value === undefined) {
    return { ok: false, message: `arguments are not valid JSON and could not be repaired: ${preview(text)}`, repairs };
  }
  if (!isPlainObject(value)) {
    return { ok: false, message: `arguments must be a JSON object, got ${describe(value)}`, repairs };
  }
  return { ok: true, value, repairs };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * jsonrepair fixes quotes, commas, comments, fences and truncation. When the whole text does not
 * repair into an object, the object inside it is tried: jsonrepair reads chatter on lines of its
 * own as newline-delimited JSON and returns an array like ["Here you go:", {...}].
 */
function repairJson(text: string, repairs: string[]): unknown {
  const whole = tryRepair(text);
  if (isPlainObject(whole)) {
    repairs.push("repaired malformed JSON");
    return whole;
  }
  const object = outermostObject(text);
  const extracted = object !== undefined && object !== text ? tryRepair(object) : undefined;
  if (isPlainObject(extracted)) {
    repairs.push("extracted the JSON object from surrounding text and repaired it");
    return extracted;
  }
  if (whole !== undefined) repairs.push("repaired malformed JSON");
  return whole;
}

function tryRepair(text: string): unknown {
  try {
    return JSON.parse(jsonrepair(text));
  } catch {
    return undefined;
  }
}

/** The text from the first "{" to the last "}" (or to the end, for a truncated object). */
export function outermostObject(text: string): string | undefined {
  const start = text.indexOf("{");
  if (start < 0) return undefined;
  const end = text.lastIndexOf("}");
  return end > start ? text.slice(start, end + 1) : text.slice(start);
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return `a ${typeof value} (${preview(JSON.stringify(value))})`;
}

function preview(text: string): string {
  return text.length > 80 ? `${text.slice(0, 80)}…` : text;
}

/** JSON with object keys sorted, so equal arguments give equal text whatever the key order. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((item) => canonicalJson(item ?? null)).join(",")}]`;
  if (isPlainObject(value)) {
    const keys = Object.keys(value)
      .filter((key) => value[key] !== undefined)
      .sort();
    return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key])}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}
