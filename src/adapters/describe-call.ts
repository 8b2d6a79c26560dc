/** A tool call as one short line for people: `get_order_status(order_id: 20240315001)`. */
export function describeCall(name: string, args: Record<string, unknown> | undefined, maxLength = 160): string {
  const parts = Object.entries(args ?? {}).map(
    ([key, value]) => `${key}: ${shorten(typeof value === "string" ? value : JSON.stringify(value), 60)}`,
  );
  return shorten(`${name}(${parts.join(", ")})`, maxLength);
}

function shorten(text: string, maxLength: number): string {
  const oneLine = text.replace(/\s+/g, " ");
  return oneLine.length > maxLength ? `${oneLine.slice(0, maxLength - 1)}…` : oneLine;
}

// Backticks (which could close the code block) and characters that show as nothing or turn text
// around (zero-width, bidi controls, odd spaces, fillers): a person approving must see them.
// Control characters below U+0020 need nothing: JSON.stringify escapes them in strings.
const HIDDEN =
  /[`\u007f-\u009f\p{Cf}\p{Co}\p{Cn}\p{Zl}\p{Zp}\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000\u034f\u115f\u1160\u3164\uffa0\u2800]/gu;
// What a cut may leave of an escape: half of `\u200b`, `\\` or `&lt;`.
const PARTIAL_ESCAPE = /(?:\\(?:u[0-9a-fA-F]{0,3})?|&[a-z]{0,3})$/;

/**
 * A call's arguments as JSON for a code block that nothing in them can close: backticks and
 * hidden characters are written as JSON escapes (`\u0060`, `\u200b`), which read as the same
 * value; they occur only inside strings, where an escape is valid. `escape` (a platform's own
 * escaping) runs before the cut, so the text is at most `limit` characters plus a note of what
 * was left out.
 */
export function argumentsForDisplay(
  args: Record<string, unknown>,
  limit: number,
  escape: (text: string) => string = (text) => text,
): string {
  const json = escape(
    JSON.stringify(args, null, 2).replace(HIDDEN, (character) => {
      const code = character.codePointAt(0) ?? 0;
      return code > 0xffff ? surrogates(code) : `\\u${code.toString(16).padStart(4, "0")}`;
    }),
  );
  if (json.length <= limit) return json;
  const kept = json.slice(0, limit).replace(PARTIAL_ESCAPE, "");
  return `${kept}\n… (${json.length - kept.length} more characters)`;
}

/** A code point beyond the first plane as the two `\uXXXX` escapes JSON writes for it. */
function surrogates(code: number): string {
  const offset = code - 0x10000;
  const high = 0xd800 + (offset >> 10);
  const low = 0xdc00 + (offset & 0x3ff);
  return `\\u${high.toString(16)}\\u${low.toString(16)}`;
}

/** A name (a tool's) for inline code: no backtick to end it early, nothing hidden, one line, bounded. */
export function codeName(name: string, maxLength = 100): string {
  return shorten(name.replace(/`/g, "'").replace(HIDDEN, ""), maxLength) || "?";
}
