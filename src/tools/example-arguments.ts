/**
 * Arguments for a tool from a person's words and the tool's schema, as the demo's scripted model
 * makes them so anyone can try their own tools offline: `key=value` (or `key: value`) pairs the
 * words give, and for each other required property a value its schema suggests (its default, its
 * first allowed value, a number or quoted text from the words, or a plain example of its type).
 */
import { isPlainObject } from "./args.js";

type Schema = Record<string, unknown>;
const MAX_DEPTH = 8;
const PAIR = /(?<![\w-])([A-Za-z_][\w-]*)\s*[=:]\s*("[^"]*"|'[^']*'|\[[^\]]*\]|\{[^}]*\}|(?:[^\s,;]|,(?=\S))+)/g;

/** `text` is what the person wrote after the tool's name ("fruit=apple", "apple", "units: 3 for pear"). */
export function exampleArguments(schema: Schema, text: string): Record<string, unknown> {
  const properties = isPlainObject(schema.properties) ? schema.properties : {};
  const pairs = new Map<string, string>();
  // Only a property's name makes a pair: "note: the green one" stays words.
  const rest = text.replace(PAIR, (pair: string, key: string, value: string) => {
    if (!Object.hasOwn(properties, key)) return pair;
    pairs.set(key, unquote(value));
    return " ";
  });
  const free = freeWords(rest, wantsNumbers(schema));
  return objectFor(schema, pairs, free, 0);
}

/** Whether a required property is a number: then "pear 5" is the text "pear" and the number 5. */
function wantsNumbers(schema: Schema): boolean {
  const properties = isPlainObject(schema.properties) ? schema.properties : {};
  const required = Array.isArray(schema.required) ? schema.required : [];
  return required.some((key) => {
    const property = properties[String(key)];
    return isPlainObject(property) && ["integer", "number"].includes(typeOf(property) ?? "");
  });
}

/** Words not in pairs: quoted text first, else the words themselves; and the numbers among them. */
interface FreeWords {
  texts: string[];
  numbers: number[];
}

function freeWords(text: string, numbersApart: boolean): FreeWords {
  const quoted = [...text.matchAll(/"([^"]+)"|'([^']+)'|“([^”]+)”/g)].map((match) =>
    (match[1] ?? match[2] ?? match[3] ?? "").trim(),
  );
  const plain = text
    .replace(/"[^"]*"|'[^']*'|“[^”]*”/g, " ")
    .replace(/^[\s,:;-]*(with|for|on|about|of|to)\b/i, " ")
    .replace(/[?.!]+\s*$/, "")
    .replace(/\s+/g, " ")
    .trim();
  const standalone = /(?<![\w.])-?\d+(\.\d+)?(?![\w.])/g;
  const numbers = [...plain.matchAll(standalone)].map((match) => Number(match[0]));
  const words = numbersApart ? plain.replace(standalone, " ").replace(/\s+/g, " ").trim() : plain;
  return { texts: [...quoted, ...(words ? [words] : [])], numbers };
}

function objectFor(
  schema: Schema,
  pairs: Map<string, string>,
  free: FreeWords,
  depth: number,
): Record<string, unknown> {
  const properties = isPlainObject(schema.properties) ? schema.properties : {};
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  const args: Record<string, unknown> = {};
  for (const [key, property] of Object.entries(properties)) {
    const given = depth === 0 ? pairs.get(key) : undefined;
    if (given !== undefined) args[key] = fromText(given, property);
    else if (required.has(key)) args[key] = exampleOf(property, free, depth + 1);
  }
  return args;
}

/** A value the schema suggests for a property nobody gave. */
function exampleOf(property: unknown, free: FreeWords, depth: number): unknown {
  if (!isPlainObject(property) || depth > MAX_DEPTH) return "example";
  if (property.default !== undefined) return property.default;
  if (property.const !== undefined) return property.const;
  if (Array.isArray(property.enum) && property.enum.length > 0) return property.enum[0];
  if (Array.isArray(property.examples) && property.examples.length > 0) return property.examples[0];
  const branch = [property.anyOf, property.oneOf].find(Array.isArray)?.[0];
  if (branch !== undefined) return exampleOf(branch, free, depth + 1);
  switch (typeOf(property)) {
    case "string":
      return free.texts.shift() ?? formatExample(property.format);
    case "integer":
    case "number": {
      const number = free.numbers.shift();
      const fallback = typeof property.minimum === "number" ? property.minimum : 1;
      return number !== undefined && (typeOf(property) === "number" || Number.isInteger(number)) ? number : fallback;
    }
    case "boolean":
      return true;
    case "array":
      return [exampleOf(property.items, free, depth + 1)];
    case "object":
      return objectFor(property, new Map(), free, depth);
    default:
      return free.texts.shift() ?? "example";
  }
}

/** A value the person wrote, read as the property's type; left as text when it does not read as one. */
function fromText(text: string, property: unknown): unknown {
  const type = isPlainObject(property) ? typeOf(property) : undefined;
  if ((type === "integer" || type === "number") && text.trim() !== "" && Number.isFinite(Number(text)))
    return Number(text);
  if (type === "boolean" && /^(true|false|yes|no)$/i.test(text)) return /^(true|yes)$/i.test(text);
  if (type === "array" || type === "object") {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      if (type === "array")
        return text
          .split(",")
          .map((part) => fromText(part.trim(), isPlainObject(property) ? property.items : undefined));
    }
  }
  return text;
}

function typeOf(property: Schema): string | undefined {
  const types = ([] as unknown[]).concat(property.type ?? []).filter((type) => type !== "null");
  return typeof types[0] === "string" ? types[0] : isPlainObject(property.properties) ? "object" : undefined;
}

function formatExample(format: unknown): string {
  const now = new Date().toISOString();
  const examples: Record<string, string> = {
    date: now.slice(0, 10),
    "date-time": now,
    time: now.slice(11, 19),
    email: "someone@example.com",
    uri: "https://example.com",
    url: "https://example.com",
    uuid: "00000000-0000-4000-8000-000000000000",
  };
  return examples[String(format)] ?? "example";
}

function unquote(text: string): string {
  return /^(["']).*\1$/s.test(text) ? text.slice(1, -1) : text;
}
