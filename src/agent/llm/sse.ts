/**
 * A model server's response body as a sequence of JSON payloads: the events of a server-sent
 * event stream, or the one JSON document of a plain reply. Read by hand rather than through the
 * SDK's stream, which throws on the first `data:` line that is not JSON and loses the rest of the
 * answer; here such a line is skipped and counted, and everything else is read as the SSE spec
 * says (LF, CRLF or CR line ends, comment lines, multi-line data, a character split across reads).
 * A body read whole, and each line of a stream, is read no further than MAX_BODY_CHARS.
 */
import { MAX_BODY_CHARS } from "./reply-limits.js";

/** One payload of a reply, or the end of it. */
export type BodyItem =
  | { kind: "json"; value: unknown; event?: string }
  | { kind: "unreadable"; text: string } // a data line or body that is not JSON
  | { kind: "done" }; // the `data: [DONE]` sentinel

/** A failure to read the body itself (the connection dropped mid-answer), not a malformed reply. */
export class BodyReadError extends Error {
  constructor(cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
    this.name = "BodyReadError";
  }
}

/** A body, or one line of an event stream, longer than MAX_BODY_CHARS: reading stopped there. */
export class BodyTooLongError extends Error {
  constructor() {
    super(`the reply's body passed ${MAX_BODY_CHARS.toLocaleString("en-US")} characters`);
    this.name = "BodyTooLongError";
  }
}

/**
 * Reads a response body, streamed or whole: an event stream as its payloads arrive, any other body
 * at once (an array, so a plain JSON reply costs no turns of an async iterator). An event stream is
 * taken as one whatever the request asked for (some servers stream a non-streamed request), and a
 * body that is not one JSON document is read as events or JSON lines, whatever its content type says.
 */
export async function readBody(response: Response): Promise<AsyncIterable<BodyItem> | BodyItem[]> {
  const contentType = response.headers.get("content-type") ?? "";
  if (contentType.includes("text/event-stream") && response.body) return readEventStream(response.body);
  const { text, cut } = await readTextUpTo(response.body, MAX_BODY_CHARS);
  if (cut) throw new BodyTooLongError();
  const value = parseJson(text);
  if (value !== undefined) return [{ kind: "json", value }];
  const items = [...eventsOf(text)];
  return items.some((item) => item.kind === "json") ? items : [{ kind: "unreadable", text }];
}

/**
 * A body as text, read no further than `maxChars` (then `cut`, and the rest of it cancelled): a reply
 * that is not an event stream is read whole before it is parsed, and a server may send one without end.
 */
export async function readTextUpTo(
  body: ReadableStream<Uint8Array> | null,
  maxChars: number,
): Promise<{ text: string; cut: boolean }> {
  if (!body) return { text: "", cut: false };
  const pieces: string[] = [];
  let length = 0;
  for await (const { text, done } of decodedChunks(body)) {
    pieces.push(text);
    length += text.length;
    if (length > maxChars) return { text: pieces.join("").slice(0, maxChars), cut: true };
    if (done) break;
  }
  return { text: pieces.join(""), cut: false };
}

async function* readEventStream(body: ReadableStream<Uint8Array>): AsyncGenerator<BodyItem> {
  const parser = new EventParser();
  for await (const { text, done } of decodedChunks(body)) {
    for (const item of parser.push(text, done)) {
      yield item;
      if (item.kind === "done") return;
    }
  }
}

/**
 * A body's text as it arrives. `stream: true` keeps a multi-byte character cut between two reads
 * until its last byte comes; a reader that leaves early ([DONE], an error, a cancelled run, a body
 * past its bound) stops the server's stream.
 */
async function* decodedChunks(body: ReadableStream<Uint8Array>): AsyncGenerator<{ text: string; done: boolean }> {
  const reader = body.getReader();
  const decoder = new TextDecoder("utf-8");
  try {
    while (true) {
      let chunk: Awaited<ReturnType<typeof reader.read>>;
      try {
        chunk = await reader.read();
      } catch (error) {
        throw new BodyReadError(error);
      }
      yield { text: chunk.done ? decoder.decode() : decoder.decode(chunk.value, { stream: true }), done: chunk.done };
      if (chunk.done) return;
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

function* eventsOf(text: string): Generator<BodyItem> {
  const parser = new EventParser();
  for (const item of parser.push(text, true)) {
    yield item;
    if (item.kind === "done") return;
  }
}

/** The SSE line protocol, fed text as it arrives. */
class EventParser {
  private pending: string[] = []; // pieces of a line not yet ended, joined once it ends (a long delta comes in many reads)
  private pendingChars = 0;
  private afterCarriageReturn = false; // the last read ended a line with CR: an LF that opens the next read belongs to it
  private data: string[] = [];
  private dataChars = 0;
  private event: string | undefined;

  *push(text: string, end: boolean): Generator<BodyItem> {
    let position = 0;
    if (text !== "") {
      if (this.afterCarriageReturn && text.startsWith("\n")) position = 1;
      this.afterCarriageReturn = false;
    }
    while (position < text.length) {
      LINE_END.lastIndex = position;
      const found = LINE_END.exec(text);
      if (!found) {
        this.pending.push(text.slice(position));
        this.pendingChars += text.length - position;
        // A line without end (no chunk of a reply is this long) would otherwise be held whole.
        if (this.pendingChars > MAX_BODY_CHARS) throw new BodyTooLongError();
        break;
      }
      const lineEnd = found.index;
      const line = this.takeLine(text.slice(position, lineEnd));
      position = lineEnd + 1;
      // CRLF is one line end, not two.
      if (text[lineEnd] === "\r") {
        if (position === text.length) this.afterCarriageReturn = true;
        else if (text[position] === "\n") position++;
      }
      yield* this.line(line);
    }
    if (end) {
      if (this.pending.length > 0) yield* this.line(this.takeLine(""));
      yield* this.dispatch(); // a last event without its blank line still counts
    }
  }

  private takeLine(rest: string): string {
    if (this.pending.length === 0) return rest;
    const line = this.pending.join("") + rest;
    this.pending = [];
    this.pendingChars = 0;
    return line;
  }

  private *line(line: string): Generator<BodyItem> {
    if (line === "") return yield* this.dispatch();
    if (line.startsWith(":")) return; // a comment: keep-alives (": OPENROUTER PROCESSING", sse-starlette's pings)
    if (/^\s*[{[]/.test(line)) {
      // newline-delimited JSON without `data:` (a server that streams lines, not events): each line is one
      yield* this.dispatch();
      this.data.push(line);
      return yield* this.dispatch();
    }
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") {
      this.data.push(value);
      this.dataChars += value.length;
      if (this.dataChars > MAX_BODY_CHARS) throw new BodyTooLongError(); // data lines without the blank line that ends an event
    } else if (field === "event") this.event = value;
    // other fields (id, retry) and unknown lines carry nothing for a chat completion
  }

  private *dispatch(): Generator<BodyItem> {
    if (this.data.length === 0) {
      this.event = undefined;
      return;
    }
    const data = this.data.join("\n");
    const event = this.event;
    this.data = [];
    this.dataChars = 0;
    this.event = undefined;
    if (data.trim() === "[DONE]") return yield { kind: "done" };
    if (data.trim() === "") return; // an empty keep-alive event
    const value = parseJson(data);
    yield value === undefined
      ? { kind: "unreadable", text: data }
      : { kind: "json", value, ...(event ? { event } : {}) };
  }
}

const LINE_END = /[\r\n]/g;

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
