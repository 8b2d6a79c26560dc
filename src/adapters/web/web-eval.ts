/**
 * Compare and eval cases on the web. GET /api/compare?a=<run>&b=<run> puts two recorded runs side by
 * side (src/agent/run-compare.ts), for whoever may read both. POST /api/runs/<id>/eval-case saves a run
 * as an eval case file, and POST /api/eval-cases?<the sessions' filters> saves every 👎 run of the
 * sessions those filters find. Files are written on the server: only the service token may (a
 * person's token may not), into GLASSBOX_EVAL_DIR, under names glassbox makes from run ids.
 */
import { GlassboxError } from "../../agent/errors.js";
import { compareSummaries, summaryOfRecorded } from "../../agent/run-compare.js";
import type { RunTrace } from "../../agent/trace.js";
import type { StorePort } from "../../store/port.js";
import { EvalCaseTooLarge, evalCaseOfRun, writeEvalCase } from "../eval-case-files.js";
import type { Caller } from "./api-rules.js";
import { HttpError, sendJson } from "./http.js";
import { sessionFiltersOf } from "./session-filters.js";
import type { Route } from "./web-api.js";

/** The most 👎 runs one request saves. */
export const MAX_SAVED_CASES = 200;
const UNFINISHED = new Set(["accepted", "running", "awaiting_approval"]);

export interface EvalRoutesContext {
  store: StorePort;
  /** The run when the caller may read it, else a 404 that does not say which (readersOf). */
  readableRun: (caller: Caller, runId: string) => Promise<RunTrace>;
  /** GLASSBOX_EVAL_DIR, resolved. */
  evalDir: string;
}

export function evalRoutes({ store, readableRun, evalDir }: EvalRoutesContext): Route[] {
  const side = async (caller: Caller, runId: string) => {
    const run = await readableRun(caller, runId);
    const { runId: id, sessionId, input, model, status, startedAt } = run;
    return {
      runId: id,
      sessionId,
      input,
      model,
      status,
      startedAt,
      summary: summaryOfRecorded(run, await store.steps(id)),
    };
  };
  const onlyService = (caller: Caller) => {
    if (caller.userId !== undefined)
      throw new HttpError(
        403,
        "Only the service token (GLASSBOX_API_TOKEN) may save eval cases: they are files written on the server.",
      );
  };
  const save = async (run: RunTrace) => {
    if (UNFINISHED.has(run.status)) throw new HttpError(409, `Run ${run.runId} has not ended; save it once it has.`);
    try {
      const saved = writeEvalCase(evalDir, await evalCaseOfRun(store, run.runId));
      return { runId: run.runId, ...saved };
    } catch (error) {
      if (error instanceof EvalCaseTooLarge) throw new HttpError(413, error.message);
      if (error instanceof GlassboxError && error.code === "configuration") throw new HttpError(409, error.message);
      throw error;
    }
  };

  return [
    [
      "GET",
      /^\/api\/compare$/,
      async (_request, response, _params, url, caller) => {
        const a = url.searchParams.get("a") ?? "";
        const b = url.searchParams.get("b") ?? "";
        if (!a || !b) throw new HttpError(400, "Name the two runs to compare: /api/compare?a=<run>&b=<run>.");
        const [left, right] = [await side(caller, a), await side(caller, b)];
        sendJson(response, 200, { a: left, b: right, ...compareSummaries(left.summary, right.summary) });
      },
    ],

    [
      "POST",
      /^\/api\/runs\/([^/]+)\/eval-case$/,
      async (_request, response, [runId = ""], _url, caller) => {
        onlyService(caller);
        sendJson(response, 200, { directory: evalDir, saved: [await save(await readableRun(caller, runId))] });
      },
    ],

    // The page sends the filters it shows (as GET /api/sessions takes them); 👎 is implied.
    [
      "POST",
      /^\/api\/eval-cases$/,
      async (_request, response, _params, url, caller) => {
        onlyService(caller);
        const filters = { ...sessionFiltersOf(url.searchParams), rated: "down" as const };
        const { sessions } = await store.searchSessions(filters);
        const saved = [];
        const skipped: Array<{ runId: string; reason: string }> = [];
        for (const session of sessions) {
          for (const run of await store.runsOfSession(session.id)) {
            if (saved.length + skipped.length >= MAX_SAVED_CASES) break;
            const feedback = await store.feedbackOf(run.runId);
            if (!feedback.some((one) => one.rating === "down")) continue;
            try {
              saved.push(await save(run));
            } catch (error) {
              if (!(error instanceof HttpError) || error.status === 500) throw error;
              skipped.push({ runId: run.runId, reason: error.message });
            }
          }
        }
        sendJson(response, 200, { directory: evalDir, saved, skipped });
      },
    ],
  ];
}
