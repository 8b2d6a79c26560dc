/**
 * The `fetch` glassbox hands the openai SDK and Slack's WebClient: undici's request API under the
 * Fetch interface. Node's global fetch wraps every exchange in WHATWG streams and abort plumbing
 * that cost about a third of a small chat completion's round trip on a local server (bench/agent-core
 * measures both); a busy bot pays that on every model call and every Slack call. Server-sent events
 * are passed on as a stream, as they arrive; other bodies are read whole when they are short (up to
 * WHOLE_BODY_BYTES), and stream on past that, so a reader can stop a body that never ends. Anything
 * unusual (a Request object, a form upload, a redirect) goes to the global fetch, which handles it fully.
 */
import { Readable } from "node:stream";

type SimpleBody = string | Uint8Array | ArrayBuffer | null | undefined;

/** A body up to this long is read before the Response is made; a longer one is passed on as it arrives. */
export const WHOLE_BODY_BYTES = 1 << 20;

// undici is loaded on the first request: a command that never calls out (glassbox tools, --help)
// does not pay for its 130-odd modules at start-up.
let undiciRequest: typeof import("undici").request | undefined;

export async function undiciFetch(input: string | URL | Request, init: RequestInit = {}): Promise<Response> {
  if (input instanceof Request || !isSimpleBody(init.body)) return fetch(input, init);
  const request = (undiciRequest ??= (await import("undici")).request);
  const response = await request(input, {
    method: (init.method ?? "GET") as "GET",
    headers: headerRecord(init.headers),
    body: init.body instanceof ArrayBuffer ? new Uint8Array(init.body) : (init.body ?? undefined),
    signal: init.signal ?? undefined,
  });
  const headers = new Headers();
  for (const [name, value] of Object.entries(response.headers)) {
    if (Array.isArray(value)) for (const item of value) headers.append(name, item);
    else if (value !== undefined) headers.set(name, value);
  }
  const status = response.statusCode;
  // fetch follows redirects and undici's request does not: let fetch replay the (text) request.
  if (status >= 300 && status < 400 && headers.has("location")) {
    await response.body.dump();
    return fetch(input, init);
  }
  if (status === 204 || status === 205 || status === 304) {
    await response.body.dump();
    return new Response(null, { status, headers });
  }
  const streamed = headers.get("content-type")?.includes("text/event-stream") ?? false;
  const body = streamed
    ? (Readable.toWeb(response.body) as ReadableStream<Uint8Array>)
    : await wholeOrStreamed(response.body);
  return new Response(body, { status, headers });
}

/** The body whole when it ends within WHOLE_BODY_BYTES; otherwise what came so far, then the rest as it arrives. */
async function wholeOrStreamed(body: AsyncIterable<Buffer>): Promise<Uint8Array | ReadableStream<Uint8Array>> {
  const chunks: Buffer[] = [];
  let size = 0;
  const pieces = body[Symbol.asyncIterator]();
  while (size <= WHOLE_BODY_BYTES) {
    const next = await pieces.next();
    if (next.done) {
      const whole = new Uint8Array(size);
      let at = 0;
      for (const chunk of chunks) {
        whole.set(chunk, at);
        at += chunk.length;
      }
      return whole;
    }
    chunks.push(next.value);
    size += next.value.length;
  }
  return new ReadableStream<Uint8Array>({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
    },
    async pull(controller) {
      const next = await pieces.next();
      if (next.done) controller.close();
      else controller.enqueue(next.value);
    },
    // A reader that stops early closes the connection's body.
    async cancel() {
      await pieces.return?.();
    },
  });
}

function isSimpleBody(body: unknown): body is SimpleBody {
  return (
    body === undefined ||
    body === null ||
    typeof body === "string" ||
    body instanceof Uint8Array ||
    body instanceof ArrayBuffer
  );
}

function headerRecord(headers: RequestInit["headers"]): Record<string, string> {
  const record: Record<string, string> = {};
  new Headers(headers).forEach((value, name) => {
    record[name] = value;
  });
  return record;
}
