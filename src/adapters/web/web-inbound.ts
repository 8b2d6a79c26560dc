/**
 * HTTP API ingress (GLASSBOX_ROLE=ingress, and `all`), with no model behind it. The writes that
 * start work: POST /api/runs accepts a message (its run recorded `accepted`, its message stored, its
 * turn enqueued, in one transaction) and answers 202 with the run's id; POST /api/approvals/:id
 * decides a web approval, and the decision that readies its run enqueues the resume in the same
 * transaction; POST /api/runs/:id/cancel records a cancel request, which reaches the run's worker.
 * Given `trace`, it also serves the chat page and the trace viewer, and web-api.ts's routes that
 * need only the store (reading runs, steps, sessions, usage, feedback), under the same rules as the
 * web server; a page follows its runs by what the workers wrote (store-events.ts).
 */
import type { NameBook } from "../names.js";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { configurationError } from "../../agent/errors.js";
import type { TokenCounter } from "../../agent/tokens.js";
import type { Logger } from "../../logger.js";
import { approvalView } from "./event-hub.js";
import { type Health, serveHealth } from "./health.js";
import { HttpError, listenError, readJsonObject, sendJson } from "./http.js";
import { actingUser, credentialsOf, inputOf, refusalOf, webSession, type Caller } from "./api-rules.js";
import { notRunning, readersOf, routerOf, storeRoutes, type Route } from "./web-api.js";
import { callersOf, isLoopback, sendHttpError } from "./web-access.js";
import { servePage } from "./web-pages.js";
import type { StorePort } from "../../store/port.js";
import { followStoreEvents } from "./store-events.js";
import { MAX_UPLOAD_BODY_BYTES, uploadedAttachments } from "./web-attachments.js";
import type { UploadShelf } from "./web-uploads.js";
import { addressesOf, type ListenAddresses } from "../listen-addresses.js";
import type { ReplayOnModel } from "./web-replay.js";
import type { BudgetStanding } from "../../conversations/channel-budget.js";
import {
  acceptInboundText,
  decideClick,
  eraseWithTurns,
  type IngressQueue,
  type IngressStore,
} from "../../conversations/turns.js";

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
  /** Whether the person who asked may decide their own call, when its tool does not say (default true). */
  requesterMayApprove?: boolean;
  port: number;
  host: string;
  /** What an empty chat suggests asking. */
  hints?: string[];
  /** The trace viewer's replays, in a process that also runs a worker (`all`); without it they are refused. */
  replay?: ReplayOnModel;
  /** Where uploaded files wait for a worker in this process (`all`); without it, a message with files is refused. */
  uploads?: UploadShelf;
  /** Why no run can start here (no model configured): the pages say it, and POST /api/runs answers 503 with it. */
  problem?: string;
  /** The tools the pages name: a worker's in the same process, or those the live workers recorded (this process loads none). */
  toolNames?: string[];
  /** The process's readiness, served at /healthz and /readyz without a token. */
  health?: Health;
  /** The pages and the store's routes, read from `store` (the same database); without it, only the writes. */
  trace?: {
    store: StorePort;
    /** Which model the workers use, as the pages show it. */
    modelLabel: string | null;
    /** Whether that model has a known price. */
    priced: boolean;
    /** Where the trace viewer saves eval cases (GLASSBOX_EVAL_DIR). */
    evalDir?: string;
    /** How the channel settings' budgets stand (all, or those that concern one person); absent without settings. */
    budgets?: (userId?: string) => Promise<BudgetStanding[]>;
    /** People's and places' names on their platforms (names.ts); absent without Slack or Discord. */
    names?: NameBook;
  };
}

/** How long a stop lets open event streams finish before it cuts the connections. */
const STOP_GRACE_MS = 1_000;

export interface HttpIngress extends ListenAddresses {
  stop(): Promise<void>;
}

export async function startHttpIngress<Transaction>(options: HttpIngressOptions<Transaction>): Promise<HttpIngress> {
  const { store, queue, log, counter } = options;
  const credentials = credentialsOf(options.apiToken, options.apiUsers ?? {});
  if (credentials.length === 0 && !isLoopback(options.host)) {
    throw configurationError(
      `GLASSBOX_WEB_HOST is ${options.host}, which other machines can reach; set GLASSBOX_API_TOKEN or GLASSBOX_API_USERS so that the API needs a token, or use 127.0.0.1.`,
    );
  }

  const callerOf = callersOf(credentials);

  async function startRun(request: IncomingMessage, response: ServerResponse, caller: Caller): Promise<void> {
    const uploads = options.uploads;
    // Room for a message's files (web-attachments.ts) where a worker here can read them.
    const body = await readJsonObject(request, uploads ? MAX_UPLOAD_BODY_BYTES : undefined);
    if (options.problem) throw new HttpError(503, options.problem);
    const sessionId = webSession(body.session);
    const input = inputOf(body.input);
    // Files need a worker in this process, which reads them from memory: say so rather than drop them.
    if (!uploads && Array.isArray(body.attachments) && body.attachments.length > 0)
      throw new HttpError(
        400,
        "This deployment takes files in Slack or Discord, not through the web API; send the message without them.",
      );
    const { attachments, problems } = uploads
      ? uploadedAttachments(body.attachments)
      : { attachments: [], problems: [] };
    if (!input && attachments.length === 0)
      throw new HttpError(400, 'Give the message as "input", a non-empty string.');
    const userId = actingUser(caller, body.userId);
    const files = uploads?.keep(attachments) ?? [];
    // The run's input is the text: the worker adds a line for each file, saying how the model was given it, as it starts the run.
    // Accepted means stored and enqueued: the 202 comes after the commit.
    const { outcome, runId } = await acceptInboundText(store, queue, counter, {
      eventIds: [],
      sessionId,
      userId,
      input,
      files,
      ...(caller.userId ? { sessionOwner: caller.userId } : {}),
    });
    if (outcome.kind === "not_owner")
      throw new HttpError(403, `The session ${sessionId} belongs to another user; use another session id.`);
    events?.changed(sessionId);
    sendJson(
      response,
      202,
      { runId, session: sessionId, ...(problems.length ? { problems } : {}) },
      { location: `/api/runs/${runId}` },
    );
  }

  async function decide(
    request: IncomingMessage,
    response: ServerResponse,
    caller: Caller,
    approvalId: string,
  ): Promise<void> {
    const body = await readJsonObject(request);
    if (typeof body.approved !== "boolean") throw new HttpError(400, 'Say "approved": true or false.');
    const userId = actingUser(caller, body.userId);
    // Only the web's own approvals: a Slack or Discord approval is decided where it was asked.
    const sessionId = (await store.approval(approvalId))?.sessionId;
    const readable =
      sessionId?.startsWith("web:") &&
      (caller.userId === undefined || (await store.sessionOwner(sessionId)) === caller.userId);
    if (!readable) throw new HttpError(404, `There is no web approval ${approvalId}.`);
    const deployment = { approvers: options.approvers ?? [], requesterMayApprove: options.requesterMayApprove ?? true };
    const outcome = await decideClick(store, queue, {
      approvalId,
      userId,
      approved: body.approved,
      ...deployment,
      origin: { sessionPrefix: "web:" },
    });
    if (outcome.kind !== "decided" && outcome.kind !== "counted") throw refusalOf(outcome, approvalId, deployment);
    events?.changed(outcome.approval.sessionId);
    // "counted": an approval toward a rule of several; the approval waits for `needed` in all.
    sendJson(response, 200, {
      outcome: outcome.kind,
      approval: approvalView(outcome.approval),
      resumed: outcome.kind === "decided" && outcome.runReady,
      ...(outcome.kind === "counted" ? { needed: outcome.needed } : {}),
    });
  }

  /** Stops a web run wherever it runs (or, accepted, before it starts): the store tells its worker. */
  async function cancel(
    request: IncomingMessage,
    response: ServerResponse,
    caller: Caller,
    runId: string,
    reads: StorePort,
  ): Promise<void> {
    await readJsonObject(request);
    const run = await readersOf(reads).readableRun(caller, runId);
    if (!run.sessionId.startsWith("web:"))
      throw new HttpError(
        409,
        `Run ${runId} is not a web run; stop it where it runs (say "stop" in its Slack thread, or /stop in Discord).`,
      );
    if (run.status !== "running" && run.status !== "accepted") throw new HttpError(409, notRunning(run.status));
    const cancelled = await store.requestCancel({ sessionId: run.sessionId, runId });
    if (cancelled.length === 0) throw new HttpError(409, "This run has already ended.");
    sendJson(response, 202, { runId, cancelling: true });
  }

  const trace = options.trace;
  const events = trace && followStoreEvents({ store: trace.store, log });
  const routes: Route[] = [
    ["POST", /^\/api\/runs$/, (request, response, _params, _url, caller) => startRun(request, response, caller)],
    [
      "POST",
      /^\/api\/approvals\/([^/]+)$/,
      (request, response, [approvalId = ""], _url, caller) => decide(request, response, caller, approvalId),
    ],
  ];
  if (trace && events) {
    routes.push([
      "POST",
      /^\/api\/runs\/([^/]+)\/cancel$/,
      (request, response, [runId = ""], _url, caller) => cancel(request, response, caller, runId, trace.store),
    ]);
    routes.push(
      ...storeRoutes({
        hub: events.hub,
        storedRun: events.storedRun,
        store: trace.store,
        erase: (target, by) => eraseWithTurns(store, queue, target, by),
        log,
        modelLabel: trace.modelLabel,
        toolNames: options.toolNames ?? [],
        priced: trace.priced,
        ...(trace.evalDir ? { evalDir: trace.evalDir } : {}),
        ...(trace.budgets ? { budgets: trace.budgets } : {}),
        ...(trace.names ? { names: trace.names } : {}),
        hints: options.hints ?? [],
        tokenRequired: credentials.length > 0,
        problem: options.problem,
        ...(options.replay
          ? { replay: options.replay }
          : {
              noReplay:
                "This server does not replay runs (its pages read the store; the model is the workers'); use glassbox replay <run-id> where the model is configured.",
            }),
      }),
    );
  }
  const api = routerOf(routes);

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const url = new URL(request.url ?? "/", "http://ingress");
    const path = url.pathname;
    if (!path.startsWith("/api/") && trace) return servePage(request, response, path);
    // The caller is asked for once a route matches: an unknown path is a 404, a wrong method a 405, before any token.
    if (await api(request, response, url, () => callerOf(request, url))) return;
    if (!trace)
      throw new HttpError(
        404,
        `There is no ${path} here: this process only accepts POST /api/runs and POST /api/approvals/<id>.`,
      );
    throw new HttpError(404, `There is no ${path} in this API.`);
  }

  const server: Server = createServer((request, response) => {
    if (options.health && serveHealth(request, response, options.health)) return;
    handle(request, response).catch((error: unknown) => {
      if (response.headersSent) return void response.end();
      if (error instanceof HttpError) return sendHttpError(response, error);
      log.error({ error: (error as Error).message, path: request.url }, "web: a request failed");
      sendJson(response, 500, { error: "Something went wrong inside glassbox; the server log says what." });
    });
  });
  server.requestTimeout = 10_000; // a slow body never holds a connection for long
  await new Promise<void>((resolve, reject) => {
    server.once("error", (error: NodeJS.ErrnoException) =>
      reject(listenError(error, options.host, options.port, "GLASSBOX_WEB_PORT")),
    );
    server.listen(options.port, options.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    ...addressesOf(options.host, port),
    async stop() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      events?.stop(); // ends the open event streams, each after what was written to it
      server.closeIdleConnections();
      // A stream still finishing (a reader's check under way) gets a moment; then every connection goes.
      await Promise.race([closed, sleep(STOP_GRACE_MS, undefined, { ref: false })]);
      server.closeAllConnections();
      await closed;
    },
  };
}
