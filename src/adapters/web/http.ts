/** Small HTTP helpers over node:http: JSON in and out, errors as one sentence, Server-Sent Events. */
import type { IncomingMessage, ServerResponse } from "node:http";
import { configurationError } from "../../agent/errors.js";

/** A request the server refuses; the sentence is what the caller reads (`{ error }`). */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

const MAX_BODY_BYTES = 1_000_000;

export function sendJson(
  response: ServerResponse,
  status: number,
  value: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(value);
  response.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(text),
    "cache-control": "no-store",
    ...headers,
  });
  response.end(text);
}

/** The request's body as a JSON object; anything else is the caller's mistake (400, 413 or 415). */
export async function readJsonObject(
  request: IncomingMessage,
  maxBytes = MAX_BODY_BYTES,
): Promise<Record<string, unknown>> {
  // Only JSON: a cross-site form cannot send it without a CORS preflight, which this server never grants.
  if (!/^application\/json\b/i.test(request.headers["content-type"] ?? "")) {
    throw new HttpError(415, "Send the body as JSON, with Content-Type: application/json.");
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) throw new HttpError(413, `The body is larger than ${maxBytes} bytes.`);
    chunks.push(chunk);
  }
  let value: unknown;
  try {
    value = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch (error) {
    throw new HttpError(400, `The body is not valid JSON (${(error as Error).message}).`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw new HttpError(400, "The body must be a JSON object.");
  return value as Record<string, unknown>;
}

export interface EventStream {
  /** Writes one event with its id (the browser sends the last one back as Last-Event-ID when it reconnects). */
  send(id: number, data: unknown): void;
  close(): void;
  readonly closed: boolean;
  onClose(listener: () => void): void;
}

const KEEP_ALIVE_MS = 15_000;

/** Starts a Server-Sent Events response; a comment every 15 s keeps proxies from closing it. */
export function openEventStream(request: IncomingMessage, response: ServerResponse): EventStream {
  response.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-store",
    connection: "keep-alive",
    "x-accel-buffering": "no",
  });
  response.write("retry: 2000\n\n");
  const listeners: Array<() => void> = [];
  let closed = false;
  const keepAlive = setInterval(() => response.write(": keep-alive\n\n"), KEEP_ALIVE_MS);
  keepAlive.unref();
  const end = () => {
    if (closed) return;
    closed = true;
    clearInterval(keepAlive);
    for (const listener of listeners.splice(0)) listener();
  };
  request.on("close", end);
  response.on("close", end);
  return {
    send(id, data) {
      if (!closed) response.write(`id: ${id}\ndata: ${JSON.stringify(data)}\n\n`);
    },
    close() {
      end();
      response.end();
    },
    get closed() {
      return closed;
    },
    onClose(listener) {
      if (closed) listener();
      else listeners.push(listener);
    },
  };
}

/** Why a server cannot listen, in one sentence saying what to set (`portSetting`, or GLASSBOX_WEB_HOST). */
export function listenError(error: NodeJS.ErrnoException, host: string, port: number, portSetting: string): Error {
  if (error.code === "EADDRINUSE")
    return configurationError(`Port ${port} on ${host} is in use; set ${portSetting} to another port.`);
  if (error.code === "EADDRNOTAVAIL")
    return configurationError(
      `This machine has no address ${host}; set GLASSBOX_WEB_HOST to one of its addresses, or 127.0.0.1.`,
    );
  return error;
}
