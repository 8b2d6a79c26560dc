/**
 * The local web playground and HTTP API on node:http: a chat page, a trace viewer, and /api for
 * other systems, all over the same conversations (one run at a time per session, durable
 * approvals) as the chat platforms. Bound to 127.0.0.1 by default; anywhere else it needs a bearer
 * token (the service's, or users'), and /api then asks for it. Without any token only this machine
 * may call, and it is trusted as the service is: it acts for any user.
 */
import { readFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Pipelines } from "../../agent/sub-agents.js";
import { createConversations, type Conversations } from "../../conversations/conversations.js";
import { priceOf, type Price } from "../../agent/cost.js";
import { configurationError } from "../../agent/errors.js";
import type { DailyLimits } from "../../agent/quota.js";
import type { AgentConfig } from "../../agent/run.js";
import type { ChatModel } from "../../agent/types.js";
import type { Logger } from "../../logger.js";
import { createToolRegistry } from "../../tools/registry.js";
import { createEventHub } from "./event-hub.js";
import { HttpError, sendJson } from "./http.js";
import { credentialsOf, matchingCredential, type Caller, type Credential } from "./api-rules.js";
import { createApi } from "./web-api.js";
import { replayOn } from "./web-replay.js";
import { openWebSurface, showWebDecision } from "./web-surface.js";
import type { StorePort } from "../../store/port.js";

export interface WebServerOptions {
  /** The agent; absent only when no model is configured, and then `problem` says what to set. */
  agent?: AgentConfig;
  /** The store port (SQLite or PostgreSQL). */
  store: StorePort;
  log: Logger;
  /** Default 127.0.0.1; any other address needs `apiToken`. */
  host?: string;
  /** Default 8787; 0 picks a free port. */
  port?: number;
  /** Required by /api as `Authorization: Bearer <token>` when set (GLASSBOX_API_TOKEN): the service's, which may act for any user. */
  apiToken?: string;
  /** Users' bearer tokens, token -> user id (GLASSBOX_API_USERS): each acts only as its user, and reads only that user's sessions. */
  apiUsers?: Record<string, string>;
  approvalTtlSeconds: number;
  prices?: Record<string, Price>;
  /** Daily caps per user (GLASSBOX_USER_DAILY_TOKENS, GLASSBOX_USER_DAILY_COST). */
  dailyLimits?: DailyLimits;
  /** Pipelines a message can run with "/pipeline <name> <input>". */
  pipelines?: Pipelines;
  /** Which model answers, as the page shows it ("gpt-4o-mini", "scripted model (demo)"). */
  modelLabel: string;
  /** Why no run can start, in one sentence for the page (no model configured). */
  problem?: string;
  /** What an empty chat suggests asking, from the tools the agent has (exampleRequests). */
  hints?: string[];
  /** A model by name, for replays on another model than the agent's; without it a replay names none. */
  modelNamed?: (name: string) => ChatModel;
}

export interface WebServer {
  /** Where the chat page is, e.g. http://127.0.0.1:8787/ (the trace viewer is at `${url}trace`). */
  url: string;
  conversations: Conversations;
  stop(): Promise<void>;
}

export const DEFAULT_WEB_PORT = 8787;
const EXPIRY_SWEEP_MS = 30_000;
// Source (src/adapters/web) and build (dist/adapters/web) are both three levels below the root.
const PUBLIC_DIR = new URL("../../../src/adapters/web/public/", import.meta.url);
const PAGES: Record<string, string> = { "/": "index.html", "/trace": "trace.html" };
const ASSET = /^\/assets\/([a-z0-9-]+\.(?:css|js|svg))$/;
const CONTENT_TYPES: Record<string, string> = {
  html: "text/html; charset=utf-8",
  css: "text/css; charset=utf-8",
  js: "text/javascript; charset=utf-8",
  svg: "image/svg+xml",
};
const PAGE_HEADERS = {
  "content-security-policy":
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-cache",
};

export async function startWebServer(options: WebServerOptions): Promise<WebServer> {
  const { store: port, log } = options;
  const host = options.host ?? "127.0.0.1";
  const credentials = credentialsOf(options.apiToken, options.apiUsers ?? {});
  const callerOf = callersOf(credentials);
  if (!isLoopback(host) && credentials.length === 0) {
    throw configurationError(
      `GLASSBOX_WEB_HOST is ${host}, which other machines can reach; set GLASSBOX_API_TOKEN or GLASSBOX_API_USERS so that the API needs a token, or use 127.0.0.1.`,
    );
  }
  if (!options.agent && !options.problem)
    throw new Error("startWebServer needs an agent, or a problem saying why there is none.");
  const agent = options.agent ?? unconfiguredAgent(options.problem ?? "");

  const hub = createEventHub();
  const conversations = createConversations(agent, port, {
    openSurface: (sessionId) => openWebSurface(hub, sessionId),
    showDecision: showWebDecision(hub),
    approvalTtlSeconds: options.approvalTtlSeconds,
    sessionPrefix: "web:",
    pipelines: options.pipelines,
    dailyLimits: options.dailyLimits,
    onError: (error, context) => log.error({ error: (error as Error).message }, `web: failed ${context}`),
  });
  const api = createApi({
    conversations,
    hub,
    store: port,
    log,
    // Without a model the label would name the default one, which is not there.
    modelLabel: options.agent ? options.modelLabel : null,
    toolNames: options.agent ? options.agent.tools.names() : [],
    priced: options.agent ? priceOf(options.agent.model.name, options.prices) !== null : false,
    problem: options.problem,
    hints: options.hints ?? [],
    tokenRequired: credentials.length > 0,
    ...(options.agent ? { replay: replayOn(options.agent.model, port, options.modelNamed) } : {}),
  });

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const url = new URL(request.url ?? "/", "http://localhost");
    if (!url.pathname.startsWith("/api/")) return servePage(request, response, url.pathname);
    if (!(await api(request, response, url, callerOf(request, url))))
      throw new HttpError(404, `There is no ${url.pathname} in this API.`);
  }

  const server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      if (response.headersSent) return void response.end();
      if (error instanceof HttpError) return sendHttpError(response, error);
      log.error({ error: (error as Error).message, path: request.url }, "web: a request failed");
      sendJson(response, 500, { error: "Something went wrong inside glassbox; the server log says what." });
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", (error: NodeJS.ErrnoException) => {
      if (error.code === "EADDRINUSE")
        reject(
          configurationError(
            `Port ${options.port ?? DEFAULT_WEB_PORT} on ${host} is in use; set GLASSBOX_WEB_PORT to another port.`,
          ),
        );
      else if (error.code === "EADDRNOTAVAIL")
        reject(
          configurationError(
            `This machine has no address ${host}; set GLASSBOX_WEB_HOST to one of its addresses, or 127.0.0.1.`,
          ),
        );
      else reject(error);
    });
    server.listen(options.port ?? DEFAULT_WEB_PORT, host, () => resolve());
  });
  const { port: listening } = server.address() as AddressInfo;

  const sweep = setInterval(
    () =>
      void conversations
        .expireApprovals()
        .catch((error: unknown) => log.error({ error: (error as Error).message }, "web: expiring approvals failed")),
    EXPIRY_SWEEP_MS,
  );
  sweep.unref();
  await conversations.expireApprovals(); // approvals that ran out while the server was down

  return {
    url: `http://${urlHost(host)}:${listening}/`,
    conversations,
    async stop() {
      clearInterval(sweep);
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      hub.closeAll(); // open event streams would hold the server open
      server.closeIdleConnections();
      await conversations.idle();
      server.closeAllConnections();
      await closed;
    },
  };
}

/** Who calls: the holder of a token, or (without any token configured) this machine, which acts for anyone. */
export function callersOf(credentials: Credential[]): (request: IncomingMessage, url: URL) => Caller {
  return (request, url) => {
    if (credentials.length > 0) {
      const credential = matchingCredential(request, url, credentials);
      if (!credential)
        throw new HttpError(
          401,
          "This API needs a token: send Authorization: Bearer <token>, the GLASSBOX_API_TOKEN or a user's token from GLASSBOX_API_USERS.",
        );
      return credential.userId === undefined ? {} : { userId: credential.userId };
    }
    // Without a token only this machine may call: a page from elsewhere (DNS rebinding) is refused.
    if (!isLoopbackHostHeader(request.headers.host))
      throw new HttpError(403, "Without GLASSBOX_API_TOKEN this API answers only requests to 127.0.0.1 or localhost.");
    return {};
  };
}

/** An HttpError as its JSON answer; a 401 says which scheme to use. */
export function sendHttpError(response: ServerResponse, error: HttpError): void {
  const headers: Record<string, string> = error.status === 401 ? { "www-authenticate": 'Bearer realm="glassbox"' } : {};
  sendJson(response, error.status, { error: error.message, ...error.extra }, headers);
}

/** The chat page, the trace viewer and their assets, with headers that keep them to this origin. */
export async function servePage(request: IncomingMessage, response: ServerResponse, pathname: string): Promise<void> {
  const name = PAGES[pathname] ?? ASSET.exec(pathname)?.[1];
  if (!name) throw new HttpError(404, `There is no page ${pathname}; the chat is at / and the trace viewer at /trace.`);
  if (request.method !== "GET" && request.method !== "HEAD") throw new HttpError(405, `${pathname} only takes GET.`);
  let body: Buffer;
  try {
    body = await readFile(new URL(name, PUBLIC_DIR));
  } catch {
    throw new HttpError(404, `There is no file ${name}.`);
  }
  response.writeHead(200, {
    "content-type": CONTENT_TYPES[name.split(".").pop() ?? ""] ?? "application/octet-stream",
    "content-length": body.length,
    ...PAGE_HEADERS,
  });
  response.end(request.method === "HEAD" ? undefined : body);
}

export function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

function isLoopbackHostHeader(header: string | undefined): boolean {
  const name = (header ?? "")
    .replace(/:\d+$/, "")
    .replace(/^\[(.*)\]$/, "$1")
    .toLowerCase();
  return isLoopback(name);
}

function urlHost(host: string): string {
  if (host === "0.0.0.0" || host === "::") return "127.0.0.1";
  return host.includes(":") ? `[${host}]` : host;
}

/** Stands in when no model is configured: the API refuses runs before they reach it. */
function unconfiguredAgent(problem: string): AgentConfig {
  return {
    model: {
      name: "none",
      chat: async () => {
        throw configurationError(problem);
      },
    },
    tools: createToolRegistry([]),
  };
}
