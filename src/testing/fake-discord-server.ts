// The fake Discord's HTTP plumbing: the server on 127.0.0.1 (the CDN, /api/v10 REST, and the
// gateway's upgrades), each REST request read, authorized, refused on demand, routed and recorded,
// every answer with generous rate-limit headers; and the waiting on what is recorded.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { parse as parseQuery } from "node:querystring";
import type { Duplex } from "node:stream";
import type { FakeDiscordCdn } from "./fake-discord-files.js";
import {
  API_VERSION,
  RATE_LIMIT,
  error,
  matchesPath,
  parseBody,
  readBody,
  unauthorized,
  type Answer,
  type Json,
  type Route,
  type StoredFile,
} from "./fake-discord-protocol.js";
import type { DiscordState } from "./fake-discord-state.js";

export interface RecordedRequest {
  method: string;
  path: string; // e.g. "/channels/123/messages", without "/api/v10" and without the query
  query: Record<string, string>;
  body: unknown; // parsed JSON (for multipart: the payload_json part), undefined when empty
  files?: Array<{ name: string; size: number; contentType: string }>;
  status: number; // what the fake answered
  at: number;
}

export interface WaitOptions {
  timeoutMs?: number;
  since?: number /* only entries at index >= since */;
}
export interface RefuseOptions {
  status?: number;
  code?: number;
  message?: string;
  times?: number;
}

/** Promises waiting for an entry of a recorded list: each looks at what is recorded, then again at every check(). */
export interface Waiters {
  waitFor<T>(list: T[], matches: (entry: T) => boolean, options: WaitOptions, describe: () => string): Promise<T>;
  check(): void; // call after a list grew
  rejectAll(): void; // on close
}

export function createWaiters(): Waiters {
  const waiting = new Set<{ check: () => void; reject: (e: Error) => void }>();
  return {
    waitFor(list, matches, { timeoutMs = 5000, since = 0 }, describe) {
      const find = () => list.slice(since).find(matches);
      const found = find();
      if (found !== undefined) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const waiter = {
          check: () => {
            const hit = find();
            if (hit !== undefined) {
              done();
              resolve(hit);
            }
          },
          reject: (e: Error) => {
            done();
            reject(e);
          },
        };
        const timer = setTimeout(
          () => waiter.reject(new Error(`fake-discord: ${describe()} within ${timeoutMs} ms`)),
          timeoutMs,
        );
        const done = () => {
          clearTimeout(timer);
          waiting.delete(waiter);
        };
        waiting.add(waiter);
      });
    },
    check() {
      for (const waiter of [...waiting]) waiter.check();
    },
    rejectAll() {
      for (const waiter of [...waiting]) waiter.reject(new Error("fake-discord: closed"));
    },
  };
}

export interface FakeDiscordServerOptions {
  routes: Route[];
  cdn: FakeDiscordCdn;
  onUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void; // the gateway's
  waiters: Waiters; // checked after each request is recorded
}

export interface FakeDiscordServer {
  requests: RecordedRequest[]; // every REST request, in arrival order
  refuse(method: string, pathPattern: RegExp | string, options?: RefuseOptions): void;
  close(): Promise<void>;
}

/** Listens on a free port of 127.0.0.1 and sets `state.origin`. */
export async function startFakeDiscordServer(
  state: DiscordState,
  options: FakeDiscordServerOptions,
): Promise<FakeDiscordServer> {
  const { routes, cdn, waiters } = options;
  const requests: RecordedRequest[] = [];
  const refusals: Array<{
    method: string;
    pattern: RegExp | string;
    status: number;
    code: number;
    message: string;
    times: number;
  }> = [];

  function record(entry: RecordedRequest): void {
    requests.push(entry);
    waiters.check();
  }

  async function handleRest(req: IncomingMessage, res: ServerResponse, path: string, rawQuery: string): Promise<void> {
    const method = (req.method ?? "GET").toUpperCase();
    const query = Object.fromEntries(
      Object.entries(parseQuery(rawQuery)).map(([k, v]) => [k, Array.isArray(v) ? (v[0] ?? "") : (v ?? "")]),
    );
    const at = Date.now();
    let parsed: { body: unknown; files: StoredFile[] };
    try {
      parsed = await parseBody(await readBody(req), req.headers["content-type"] ?? "");
    } catch {
      record({ method, path, query, body: undefined, status: 400, at });
      return reply(res, error(400, 50109, "The request body contains invalid JSON."), "invalid");
    }
    const found = routes.map((r) => ({ r, m: r.method === method ? r.pattern.exec(path) : null })).find((x) => x.m);
    const refusal = refusals.find((f) => f.times > 0 && f.method === method && matchesPath(path, f.pattern));
    let answer: Answer;
    if (!found) answer = error(404, 0, "404: Not Found");
    else if (found.r.auth && req.headers.authorization !== `Bot ${state.token}`) answer = unauthorized();
    else if (refusal) {
      refusal.times--;
      answer = error(refusal.status, refusal.code, refusal.message);
    } else {
      const body = (parsed.body && typeof parsed.body === "object" ? parsed.body : {}) as Json;
      answer = found.r.handler({ params: (found.m ?? []).slice(1), query, body, files: parsed.files });
    }
    // Recorded before answering, and the handler already ran: a waitForRequest() continuation sees
    // its effect in messages(). Gateway events it caused go out after the HTTP answer (later()).
    record({
      method,
      path,
      query,
      body: parsed.body,
      ...(parsed.files.length ? { files: parsed.files } : {}),
      status: answer.status,
      at,
    });
    reply(res, answer, found?.r.bucket ?? "unknown");
  }

  const server = createServer((req, res) => {
    if (cdn.handle(req, res)) return;
    const [path = "", query = ""] = (req.url ?? "").split("?", 2);
    const api = /^\/api\/v(\d+)(\/.*)$/.exec(path);
    if (!api?.[2] || api[1] !== API_VERSION) return reply(res, error(404, 0, "404: Not Found"), "unknown");
    // Segments arrive percent-encoded ("messages/%40original", emoji); routes and records use them decoded.
    const decoded = api[2]
      .split("/")
      .map((segment) => {
        try {
          return decodeURIComponent(segment);
        } catch {
          return segment;
        }
      })
      .join("/");
    handleRest(req, res, decoded, query).catch((e: unknown) => {
      if (!res.headersSent) reply(res, error(500, 0, `fake-discord error: ${String(e)}`), "error");
    });
  });
  server.on("upgrade", options.onUpgrade);

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  state.origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    requests,
    refuse(method, pattern, o = {}) {
      refusals.push({
        method: method.toUpperCase(),
        pattern,
        status: o.status ?? 500,
        code: o.code ?? 0,
        message: o.message ?? `${o.status ?? 500}: refused by fake-discord`,
        times: o.times ?? Number.POSITIVE_INFINITY,
      });
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function reply(res: ServerResponse, answer: Answer, bucket: string): void {
  const resetAfter = 1;
  const headers: Record<string, string> = {
    "X-RateLimit-Limit": String(RATE_LIMIT),
    "X-RateLimit-Remaining": String(RATE_LIMIT - 1),
    "X-RateLimit-Reset": ((Date.now() + resetAfter * 1000) / 1000).toFixed(3),
    "X-RateLimit-Reset-After": resetAfter.toFixed(3),
    "X-RateLimit-Bucket": Buffer.from(bucket).toString("hex").slice(0, 32),
  };
  if (answer.body === undefined) {
    res.writeHead(answer.status, headers);
    res.end();
    return;
  }
  res.writeHead(answer.status, { ...headers, "Content-Type": "application/json" });
  res.end(JSON.stringify(answer.body));
}
