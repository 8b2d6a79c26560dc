/**
 * HTTP API ingress (GLASSBOX_ROLE=ingress): the two writes of the API that start work, with no model
 * behind them. POST /api/runs accepts a message (its run recorded `accepted`, its message stored,
 * its turn enqueued, in one transaction) and answers 202 with the run's id; POST /api/approvals/:id
 * decides a web approval, and the decision that readies its run enqueues the resume in the same
 * transaction. Everything else the API serves (reading runs, following them) is the web server's.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { configurationError } from "../agent/errors.js";
import type { TokenCounter } from "../agent/tokens.js";
import type { Logger } from "../logger.js";
import { approvalView } from "../adapters/web/event-hub.js";
import { HttpError, readJsonObject, sendJson } from "../adapters/web/http.js";
import { webUserKey } from "../adapters/web/web-api.js";
import { isLoopback } from "../adapters/web/web-server.js";
import type { DecisionOutcome } from "../store/port.js";
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

/** Who calls: a user's token acts only as its user; the service token (or this machine, without tokens) as anyone. */
interface Caller {
  userId?: string;
}

const SESSION_ID = /^[A-Za-z0-9_.-]{1,100}$/;
const MAX_INPUT_CHARS = 20_000;

export async function startHttpIngress<Transaction>(options: HttpIngressOptions<Transaction>): Promise<HttpIngress> {
  const { store, queue, log, counter } = options;
  const credentials = credentialsOf(options);
  if (credentials.length === 0 && !isLoopback(options.host)) {
    throw configurationError(`The API ingress listens on ${options.host}, which other machines can reach; set GLASSBOX_API_TOKEN or GLASSBOX_API_USERS so that it needs a token, or use 127.0.0.1.`);
  }

  function callerOf(request: IncomingMessage): Caller {
    if (credentials.length === 0) return {};
    const header = request.headers.authorization;
    const given = header?.startsWith("Bearer ") ? header.slice("Bearer ".length).trim() : "";
    const digest = digestOf(given);
    let matched: { userId?: string } | undefined;
    for (const credential of credentials) if (given && timingSafeEqual(digest, credential.digest)) matched = credential; // every one compared: the time says nothing
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
    const path = new URL(request.url ?? "/", "http://ingress").pathname;
    const approval = /^\/api\/approvals\/([^/]+)$/.exec(path);
    if (path !== "/api/runs" && !approval) throw new HttpError(404, `There is no ${path} here: this process only accepts POST /api/runs and POST /api/approvals/<id>.`);
    if (request.method !== "POST") throw new HttpError(405, `${path} takes POST.`);
    const caller = callerOf(request);
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

const digestOf = (token: string) => createHash("sha256").update(token).digest();

function credentialsOf(options: Pick<HttpIngressOptions<unknown>, "apiToken" | "apiUsers">): Array<{ digest: Buffer; userId?: string }> {
  const credentials: Array<{ digest: Buffer; userId?: string }> = options.apiToken?.trim() ? [{ digest: digestOf(options.apiToken.trim()) }] : [];
  for (const [token, user] of Object.entries(options.apiUsers ?? {})) {
    const userId = webUserKey(user);
    if (!userId) throw configurationError(`GLASSBOX_API_USERS gives a token the user '${user}'; a user id is letters, digits, "-", "_" or "." (up to 100), optionally prefixed with "web:".`);
    credentials.push({ digest: digestOf(token.trim()), userId });
  }
  return credentials;
}

/** A web session key: `web:<id>`, given whole or as the bare id. */
function webSession(value: unknown): string {
  const id = typeof value === "string" ? value.replace(/^web:/, "") : "";
  if (!SESSION_ID.test(id)) throw new HttpError(400, 'Give "session" as an id of letters, digits, "-", "_" or "." (up to 100), optionally prefixed with "web:".');
  return `web:${id}`;
}

/** The user a request acts as: a user's token only as its own user (a body naming another is refused). */
function actingUser(caller: Caller, value: unknown): string {
  const named = value === undefined ? "web:api" : webUserKey(value);
  if (!named) throw new HttpError(400, 'Give "userId" as an id of letters, digits, "-", "_" or "." (up to 100), optionally prefixed with "web:".');
  if (caller.userId === undefined) return named;
  if (value !== undefined && named !== caller.userId) throw new HttpError(403, `This token acts as ${caller.userId}; it cannot act as ${named}.`);
  return caller.userId;
}

function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new HttpError(400, "The path is not validly percent-encoded.");
  }
}

function refusalOf(outcome: Exclude<DecisionOutcome, { kind: "decided" }>, approvalId: string): HttpError {
  switch (outcome.kind) {
    case "not_allowed":
      return new HttpError(403, `Only ${outcome.approval.requester}, who asked for this run, can decide this approval.`, { outcome: outcome.kind });
    case "already_decided":
      return new HttpError(409, `This approval was already ${outcome.approval.status} by ${outcome.approval.decidedBy ?? "someone"}.`, { outcome: outcome.kind });
    case "expired":
      return new HttpError(409, "This approval expired before anyone decided; ask again if it is still needed.", { outcome: outcome.kind });
    case "stale":
      return new HttpError(409, "This approval is no longer waiting for a decision: the conversation moved on.", { outcome: outcome.kind });
    case "unknown":
      return new HttpError(404, `There is no web approval ${approvalId}.`);
  }
}
