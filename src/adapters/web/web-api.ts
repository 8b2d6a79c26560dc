import type { IncomingMessage, ServerResponse } from "node:http";
import { resolve } from "node:path";
import type { RunTrace, StepTrace } from "../../agent/trace.js";
import type { EraseTarget, ErasureReceipt, StorePort } from "../../store/port.js";
import type { Logger } from "../../logger.js";
import { approvalView, type EventHub, type NumberedEvent, type WebEvent } from "./event-hub.js";
import { actingUser, decodeSegment, eraseTargetOf, type Caller } from "./api-rules.js";
import { HttpError, openEventStream, readJsonObject, sendJson } from "./http.js";
import type { ReplayComparison } from "../../agent/replay.js";
import { sessionFiltersOf } from "./session-filters.js";
import { namedRun, namedSessions, sessionNamesOf } from "./session-names.js";
import type { NameBook } from "../names.js";
import { storedRunEvents } from "./store-events.js";
import { MAX_STREAMS_PER_CALLER, streamsPerCaller } from "./stream-limits.js";
import { isRating, MAX_REASON_CHARS } from "../../agent/feedback.js";
import type { BudgetStanding } from "../../conversations/channel-budget.js";
import { scheduleRoutes } from "./web-schedules.js";
import { evalRoutes } from "./web-eval.js";

/** What the routes that need only the store have: no agent, so a process without a model (ingress) can serve them. */
export interface StoreApiContext {
  /** Where the events of runs are followed (the agent's here; in ingress, what the store says). */
  hub: EventHub;
  /** A run that ended before the hub followed it, as events (by default storedRunEvents). */
  storedRun?: (run: RunTrace, steps: StepTrace[]) => WebEvent[];
  /** Where runs are accepted and the trace is read. */
  store: StorePort;
  /** POST /api/erase: the store's erasure with the run queue's turns of what went (eraseWithTurns). */
  erase: (target: EraseTarget, by: string) => Promise<ErasureReceipt>;
  log: Logger;
  /** Shown by the page: which model answers; null when none is configured. */
  modelLabel: string | null;
  /** The tools the agent has, which the trace viewer offers as a filter. */
  toolNames: string[];
  /** Whether the model has a known price (costs are "unknown", never 0, without one). */
  priced: boolean;
  /** How the channel settings' budgets stand (all, or those that concern one person); absent without settings. */
  budgets?: (userId?: string) => Promise<BudgetStanding[]>;
  /** Why no run can start (no model configured); POST /api/runs then answers 503 with it. */
  problem?: string;
  /** What an empty chat suggests asking. */
  hints: string[];
  tokenRequired: boolean;
  /** Re-runs a recorded run on the agent's model (or another one it can name); absent without a model. */
  replay?: (runId: string, options: { model?: string; systemPrompt?: string }) => Promise<ReplayComparison>;
  /** Why nothing can be replayed here, when `replay` is absent and `problem` does not say. */
  noReplay?: string;
  /** People's and places' names on their platforms; without it, sessions and runs show ids. */
  names?: NameBook;
  /** Where eval cases are saved (GLASSBOX_EVAL_DIR, resolved); `evals` in the working directory without it. */
  evalDir?: string;
}

/** Answers an /api request; false when no route matches the path. The caller is resolved once a route matches. */
export type ApiHandler = (
  request: IncomingMessage,
  response: ServerResponse,
  url: URL,
  caller: Caller | (() => Caller),
) => Promise<boolean>;

type Handler = (
  request: IncomingMessage,
  response: ServerResponse,
  params: string[],
  url: URL,
  caller: Caller,
) => Promise<void> | void;
export type Route = [method: string, path: RegExp, handler: Handler];

/** Statuses of a run that may still change. */
const UNFINISHED = new Set(["accepted", "running", "awaiting_approval"]);

/** Who may read what: a user's token reads only the sessions its user started; anyone else reads all. */
export function readersOf(store: StorePort) {
  const mayRead = async (caller: Caller, sessionId: string) =>
    caller.userId === undefined || (await store.sessionOwner(sessionId)) === caller.userId;
  /** The run, when it exists and the caller may read it; otherwise a 404 that does not say which. */
  const readableRun = async (caller: Caller, runId: string) => {
    const run = await store.run(runId);
    if (!run || !(await mayRead(caller, run.sessionId))) throw new HttpError(404, `There is no run ${runId}.`);
    return run;
  };
  return { mayRead, readableRun };
}

/**
 * What needs only the store (and the hub, to follow runs): /api/info, reading runs, steps, requests,
 * sessions and usage, following a run or a session, feedback, and a replay where there is a model.
 */
export function storeRoutes(context: StoreApiContext): Route[] {
  const { hub, store, log } = context;
  const { mayRead, readableRun } = readersOf(store);
  const streams = streamsPerCaller(MAX_STREAMS_PER_CALLER);
  /** The schedule that made a run, as it is now (only its id once it is deleted). */
  const scheduleOf = async ({ scheduleId, sessionId }: RunTrace) => {
    if (!scheduleId) return {};
    const schedule = (await store.schedules(sessionId)).find((found) => found.id === scheduleId);
    const { id, name, cron, timezone, prompt } = schedule ?? { id: scheduleId };
    return { schedule: { id, ...(name ? { name } : {}), ...(cron ? { cron, timezone, prompt } : { deleted: true }) } };
  };
  const runView = async (run: RunTrace) => {
    const [approvals, feedback, schedule] = await Promise.all([
      store.approvalsOfRun(run.runId),
      store.feedbackOf(run.runId),
      scheduleOf(run),
    ]);
    const named = await namedRun(run, context.names);
    return {
      ...named,
      done: !UNFINISHED.has(run.status),
      approvals: approvals.map(approvalView),
      feedback,
      ...schedule,
    };
  };

  async function streamRun(
    request: IncomingMessage,
    response: ServerResponse,
    stored: RunTrace,
    caller: Caller,
  ): Promise<void> {
    const { runId } = stored;
    // Watched before the stream opens, so a refusal (too many sessions followed: 503) is still an answer
    // of its own; the watcher is called back only later, once `stream` is open.
    const send = (numbered: NumberedEvent) => stream.send(numbered.id, numbered.event);
    const release = streams.take(request, caller);
    let watching: ReturnType<typeof hub.watchRun>;
    try {
      watching = hub.watchRun(
        runId,
        { event: send, end: () => stream.close() },
        UNFINISHED.has(stored.status) ? stored.sessionId : undefined,
      );
    } catch (error) {
      release();
      throw error;
    }
    const stream = openEventStream(request, response);
    stream.onClose(release);
    if (!watching) {
      // Finished before this process followed it: the run as the store has it.
      const steps = await store.steps(runId);
      for (const event of (context.storedRun ?? storedRunEvents)(stored, steps)) stream.send(0, event);
      return stream.close();
    }
    for (const numbered of watching.replay) send(numbered);
    if (watching.ended) return stream.close();
    stream.onClose(watching.stop);
  }

  return [
    ...scheduleRoutes(store),
    ...evalRoutes({ store, readableRun, evalDir: context.evalDir ?? resolve("evals") }),
    [
      "GET",
      /^\/api\/info$/,
      (_request, response, _params, _url, caller) => {
        sendJson(response, 200, {
          model: context.modelLabel,
          priced: context.priced,
          problem: context.problem ?? null,
          hints: context.hints,
          tools: context.toolNames,
          tokenRequired: context.tokenRequired,
          user: caller.userId ?? null,
        });
      },
    ],

    [
      "GET",
      /^\/api\/runs\/([^/]+)$/,
      async (_request, response, [runId = ""], _url, caller) => {
        const run = await readableRun(caller, runId);
        // A pipeline is polled by its first stage's id (the one POST /api/runs gave): it answers for the whole pipeline.
        sendJson(
          response,
          200,
          run.pipelineRunId === run.runId
            ? { ...(await runView(run)), ...pipelineView(await store.stagesOf(run.runId)) }
            : await runView(run),
        );
      },
    ],

    [
      "GET",
      /^\/api\/runs\/([^/]+)\/events$/,
      async (request, response, [runId = ""], _url, caller) =>
        streamRun(request, response, await readableRun(caller, runId), caller),
    ],

    // A replay spends the model's tokens: only for whoever may read the run, with bounded inputs.
    [
      "POST",
      /^\/api\/runs\/([^/]+)\/replay$/,
      async (request, response, [runId = ""], _url, caller) => {
        const body = await readJsonObject(request);
        await readableRun(caller, runId);
        if (!context.replay)
          throw new HttpError(
            503,
            context.problem ?? context.noReplay ?? "No model is configured, so nothing can be replayed.",
          );
        sendJson(response, 200, await context.replay(runId, replayOptionsOf(body)));
      },
    ],

    // 👍 / 👎 on a web answer, as the caller's user (a user's token only as its own); the latest replaces
    // the one before. Slack and Discord answers are rated where they were given, by who can see them.
    [
      "POST",
      /^\/api\/runs\/([^/]+)\/feedback$/,
      async (request, response, [runId = ""], _url, caller) => {
        const body = await readJsonObject(request);
        const run = await readableRun(caller, runId);
        if (!run.sessionId.startsWith("web:"))
          throw new HttpError(
            409,
            `Run ${runId} is not a web run; rate it where it answered (its Slack thread or Discord channel).`,
          );
        if (UNFINISHED.has(run.status)) throw new HttpError(409, "This run has not answered yet; rate it once it has.");
        if (!isRating(body.rating)) throw new HttpError(400, 'Say "rating": "up" or "down".');
        if (body.reason !== undefined && (typeof body.reason !== "string" || body.reason.length > MAX_REASON_CHARS)) {
          throw new HttpError(
            400,
            `Give "reason" as text of up to ${MAX_REASON_CHARS.toLocaleString("en-US")} characters, or leave it out.`,
          );
        }
        const userId = actingUser(caller, body.userId);
        await store.recordFeedback({ runId, userId, rating: body.rating, reason: body.reason, source: "web" });
        sendJson(response, 200, { runId, feedback: await store.feedbackOf(runId) });
      },
    ],

    [
      "GET",
      /^\/api\/runs\/([^/]+)\/steps$/,
      async (_request, response, [runId = ""], _url, caller) => {
        await readableRun(caller, runId);
        sendJson(response, 200, { runId, steps: await store.steps(runId) });
      },
    ],

    [
      "GET",
      /^\/api\/runs\/([^/]+)\/steps\/(\d+)\/payload$/,
      async (_request, response, [runId = "", step = ""], _url, caller) => {
        await readableRun(caller, runId);
        const stored: unknown = await store.payload(runId, Number(step));
        if (!stored) throw new HttpError(404, `Run ${runId} has no step ${step}.`);
        const model = (await store.steps(runId)).find((one) => one.step === Number(step))?.model ?? null;
        sendJson(response, 200, { runId, step: Number(step), ...requestOf(stored, model) });
      },
    ],

    [
      "GET",
      /^\/api\/sessions$/,
      async (_request, response, _params, url, caller) => {
        const filters = sessionFiltersOf(url.searchParams);
        const found = await store.searchSessions(
          caller.userId === undefined ? filters : { ...filters, startedBy: caller.userId },
        );
        sendJson(response, 200, { ...found, sessions: await namedSessions(found.sessions, context.names) });
      },
    ],

    [
      "GET",
      /^\/api\/sessions\/([^/]+)\/runs$/,
      async (_request, response, [sessionId = ""], _url, caller) => {
        const runs = await store.runsOfSession(sessionId);
        // A session without runs (only messages, from before runs were kept) still exists.
        const exists = runs.length > 0 || (await store.listSessions()).some((session) => session.id === sessionId);
        if (!(await mayRead(caller, sessionId)) || !exists)
          throw new HttpError(404, `There is no session ${sessionId}.`);
        const first = runs.find((run) => !run.parentRunId);
        const startedBy = (await store.sessionOwner(sessionId)) ?? first?.userId ?? null;
        sendJson(response, 200, {
          session: sessionId,
          ...(await sessionNamesOf(sessionId, first?.input ?? null, startedBy, context.names)),
          startedBy,
          runs: await Promise.all(runs.map(runView)),
          folds: await store.foldsOf(sessionId),
        });
      },
    ],

    [
      "GET",
      /^\/api\/sessions\/([^/]+)\/events$/,
      async (request, response, [sessionId = ""], url, caller) => {
        const lastEventId = request.headers["last-event-id"] ?? url.searchParams.get("after") ?? undefined;
        const afterId = lastEventId === undefined ? undefined : Number(lastEventId);
        if (afterId !== undefined && !Number.isInteger(afterId))
          throw new HttpError(400, "Last-Event-ID (or ?after=) must be a whole number.");
        // A user may follow a session of theirs, or one nobody has started yet (a new chat page):
        // then only once it is theirs do its events reach them (its first run's row comes before them).
        const owner = caller.userId && (await store.sessionOwner(sessionId));
        if (owner && owner !== caller.userId) throw new HttpError(404, `There is no session ${sessionId}.`);
        const known = caller.userId === undefined || owner === caller.userId;
        // Until then, each event in turn asks whether the session is the caller's now, and waits in line.
        let readable = known;
        let line = Promise.resolve();
        const inLine = (then: () => Promise<void> | void) => {
          line = line
            .then(then)
            .catch((error: unknown) =>
              log.error({ error: (error as Error).message, sessionId }, "web: following a session failed"),
            );
        };
        const send = (numbered: NumberedEvent) => {
          if (known) return stream.send(numbered.id, numbered.event);
          inLine(async () => {
            readable ||= await mayRead(caller, sessionId);
            if (readable) stream.send(numbered.id, numbered.event);
          });
        };
        // As for a run: watched first, so a refusal is answered before the stream opens.
        const release = streams.take(request, caller);
        let watching: ReturnType<typeof hub.watchSession>;
        try {
          watching = hub.watchSession(sessionId, afterId, {
            event: send,
            end: () => (known ? stream.close() : inLine(() => stream.close())),
          });
        } catch (error) {
          release();
          throw error;
        }
        const stream = openEventStream(request, response);
        for (const numbered of watching.replay) send(numbered);
        stream.onClose(() => {
          watching.stop();
          release();
        });
      },
    ],

    // Erasure is the operator's: the service credential only (or, with no token set, this machine).
    [
      "POST",
      /^\/api\/erase$/,
      async (request, response, _params, _url, caller) => {
        if (caller.userId !== undefined)
          throw new HttpError(403, "Only the service token (GLASSBOX_API_TOKEN) may erase data.");
        const target = eraseTargetOf(await readJsonObject(request));
        sendJson(response, 200, await context.erase(target, "api:service"));
      },
    ],

    [
      "GET",
      /^\/api\/usage$/,
      async (_request, response, _params, _url, caller) => {
        const [byUser, byDay, budgets] = await Promise.all([
          store.totalsByUser(caller.userId),
          store.totalsByDay(caller.userId),
          context.budgets?.(caller.userId),
        ]);
        sendJson(response, 200, { byUser, byDay, ...(budgets ? { budgets } : {}) });
      },
    ],
  ];
}

/** One handler over routes: a path no route has is false (the server says 404); a method it lacks, 405. */
export function routerOf(routes: Route[]): ApiHandler {
  return async function handle(request, response, url, caller) {
    const matching = routes.filter(([, path]) => path.test(url.pathname));
    if (matching.length === 0) return false;
    const route = matching.find(([method]) => method === request.method);
    if (!route)
      throw new HttpError(
        405,
        `${url.pathname} does not take ${request.method}; it takes ${[...new Set(matching.map(([method]) => method))].join(", ")}.`,
      );
    const [, path, handler] = route;
    const params = (path.exec(url.pathname) ?? []).slice(1).map(decodeSegment);
    await handler(request, response, params, url, typeof caller === "function" ? caller() : caller);
    return true;
  };
}

/** Why a run cannot be stopped, in one sentence. */
export function notRunning(status: string): string {
  if (status === "accepted")
    return "This run has not started yet: it waits for its turn; it can be stopped once it runs.";
  if (status === "awaiting_approval")
    return "This run is paused, waiting for a decision on its approval; deny it, or send a new message, to end it.";
  return `This run has already ended (${status.replaceAll("_", " ")}).`;
}

/**
 * What a step sent, as the trace keeps it: its messages, and the model that answered (from the
 * step). `request` is the rest of the request (tools, tool_choice, stream) where the trace kept it
 * whole, and null where it kept only the messages.
 */
function requestOf(
  stored: unknown,
  model: string | null,
): { model: string | null; messages: unknown[]; request: Record<string, unknown> | null } {
  if (Array.isArray(stored)) return { model, messages: stored, request: null };
  const { messages, ...request } = stored as Record<string, unknown>;
  return { model, messages: Array.isArray(messages) ? messages : [], request };
}

/** A pipeline as one run: the state and answer of its latest stage once it has ended (its last stage ended, or a stage stopped it). */
function pipelineView(stages: RunTrace[]) {
  const last = stages.at(-1);
  if (!last) return {};
  const ended = !UNFINISHED.has(last.status);
  const done =
    ended && (last.pipelineStage === last.pipelineStages || (last.status !== "final" && last.status !== "max_steps"));
  return {
    status: done || !ended ? last.status : "running",
    output: done ? last.output : null,
    done,
    stages: stages.map((stage) => ({
      runId: stage.runId,
      stage: stage.pipelineStage,
      status: stage.status,
      output: stage.output,
    })),
  };
}

const MAX_REPLAY_PROMPT_CHARS = 20_000;

function replayOptionsOf(body: Record<string, unknown>): { model?: string; systemPrompt?: string } {
  const { model, systemPrompt } = body;
  if (model !== undefined && (typeof model !== "string" || model.trim() === "" || model.length > 200))
    throw new HttpError(
      400,
      'Say "model" as the name of a model (up to 200 characters), or leave it out to replay on the configured one.',
    );
  if (
    systemPrompt !== undefined &&
    (typeof systemPrompt !== "string" || systemPrompt.length > MAX_REPLAY_PROMPT_CHARS)
  ) {
    throw new HttpError(
      400,
      `Say "systemPrompt" as text of up to ${MAX_REPLAY_PROMPT_CHARS.toLocaleString("en-US")} characters, or leave it out to replay with the recorded one.`,
    );
  }
  return {
    ...(model ? { model: model.trim() } : {}),
    ...(systemPrompt?.trim() ? { systemPrompt: systemPrompt.trim() } : {}),
  };
}
