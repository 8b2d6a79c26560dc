/**
 * HTTP API ingress (GLASSBOX_ROLE=ingress): the two writes of the API that start work, with no model
 * behind them. POST /api/runs accepts a message (its run recorded `accepted`, its message stored,
 * its turn enqueued, in one transaction) and answers 202 with the run's id; POST /api/approvals/:id
 * decides a web approval, and the decision that readies its run enqueues the resume in the same
 * transaction. Everything else the API serves (reading runs, following them) is the web server's.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { configurationError } from "../agent/errors.js";
import type { TokenCounter } from "../agent/tokens.js";
import type { Logger } from "../logger.js";
import { approvalView } from "../adapters/web/event-hub.js";
import { HttpError, readJsonObject, sendJson } from "../adapters/web/http.js";
import { actingUser, credentialsOf, decodeSegment, matchingCredential, MAX_INPUT_CHARS, refusalOf, webSession, type Caller } from "../adapters/web/api-rules.js";
import { isLoopback } from "../adapters/web/web-server.js";
import { acceptMessage, decideClick, newRunId, type IngressQueue, type IngressStore } from "./turns.js";

export interface HttpIngressOptions<Transaction> {
  store: IngressStore<Transaction>;
  queue: IngressQueue<Transaction>;
  log: Logger;
  counter: TokenCounter;
  /** The service's token (GLASSBOX_API_TOKEN): acts for any user. */
  apiToken?: string;
  /** Users' tokens, token -> user id (GLASSBOX_API_USERS): each acts only as its user. */
  apiUsers?: Record<string, string>;
  /** Users who may decide any web approval besides the one who asked. */
  approvers?: string[];
  port: number;
  host: string;
}

export interface HttpIngress {
  url: string;
  stop(): Promise<void>;
}



export async function startHttpIngress<Transaction>(options: HttpIngressOptions<Transaction>): Promise<HttpIngress> {
  const { store, queue, log, counter } = options;
  const credentials = credentialsOf(options.apiToken, options.apiUsers ?? {});
  if (credentials.length === 0 && !isLoopback(options.host)) {
    throw configurationError(`The API ingress listens on ${options.host}, which other machines can reach; set GLASSBOX_API_TOKEN or GLASSBOX_API_USERS so that it needs a token, or use 127.0.0.1.`);
  }

  function callerOf(request: IncomingMessage, url: URL): Caller {
    if (credentials.length === 0) return {};
    const matched = matchingCredential(request, url, credentials);
    if (!matched) throw new HttpError(401, "This API needs a token: send Authorization: Bearer <token>, the GLASSBOX_API_TOKEN or a user's token from GLASSBOX_API_USERS.");
    return matched.userId === undefined ? {} : { userId: matched.userId };
  }

  async function startRun(request: IncomingMessage, response: ServerResponse, caller: Caller): Promise<void> {
    const body = await readJsonObject(request);
    const sessionId = webSession(body.session);
    const input = typeof body.input === "string" ? body.input.trim() : "";
    if (!input) throw new HttpError(400, 'Give the message as "input", a non-empty string.');
    if (input.length > MAX_INPUT_CHARS) throw new HttpError(400, `The input is ${input.length} characters long; the limit is ${MAX_INPUT_CHARS}.`);
    const userId = actingUser(caller, body.userId);
    const run = { runId: newRunId(), sessionId, userId, input };
    const entry = { role: "user" as const, content: input };
    // Accepted means stored and enqueued: the 202 comes after the commit.
    const outcome = await acceptMessage(store, queue, { eventIds: [], run, message: { message: entry, tokens: counter.message(entry) }, ...(caller.userId ? { sessionOwner: caller.userId } : {}) });
    if (outcome.kind === "not_owner") throw new HttpError(403, `The session ${sessionId} belongs to another user; use another session id.`);
    sendJson(response, 202, { runId: run.runId, session: sessionId }, { location: `/api/runs/${run.runId}` });
  }

  async function decide(request: IncomingMessage, response: ServerResponse, caller: Caller, approvalId: string): Promise<void> {
    const body = await readJsonObject(request);
    if (typeof body.approved !== "boolean") throw new HttpError(400, 'Say "approved": true or false.');
    const userId = actingUser(caller, body.userId);
    // Only the web's own approvals: a Slack or Discord approval is decided where it was asked.
    const sessionId = (await store.approval(approvalId))?.sessionId;
    const readable = sessionId?.startsWith("web:") && (caller.userId === undefined || (await store.sessionOwner(sessionId)) === caller.userId);
    if (!readable) throw new HttpError(404, `There is no web approval ${approvalId}.`);
    const outcome = await decideClick(store, queue, { approvalId, userId, approved: body.approved, approvers: options.approvers ?? [], origin: { sessionPrefix: "web:" } });
    if (outcome.kind !== "decided") throw refusalOf(outcome, approvalId);
    sendJson(response, 200, { outcome: outcome.kind, approval: approvalView(outcome.approval), resumed: outcome.runReady });
  }

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const url = new URL(request.url ?? "/", "http://ingress");
    const path = url.pathname;
    const approval = /^\/api\/approvals\/([^/]+)$/.exec(path);
    if (path !== "/api/runs" && !approval) throw new HttpError(404, `There is no ${path} here: this process only accepts POST /api/runs and POST /api/approvals/<id>.`);
    if (request.method !== "POST") throw new HttpError(405, `${path} takes POST.`);
    const caller = callerOf(request, url);
    if (approval) return decide(request, response, caller, decodeSegment(approval[1] ?? ""));
    return startRun(request, response, caller);
  }

  const server: Server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      if (response.headersSent) return void response.end();
      if (error instanceof HttpError) return sendJson(response, error.status, { error: error.message, ...error.extra });
      log.error({ error: (error as Error).message }, "API ingress: a request could not be accepted");
      sendJson(response, 500, { error: "The request could not be accepted; try again in a moment." });
    });
  });
  server.requestTimeout = 10_000; // a slow body never holds a connection for long
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${options.host.includes(":") ? `[${options.host}]` : options.host}:${port}`,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
