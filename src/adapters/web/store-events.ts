/**
 * What the chat page and API clients see of web sessions, in every deployment: the runs as their
 * workers stored them (run_start, run_resumed, each step's model call, its tool calls as they run
 * and end, its notes, approval_requested, approval_decided, run_end), published to an event hub
 * for web-api.ts's event routes. A followed session is read when a worker says its run stored
 * something (the empty notices of text-relay.ts, through StorePort.watchText: at once in one
 * process on SQLite, a NOTIFY on PostgreSQL) and about once a second besides, which covers a
 * notice missed. The answer's text streams as it is written: workers pass it on the same way,
 * never stored, so a piece missed is missed until the whole answer comes with the run's end. A
 * worker's notice that a run waits for a run slot becomes the `queued` event the page shows.
 */
import { HttpError } from "./http.js";
import { approvalView, createEventHub, type EventHub, type WebEvent } from "./event-hub.js";
import { modelEndView, toolEndView } from "./web-surface.js";
import type { RunTrace, StepTrace } from "../../agent/trace.js";
import { answeredBy, type StopReason } from "../../agent/run.js";
import type { Logger } from "../../logger.js";
import type { StorePort } from "../../store/port.js";
import type { TextNotice } from "../../store/port-data.js";

export type StoreEventsReader = Pick<StorePort, "run" | "runsOfSession" | "approvalsOfRun" | "steps" | "watchText">;

export interface StoreEventsOptions {
  store: StoreEventsReader;
  log: Logger;
  /** How often a followed session is read (default 1 s). */
  everyMs?: number;
  /** Sessions followed at once; one more is refused with a 503 and its page tries again (default 1,000). */
  maxSessions?: number;
  /**
   * A run found already ended when its session is first read is sent only if it ended this recently
   * (default 60 s): the page may have loaded it still running. Older ones are history it has.
   */
  recentMs?: number;
}

export interface StoreEvents {
  /** The hub to give the API: following a session or an unfinished run reads the store for it. */
  hub: EventHub;
  /** A run that ended before anyone here followed it, as storedRunEvents shows it, with the error it ended with. */
  storedRun(run: RunTrace, steps: StepTrace[]): WebEvent[];
  /** Reads the session now if someone follows it (this process changed it: a message accepted, an approval decided). */
  changed(sessionId: string): void;
  stop(): void;
}

type RunError = NonNullable<Extract<WebEvent, { type: "run_end" }>["error"]>;

const UNFINISHED = new Set(["accepted", "running", "awaiting_approval"]);
/** Streamed text kept for a run not yet read as running (read again at once), and for how many such runs. */
const EARLY_TEXT_CHARS = 16 * 1024;
const EARLY_TEXT_RUNS = 1_000;
/** Sessions nobody follows any more whose runs' state is kept, so that following one again sends only what is new. */
const REMEMBERED_SESSIONS = 500;

interface SeenRun {
  status: string;
  started: boolean;
  /** Approval id -> status, once the run has paused. */
  approvals: Map<string, string>;
  /** What was sent of each stored step: the ids of its calls shown running and ended, and how many notes. */
  steps: Map<number, SentStep>;
  /** The step whose streamed text is being shown. */
  textStep?: number;
}

interface SentStep {
  started: Set<string>;
  ended: Set<string>;
  notes: number;
}

interface Followed {
  watchers: number;
  /** A reading is under way (the first one, a notice's or the timer's). */
  reading: boolean;
  /** News came during the reading: read again once it is done. */
  again: boolean;
  /** Undefined until the session's first reading. */
  runs?: Map<string, SeenRun>;
}

export function followStoreEvents(options: StoreEventsOptions): StoreEvents {
  const { store, log } = options;
  const maxSessions = options.maxSessions ?? 1_000;
  const recentMs = options.recentMs ?? 60_000;
  const inner = createEventHub();
  const followed = new Map<string, Followed>();
  // What was sent of sessions followed before: the hub still has those events (a stream opened later replays them).
  const remembered = new Map<string, Map<string, SeenRun>>();
  // The errors runs ended with, as their workers said (the store keeps only the sentence, as the output).
  const endErrors = new Map<string, RunError>();
  let reading = false;
  // Text that came before its run was read as running (started, or resumed) with the steps before it; `text` undefined once it grew past EARLY_TEXT_CHARS.
  const earlyText = new Map<string, { sessionId: string; step: number; text: string | undefined }>();
  const watchingText = store.watchText(heardText).catch((error: unknown) => {
    log.warn(
      { error: (error as Error).message },
      "ingress: cannot hear the workers' streamed answer text; pages get each answer when its run ends",
    );
    return async () => {};
  });

  function heardText(notice: TextNotice): void {
    if (notice.error) {
      endErrors.set(notice.runId, notice.error as RunError);
      for (const oldest of endErrors.keys()) {
        if (endErrors.size <= EARLY_TEXT_RUNS) break;
        endErrors.delete(oldest);
      }
    }
    const entry = followed.get(notice.sessionId);
    if (!entry) return;
    if (notice.queued) return showQueued(notice.sessionId, notice.runId, entry);
    if (notice.note !== undefined)
      return inner.publish(notice.sessionId, {
        type: "notice",
        runId: notice.runId,
        sessionId: notice.sessionId,
        text: notice.note,
      });
    if (notice.text === "") return readSoon(notice.sessionId, entry); // the run stored something
    const seen = entry.runs?.get(notice.runId);
    // Shown at once when the step before it was sent with its calls' ends (each is stored before the next
    // model call); else after a reading sends them, so a page never sees a step start before the last one's calls end.
    const previous = seen?.steps.get(notice.step - 1);
    const inOrder = notice.step === 1 || (previous !== undefined && previous.ended.size >= previous.started.size);
    if (seen?.started && seen.status === "running" && inOrder)
      return showText(notice.sessionId, notice.runId, seen, notice.step, notice.text);
    if (seen?.started && !UNFINISHED.has(seen.status)) return; // ended: the text is stale
    const early =
      earlyText.get(notice.runId) ??
      (earlyText.size < EARLY_TEXT_RUNS ? { sessionId: notice.sessionId, step: notice.step, text: "" } : undefined);
    if (!early) return;
    if (early.step !== notice.step) Object.assign(early, { step: notice.step, text: "" });
    early.text =
      early.text !== undefined && early.text.length + notice.text.length <= EARLY_TEXT_CHARS
        ? early.text + notice.text
        : undefined;
    earlyText.set(notice.runId, early);
    readSoon(notice.sessionId, entry); // its start (or resumption) now, not at the next beat
  }

  /** A run that waits for a run slot, shown queued unless it was read as started already (a late notice). */
  function showQueued(sessionId: string, runId: string, entry: Followed): void {
    if (entry.runs?.get(runId)?.started) return;
    inner.publish(sessionId, { type: "queued", runId, sessionId });
  }

  /** The text that came before the run was read as running, shown once it is. */
  function showEarlyText(sessionId: string, runId: string, seen: SeenRun): void {
    const early = earlyText.get(runId);
    earlyText.delete(runId);
    if (early?.text) showText(sessionId, runId, seen, early.step, early.text);
  }

  /**
   * A piece of a step's answer, after a model_start when it is a new step's (the page then starts its
   * answer afresh). Text may come after its step was sent as ended (a worker holds back the first
   * answer it cannot yet tell from thinking, then sends it with the step); none for a step older than
   * one already shown or sent.
   */
  function showText(sessionId: string, runId: string, seen: SeenRun, step: number, text: string): void {
    if ((seen.textStep ?? 0) > step || seen.steps.has(step + 1)) return;
    if (seen.textStep !== step) inner.publish(sessionId, { type: "model_start", runId, step });
    seen.textStep = step;
    inner.publish(sessionId, { type: "model_delta", runId, step, text });
  }

  const follow = (sessionId: string): (() => void) => {
    let entry = followed.get(sessionId);
    if (!entry) {
      if (followed.size >= maxSessions)
        throw new HttpError(503, "Too many sessions are followed at once here; try again in a moment.");
      entry = { watchers: 0, reading: false, again: false, runs: remembered.get(sessionId) };
      remembered.delete(sessionId);
      followed.set(sessionId, entry);
      void readSession(sessionId, entry); // the first reading at once, not a second later
    }
    entry.watchers += 1;
    let stopped = false;
    return () => {
      if (stopped) return;
      stopped = true;
      const current = followed.get(sessionId);
      if (current && --current.watchers === 0) {
        followed.delete(sessionId);
        if (current.runs) remember(sessionId, current.runs);
        for (const [runId, early] of earlyText) if (early.sessionId === sessionId) earlyText.delete(runId);
      }
    };
  };

  /** A reading now, or right after the one under way (which may have read the store before the news). */
  function readSoon(sessionId: string, entry: Followed): void {
    if (entry.reading) entry.again = true;
    else void readSession(sessionId, entry);
  }

  function remember(sessionId: string, runs: Map<string, SeenRun>): void {
    remembered.set(sessionId, runs);
    for (const oldest of remembered.keys()) {
      if (remembered.size <= REMEMBERED_SESSIONS) break;
      remembered.delete(oldest);
    }
  }

  async function readSession(sessionId: string, entry: Followed): Promise<void> {
    if (entry.reading) return;
    entry.reading = true;
    entry.again = false;
    try {
      const runs = (await store.runsOfSession(sessionId)).filter((run) => run.parentRunId === null);
      const first = entry.runs === undefined;
      const seen = (entry.runs ??= new Map());
      for (const run of runs) {
        const before = seen.get(run.runId);
        if (!before && first && !UNFINISHED.has(run.status) && !endedWithin(run, recentMs)) {
          seen.set(run.runId, { status: run.status, started: true, approvals: new Map(), steps: new Map() }); // history the page has loaded
          continue;
        }
        const now = before ?? {
          status: "accepted",
          started: false,
          approvals: new Map<string, string>(),
          steps: new Map(),
        };
        if (!before) inner.accept(run.runId, sessionId);
        seen.set(run.runId, now);
        await publishChanges(sessionId, run, now);
      }
    } catch (error) {
      log.warn({ error: (error as Error).message, sessionId }, "ingress: reading a followed session failed");
    } finally {
      entry.reading = false;
      if (entry.again && followed.get(sessionId) === entry) void readSession(sessionId, entry);
    }
  }

  /** The events from what the run was (`seen`, updated here) to what it is. */
  async function publishChanges(sessionId: string, run: RunTrace, seen: SeenRun): Promise<void> {
    const was = seen.status;
    // A running run is read again for its new steps, a paused one for approvals decided one by one; anything else only when it changed.
    if (run.status === was && seen.started && run.status !== "running" && run.status !== "awaiting_approval") return;
    const publish = (event: WebEvent) => inner.publish(sessionId, event);
    if (run.status !== "accepted" && !seen.started) {
      publish(runStartOf(run, sessionId));
      seen.started = true;
    } else if (run.status === "running" && was !== "running") {
      publish({ type: "run_resumed", runId: run.runId, sessionId });
      // The calls that waited for a decision run now: shown running again.
      for (const sent of seen.steps.values()) sent.started.clear();
    }
    // The steps it stored since the last reading (a running run's, and those up to a pause or the end).
    if (run.status === "running" || run.status !== was) {
      // From the latest step sent: its tool results may have landed since.
      const from = Math.max(1, ...seen.steps.keys());
      const steps = await store.steps(run.runId, from);
      // The run was read before its steps: a step stored with the run's pause or end may have come
      // in between, so its calls are shown running only if the run still runs after they were read.
      const toStart = steps.map((step) => callsToStart(step, seen));
      const running =
        run.status === "running" &&
        (toStart.every((calls) => calls.length === 0) || (await store.run(run.runId))?.status === "running");
      // Text heard early goes just before its own step: after the calls of the step before it have ended.
      const showsEarly = running || answeredBy(run.status);
      steps.forEach((step, index) => {
        if (showsEarly && earlyText.get(run.runId)?.step === step.step) showEarlyText(sessionId, run.runId, seen);
        publishStep(publish, run.runId, step, seen, running ? (toStart[index] ?? []) : []);
      });
    }
    // Text that came before the run was read as running follows the steps stored before it.
    if (run.status === "running") showEarlyText(sessionId, run.runId, seen);
    else if (!UNFINISHED.has(run.status)) earlyText.delete(run.runId);
    if (run.status === "awaiting_approval" || was === "awaiting_approval") {
      for (const approval of await store.approvalsOfRun(run.runId)) {
        const known = seen.approvals.get(approval.id);
        if (known === approval.status) continue;
        seen.approvals.set(approval.id, approval.status);
        if (known === undefined)
          publish({ type: "approval_requested", runId: run.runId, approval: approvalView(approval) });
        if (approval.status !== "pending")
          publish({ type: "approval_decided", runId: run.runId, approval: approvalView(approval) });
      }
    }
    seen.status = run.status;
    if (run.status === was || run.status === "running" || run.status === "accepted") return;
    // A pipeline's stage that answered hands on to the next one: the pipeline's end comes under its last stage.
    const handsOn =
      run.pipelineStage !== null && run.pipelineStage < (run.pipelineStages ?? 0) && answeredBy(run.status);
    if (handsOn) return;
    publish(runEndOf(run, sessionId, endErrors.get(run.runId)));
    if (run.status !== "awaiting_approval" && run.pipelineRunId && run.pipelineRunId !== run.runId)
      inner.end(run.pipelineRunId);
  }

  const timer = setInterval(() => {
    if (reading) return; // a slow store: skip a beat rather than pile up readings
    reading = true;
    void (async () => {
      for (const [sessionId, entry] of [...followed]) if (entry.runs) await readSession(sessionId, entry);
    })().finally(() => (reading = false));
  }, options.everyMs ?? 1_000);
  timer.unref();

  const hub: EventHub = {
    ...inner,
    watchSession(sessionId, afterId, watcher) {
      const unfollow = follow(sessionId);
      const watching = inner.watchSession(sessionId, afterId, watcher);
      return {
        replay: watching.replay,
        stop() {
          watching.stop();
          unfollow();
        },
      };
    },
    watchRun(runId, watcher, sessionId) {
      const watching = inner.watchRun(runId, watcher, sessionId);
      // Only an unfinished run is given with its session; an ended one is answered from the store.
      if (!watching || watching.ended || sessionId === undefined) return watching;
      let unfollow: () => void;
      try {
        unfollow = follow(sessionId);
      } catch (error) {
        watching.stop();
        throw error;
      }
      return {
        ...watching,
        stop() {
          watching.stop();
          unfollow();
        },
      };
    },
  };

  return {
    hub,
    storedRun: (run, steps) => storedRunEvents(run, steps, endErrors.get(run.runId)),
    changed(sessionId) {
      const entry = followed.get(sessionId);
      if (entry) readSoon(sessionId, entry);
    },
    stop() {
      clearInterval(timer);
      void watchingText.then((unwatch) => unwatch());
      inner.closeAll();
      followed.clear();
      remembered.clear();
      earlyText.clear();
    },
  };
}

/**
 * A stored step as the web surface would have shown it live, each part once: the model call, the
 * calls to show running (`toStart`: a running run's calls neither ended nor shown; none when the
 * run is not running, as a call waiting for an approval is not), each ended call, the notes.
 */
function publishStep(
  publish: (event: WebEvent) => void,
  runId: string,
  step: StepTrace,
  seen: SeenRun,
  toStart: StepTrace["requestedCalls"],
): void {
  let sent = seen.steps.get(step.step);
  if (!sent) {
    sent = { started: new Set(), ended: new Set(), notes: 0 };
    seen.steps.set(step.step, sent);
    publish(modelEndView(runId, step.step, step, step.latencyMs, step.reasoning ?? undefined, step.reasoningCutChars));
  }
  for (const call of toStart) {
    sent.started.add(call.id);
    publish({
      type: "tool_start",
      runId,
      step: step.step,
      toolCallId: call.id,
      name: call.name,
      arguments: argumentsOf(call.arguments),
    });
  }
  for (const record of step.toolCalls) {
    if (sent.ended.has(record.id)) continue;
    sent.ended.add(record.id);
    publish(toolEndView(runId, step.step, record));
  }
  for (const text of step.notes.slice(sent.notes)) publish({ type: "note", runId, step: step.step, text });
  sent.notes = step.notes.length;
}

/**
 * A run that ended before this process followed it, as a stream opened late shows it: its start,
 * each stored step (its model call, its ended calls, its notes), its end.
 */
export function storedRunEvents(run: RunTrace, steps: StepTrace[], error?: RunError): WebEvent[] {
  // A run refused before it began (a daily cap) has no steps and never started.
  const events: WebEvent[] = steps.length > 0 ? [runStartOf(run, run.sessionId)] : [];
  const seen: SeenRun = { status: run.status, started: true, approvals: new Map(), steps: new Map() };
  for (const step of steps) publishStep((event) => events.push(event), run.runId, step, seen, []);
  events.push(runEndOf(run, run.sessionId, error));
  return events;
}

/** The calls a step asked for that have neither ended nor been shown running. */
function callsToStart(step: StepTrace, seen: SeenRun): StepTrace["requestedCalls"] {
  const sent = seen.steps.get(step.step);
  const ended = new Set(step.toolCalls.map((record) => record.id));
  return step.requestedCalls.filter((call) => !ended.has(call.id) && sent?.started.has(call.id) !== true);
}

/** A call's arguments as the page shows them: the object the model sent, or none when its text is not one. */
function argumentsOf(text: string): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(text);
    return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)
      ? (parsed as Record<string, unknown>)
      : {};
  } catch {
    return {};
  }
}

function runStartOf(run: RunTrace, sessionId: string): WebEvent {
  return { type: "run_start", runId: run.runId, sessionId, userId: run.userId, input: run.input, ...pipelineOf(run) };
}

function runEndOf(run: RunTrace, sessionId: string, error?: RunError): WebEvent {
  return {
    ...(error && run.status === "error" ? { error } : {}),
    type: "run_end",
    runId: run.runId,
    sessionId,
    output: run.output ?? "",
    stopReason: run.status as StopReason, // also "interrupted" and "superseded", which the page words
    steps: run.steps,
    usage: {
      promptTokens: run.promptTokens,
      completionTokens: run.completionTokens,
      totalTokens: run.promptTokens + run.completionTokens,
    },
  };
}

function endedWithin(run: RunTrace, milliseconds: number): boolean {
  return run.endedAt !== null && Date.now() - Date.parse(run.endedAt) < milliseconds;
}

function pipelineOf(run: RunTrace): { pipeline?: { name: string; runId: string; stage: number; stages: number } } {
  if (run.pipelineRunId === null || run.pipelineStage === null) return {};
  return {
    pipeline: {
      name: run.pipelineName ?? "",
      runId: run.pipelineRunId,
      stage: run.pipelineStage,
      stages: run.pipelineStages ?? run.pipelineStage,
    },
  };
}
