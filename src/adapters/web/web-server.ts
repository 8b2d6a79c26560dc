/**
 * The local web playground and HTTP API on node:http: a chat page, a trace viewer, and /api for
 * other systems, all over the same conversations (one run at a time per session, durable
 * approvals) as the chat platforms. Bound to 127.0.0.1 by default; anywhere else it needs a bearer
 * token (the service's, or users'), and /api then asks for it. Without any token only this machine
 * may call, and it is trusted as the service is: it acts for any user.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Pipelines } from "../../agent/sub-agents.js";
import { createConversations, type Conversations } from "../../conversations/conversations.js";
import { priceOf, type Price } from "../../agent/cost.js";
import { configurationError } from "../../agent/errors.js";
import type { DailyLimits } from "../../agent/quota.js";
import type { AgentConfig } from "../../agent/run.js";
import type { Store } from "../../agent/store.js";
import type { ChatModel } from "../../agent/types.js";
import type { Logger } from "../../logger.js";
import { createToolRegistry } from "../../tools/registry.js";
import { createEventHub } from "./event-hub.js";
import { HttpError, sendJson } from "./http.js";
import { credentialsOf } from "./api-rules.js";
import { callersOf, isLoopback, sendHttpError } from "./web-access.js";
import { servePage } from "./web-pages.js";
import { createApi } from "./web-api.js";
import { replayOn } from "./web-replay.js";
import { openWebSurface, showWebDecision } from "./web-surface.js";
import type { StorePort } from "../../store/port.js";
import { storePortOf } from "../trace-readings.js";

export interface WebServerOptions {
  /** The agent; absent only when no model is configured, and then `problem` says what to set. */
  agent?: AgentConfig;
  /** The store port (SQLite or PostgreSQL); a SQLite `Store` is read through its port. */
  store: Store | StorePort;
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
export async function startWebServer(options: WebServerOptions): Promise<WebServer> {
  const { store, log } = options;
  const port = storePortOf(store);
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
