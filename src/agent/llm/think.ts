/**
 * Reasoning written into the answer text: `<think>…</think>` (DeepSeek-R1 and Qwen3 on servers
 * without a reasoning parser; MiniMax writes several), Mistral's `[THINK]…[/THINK]`, or only a
 * closing tag, when the chat template already opened the block in the prompt (QwQ and
 * Qwen3-Thinking on vLLM). `splitThinking` splits a whole text; `ThinkingFilter` passes on the
 * answer as it streams and never a character of the reasoning.
 */

const PAIRS = [
  { open: "<think>", close: "</think>" },
  { open: "[THINK]", close: "[/THINK]" },
] as const;
const LONGEST_TAG = Math.max(...PAIRS.flatMap((pair) => [pair.open.length, pair.close.length]));

export interface SplitText {
  answer: string;
  reasoning: string;
  /** A closing tag came with no opening one: the text before it was reasoning. */
  openedInPrompt: boolean;
}

/** The answer and the reasoning of a whole text. */
export function splitThinking(text: string): SplitText {
  if (!text.includes("</think>") && !text.includes("[/THINK]")) {
    // The common case, and an unclosed block at the end: everything after the opening tag is reasoning.
    const open = firstOpening(text, 0);
    if (!open) return { answer: text, reasoning: "", openedInPrompt: false };
    return {
      answer: text.slice(0, open.index),
      reasoning: text.slice(open.index + open.pair.open.length),
      openedInPrompt: false,
    };
  }
  const answer: string[] = [];
  const reasoning: string[] = [];
  let position = 0;
  let openedInPrompt = false;
  // Only a closing tag before any opening one: the block was opened in the prompt.
  const firstClose = firstClosing(text, 0);
  const firstOpen = firstOpening(text, 0);
  if (firstClose && (!firstOpen || firstClose.index < firstOpen.index)) {
    reasoning.push(text.slice(0, firstClose.index));
    position = firstClose.index + firstClose.pair.close.length;
    openedInPrompt = true;
  }
  while (position < text.length) {
    const open = firstOpening(text, position);
    if (!open) {
      answer.push(text.slice(position));
      break;
    }
    answer.push(text.slice(position, open.index));
    const start = open.index + open.pair.open.length;
    const close = text.indexOf(open.pair.close, start);
    if (close < 0) {
      reasoning.push(text.slice(start));
      break;
    }
    reasoning.push(text.slice(start, close));
    position = close + open.pair.close.length;
  }
  return { answer: answer.join(""), reasoning: reasoning.join("\n"), openedInPrompt };
}

/**
 * How the server's answers begin, learned from its replies: "unknown" until one answer shows it
 * (the first streamed answer is held back until then, since a closing tag could still come),
 * "plain" for answers that start as answers (or whose reasoning comes in a field of its own), and
 * "inside" for answers that start inside a block opened by the prompt.
 */
export type AnswerStart = "unknown" | "plain" | "inside";

/**
 * Streams the answer part of text that arrives in pieces. Pieces are passed on whole where they
 * hold no tag, so the deltas stay as the server cut them; a piece that ends in what may be the
 * start of a tag waits for the next one.
 */
export class ThinkingFilter {
  private held: string[] = []; // answer text that may yet turn out to be reasoning ("unknown"/"inside")
  private tail = ""; // the end of the text that may be the start of a tag
  private inside: (typeof PAIRS)[number] | undefined;
  private waitingForClose: boolean;
  private loneCloseCounts = true; // as in splitThinking: only a closing tag before any opening one ends a prompt-opened block
  private afterReasoning = false; // reasoning came before any answer: the answer's leading blank lines go, as in the final content
  private emitted = false;

  constructor(
    start: AnswerStart,
    private readonly emit: (answer: string) => void,
  ) {
    this.waitingForClose = start !== "plain";
  }

  /** Reasoning came in a field of its own: the text is the answer from the start. */
  answerIsPlain(): void {
    if (!this.emitted) this.afterReasoning = true;
    this.release();
  }

  push(piece: string): void {
    let text = this.tail + piece;
    this.tail = "";
    while (text !== "") {
      if (this.inside) {
        const close = text.indexOf(this.inside.close);
        if (close < 0) {
          this.tail = partialTagAtEnd(text, [this.inside.close]);
          return;
        }
        text = text.slice(close + this.inside.close.length);
        this.inside = undefined;
        if (!this.emitted && this.held.length === 0) this.afterReasoning = true;
        continue;
      }
      const open = firstOpening(text, 0);
      const close = this.loneCloseCounts ? firstClosing(text, 0) : undefined;
      if (close && (!open || close.index < open.index)) {
        // The block was opened by the prompt: what came before is reasoning, the answer starts here.
        this.held = [];
        this.waitingForClose = false;
        this.loneCloseCounts = false;
        if (!this.emitted) this.afterReasoning = true;
        text = text.slice(close.index + close.pair.close.length);
        continue;
      }
      if (open) {
        this.pass(text.slice(0, open.index));
        // An opening tag settles it: a closing one no longer ends a block the prompt opened.
        this.release();
        this.inside = open.pair;
        this.loneCloseCounts = false;
        text = text.slice(open.index + open.pair.open.length);
        continue;
      }
      const tags = PAIRS.flatMap((pair) => (this.loneCloseCounts ? [pair.open, pair.close] : [pair.open]));
      this.tail = partialTagAtEnd(text, tags);
      this.pass(text.slice(0, text.length - this.tail.length));
      return;
    }
  }

  /** The text has ended: with no closing tag, what was held back was the answer after all. */
  end(): void {
    if (!this.inside && this.tail) this.pass(this.tail);
    this.tail = "";
    this.release();
  }

  private release(): void {
    if (!this.waitingForClose) return;
    this.waitingForClose = false;
    for (const piece of this.held.splice(0)) this.send(piece);
  }

  private pass(text: string): void {
    if (text === "") return;
    if (this.waitingForClose) this.held.push(text);
    else this.send(text);
  }

  private send(text: string): void {
    const shown = this.afterReasoning && !this.emitted ? text.replace(/^\s+/, "") : text;
    if (shown === "") return;
    this.emitted = true;
    this.emit(shown);
  }
}

function firstOpening(text: string, from: number) {
  return earliest(text, from, (pair) => pair.open);
}

function firstClosing(text: string, from: number) {
  return earliest(text, from, (pair) => pair.close);
}

function earliest(text: string, from: number, tagOf: (pair: (typeof PAIRS)[number]) => string) {
  let found: { index: number; pair: (typeof PAIRS)[number] } | undefined;
  for (const pair of PAIRS) {
    const index = text.indexOf(tagOf(pair), from);
    if (index >= 0 && (!found || index < found.index)) found = { index, pair };
  }
  return found;
}

/** The longest end of `text` that is the start of one of `tags` (held until the next piece decides). */
function partialTagAtEnd(text: string, tags: readonly string[]): string {
  for (let length = Math.min(LONGEST_TAG - 1, text.length); length > 0; length--) {
    const end = text.slice(-length);
    if (tags.some((tag) => tag.startsWith(end))) return end;
  }
  return "";
}
