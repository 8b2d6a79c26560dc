/**
 * Markdown as a model streams it, made readable on a terminal: headings, **bold**, *italic*,
 * `code`, fenced code blocks, lists, quotes, rules, links and tables. Text is shown as soon as
 * what it is can be told: a word waits only for the marker that closes it, a table for its last
 * row. Without a style (NO_COLOR) the layout is the same and no escape code is written.
 */
import { formatTable, type Column } from "./table.js";
import { PLAIN, type Style } from "./style.js";

export interface MarkdownStream {
  /** Takes the next piece of the text; returns what can be printed now. */
  push(text: string): string;
  /** The text is complete: returns the rest, and the stream starts afresh. */
  end(): string;
}

type LineKind =
  | { kind: "text"; prefix: string; heading: number }
  | { kind: "rule" }
  | { kind: "code" }
  | { kind: "fence"; marker: string }
  | { kind: "table" };

const RULE = "─".repeat(40);
// Past this many characters waiting on one line, what is open is taken as text: a stream never
// rescans a long line at every piece.
const LONGEST_WAIT = 2_000;

export function createMarkdownStream(style: Style = PLAIN): MarkdownStream {
  let line = ""; // the raw line being received
  let kind: LineKind | undefined; // decided once enough of the line has come
  let shown = 0; // characters of `line` already rendered
  let fence: string | undefined; // the marker of the open code block
  let table: string[] = [];

  const flushTable = () => {
    const rendered = table.length ? `${renderTable(table, style)}\n` : "";
    table = [];
    return rendered;
  };

  /** Renders what can be rendered of the current line; `complete` when it has ended. */
  const advance = (complete: boolean): string => {
    const settled = complete || line.length - shown > LONGEST_WAIT;
    let out = "";
    if (!kind) {
      kind = fence ? codeLineKind(line, fence, settled) : lineKindOf(line, settled);
      if (!kind) return "";
      if (kind.kind !== "table") out += flushTable();
      if (kind.kind === "text") {
        shown = line.length - line.replace(/^\s*(#{1,6}\s+|[-*+]\s+|\d{1,9}[.)]\s+|>\s?)/, "").length;
        out += kind.prefix;
      }
    }
    if (kind.kind === "table" || kind.kind === "fence") {
      if (complete && kind.kind === "table") table.push(line);
      if (complete && kind.kind === "fence") fence = fence ? undefined : kind.marker;
      return out;
    }
    if (kind.kind === "rule") {
      if (shown === 0) out += style.dim(RULE);
      shown = line.length;
      return out;
    }
    if (kind.kind === "code") {
      const first = shown === 0;
      const text = line.slice(shown);
      shown = line.length;
      return out + (first && text ? "    " : "") + style.cyan(text);
    }
    const { rendered, consumed } = renderInline(line.slice(shown), settled, style, line[shown - 1]);
    shown += consumed;
    const heading = kind.heading;
    return (
      out + (heading === 1 ? style.bold(style.underline(rendered)) : heading > 1 ? style.bold(rendered) : rendered)
    );
  };

  const endLine = (newline: boolean) => {
    const out = advance(true);
    const visible = kind?.kind === "text" || kind?.kind === "code" || kind?.kind === "rule";
    line = "";
    kind = undefined;
    shown = 0;
    return out + (newline && visible ? "\n" : "");
  };

  return {
    push(text) {
      let out = "";
      for (const [index, piece] of text.split("\n").entries()) {
        if (index > 0) out += endLine(true);
        line += piece;
        if (piece) out += advance(false);
      }
      return out;
    },
    end() {
      const out = (line ? endLine(false) : "") + flushTable();
      fence = undefined;
      return out;
    },
  };
}

/** What a line outside a code block is, or undefined while its first characters could still be several things. */
function lineKindOf(line: string, complete: boolean): LineKind | undefined {
  const start = line.trimStart();
  const indent = line.slice(0, line.length - start.length);
  if (!complete && (start === "" || /^(`{1,2}|~{1,2}|#{1,6}\s*|>|\d{1,9}[.)]?\s*|[-*_+][-*_\s]*)$/.test(start)))
    return undefined;
  const fenced = /^(`{3,}|~{3,})/.exec(start);
  if (fenced) return complete ? { kind: "fence", marker: fenced[1] as string } : undefined;
  if (start.startsWith("|")) return complete ? { kind: "table" } : undefined;
  if (/^([-*_])(\s*\1){2,}\s*$/.test(start)) return { kind: "rule" };
  const heading = /^(#{1,6})(\s|$)/.exec(start);
  if (heading) return { kind: "text", prefix: "", heading: (heading[1] as string).length };
  if (/^[-*+]\s/.test(start)) return { kind: "text", prefix: `${indent}• `, heading: 0 };
  const numbered = /^(\d{1,9}[.)])\s/.exec(start);
  if (numbered) return { kind: "text", prefix: `${indent}${numbered[1] as string} `, heading: 0 };
  if (start.startsWith(">")) return { kind: "text", prefix: `${indent}│ `, heading: 0 };
  return { kind: "text", prefix: "", heading: 0 };
}

/** Inside a code block a line is code, unless it is the closing fence. */
function codeLineKind(line: string, marker: string, complete: boolean): LineKind | undefined {
  const start = line.trimStart();
  const closing = start.startsWith(marker) && new RegExp(`^\\${marker[0]}+\\s*$`).test(start);
  if (closing && complete) return { kind: "fence", marker };
  if (!complete && marker.startsWith(start.slice(0, marker.length)) && /^[`~]*$/.test(start)) return undefined;
  return { kind: "code" };
}

/**
 * Inline Markdown of `text` for a terminal. Unless `complete`, it stops before a marker whose close
 * has not come yet and says how much it consumed; at the end of a line an unclosed marker is text.
 */
export function renderInline(
  text: string,
  complete: boolean,
  style: Style = PLAIN,
  before?: string,
): { rendered: string; consumed: number } {
  let out = "";
  let index = 0;
  while (index < text.length) {
    const rest = text.slice(index);
    const previous = index > 0 ? text[index - 1] : before;
    const token = inlineToken(rest, previous, style, complete);
    if (token === "wait") {
      if (!complete) return { rendered: out, consumed: index };
    } else if (token) {
      out += token.rendered;
      index += token.length;
      continue;
    }
    out += rest[0];
    index += 1;
  }
  return { rendered: out, consumed: index };
}

type Token = { rendered: string; length: number } | "wait" | undefined;

const WORD = /[\p{L}\p{N}]/u;

/** The inline element `rest` starts with, "wait" when it may start one whose end is still to come. */
function inlineToken(rest: string, previous: string | undefined, style: Style, complete: boolean): Token {
  const first = rest[0];
  if (first === "\\") {
    if (rest.length === 1) return "wait";
    return /[\\`*_[\]()#+\-.!|>~]/.test(rest[1] as string) ? { rendered: rest[1] as string, length: 2 } : undefined;
  }
  if (first === "`") {
    const ticks = /^`+/.exec(rest)?.[0] ?? "`";
    const close = rest.indexOf(ticks, ticks.length);
    if (close < 0) return "wait";
    const code = rest.slice(ticks.length, close).replace(/^ (.*) $/, "$1");
    return { rendered: style.enabled ? style.cyan(code) : `\`${code}\``, length: close + ticks.length };
  }
  if (first === "*" || first === "_") {
    if (first === "_" && previous !== undefined && WORD.test(previous)) return undefined; // snake_case
    const double = rest[1] === first;
    const marker = double ? first + first : first;
    if (rest.length <= marker.length) return "wait";
    if (/\s/.test(rest[marker.length] as string)) return undefined; // "2 * 3"
    const close = closingMarker(rest, marker, complete);
    if (close === "wait") return "wait";
    const inner = renderInline(rest.slice(marker.length, close), true, style).rendered;
    return { rendered: double ? style.bold(inner) : style.italic(inner), length: close + marker.length };
  }
  if (first === "[") {
    const link = /^\[([^\]\n]*)\](\(([^)\s]*)\)?)?/.exec(rest);
    if (!link) return rest.includes("]") ? undefined : "wait";
    if (link[2] === undefined) return rest.length === (link[0] as string).length ? "wait" : undefined;
    if (!(link[2] as string).endsWith(")")) return "wait";
    const label = renderInline(link[1] as string, true, style).rendered;
    const url = link[3] as string;
    return {
      rendered:
        !url || url === link[1] ? style.underline(url || label) : `${style.underline(label)} ${style.dim(`(${url})`)}`,
      length: (link[0] as string).length,
    };
  }
  return undefined;
}

/** Where `marker` closes emphasis in `rest` (after its opening), or "wait": not in what has come. */
function closingMarker(rest: string, marker: string, complete: boolean): number | "wait" {
  for (let at = rest.indexOf(marker, marker.length + 1); at >= 0; at = rest.indexOf(marker, at + 1)) {
    const before = rest[at - 1] as string;
    const after = rest[at + marker.length];
    if (/\s/.test(before)) continue;
    if (marker.length === 1 && (rest[at + 1] === marker || before === marker)) {
      at += 1; // part of a ** inside *...*
      continue;
    }
    if (after === undefined && !complete) return "wait"; // a * or _ may follow: "*a**b" is not "*a*"
    if (marker[0] === "_" && after !== undefined && WORD.test(after)) continue;
    return at;
  }
  return "wait";
}

function renderTable(lines: string[], style: Style): string {
  const rows = lines.map(splitRow);
  const separator = rows[1];
  if (!separator?.every((cell) => /^:?-+:?$/.test(cell)))
    return lines.map((line) => renderInline(line, true, style).rendered).join("\n");
  const header = rows[0] ?? [];
  const columns: Column[] = header.map((cell, index) => ({
    header: renderInline(cell, true, style).rendered,
    align: /^-+:$/.test(separator[index] ?? "") ? "right" : "left",
  }));
  const body = rows
    .slice(2)
    .map((row) => columns.map((_, index) => renderInline(row[index] ?? "", true, style).rendered));
  return formatTable(columns, body, { style, rule: true });
}

function splitRow(line: string): string[] {
  const cells = line
    .trim()
    .replace(/^\|/, "")
    .replace(/\|$/, "")
    .split(/(?<!\\)\|/);
  return cells.map((cell) => cell.trim().replace(/\\\|/g, "|"));
}
