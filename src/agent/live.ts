/**
 * A run's live side: every event goes to memory and the trace as it happens and then to the
 * listener, and their writes are committed in units, one `record` on the store port each. Events
 * emitted within a unit are announced once it has committed, so a listener never hears of a record
 * that a failed unit took back. The run may go on ahead of a unit's commit (`ahead`): what it emits
 * meanwhile is announced after that unit's events, and its next unit commits after it or with it. A run that pauses opens the approvals it waits for in that same unit
 * (with approvalTtlSeconds), so a crash right after the pause still leaves them to be clicked.
 */
import { approvalsAwaited } from "../tools/executor.js";
import type { AgentEvent } from "./events.js";
import type { Memory } from "./memory.js";
import { createRunUnit, type PendingUnit, type RunWriter } from "./run-unit.js";
import type { AgentConfig, RunState, Task } from "./run.js";
import type { Message } from "./types.js";

export interface Live {
  signal?: AbortSignal;
  memory?: Memory;
  emit: (event: AgentEvent) => void;
  /** One unit of records: all that memory and the trace write during `body` is committed together before it resolves; its events are announced after. */
  atomically: <T>(body: () => T) => Promise<T>;
  /**
   * The same unit, but the run goes on without waiting for its commit (which the store makes by the
   * end of this event-loop turn, with the run's next unit if that is made by then). A unit made
   * after it fails if it failed; `landed` waits for it.
   */
  ahead: <T>(body: () => T) => T;
  /** Waits for the unit the run went ahead of, if any; throws if it failed. */
  landed: () => Promise<void>;
  /** Commits messages of the run through memory, with the unit being built (no memory: nothing to do). */
  commit: (run: RunState, messages: Message[]) => void;
}

export function liveOf(task: Pick<Task, "signal" | "onEvent">, config: AgentConfig): Live {
  const { memory, trace } = config;
  const store: RunWriter | undefined = memory?.store ?? trace?.store;
  if (memory && trace && memory.store !== trace.store) throw new Error("memory and the trace must write to the same store");
  const ttlSeconds = config.approvalTtlSeconds;
  const listener = task.onEvent;
  const announce = (event: AgentEvent) => {
    try {
      listener?.(event); // a listener that throws must not break the run it watches
    } catch (error) {
      console.warn(`glassbox: an event listener failed on ${event.type}: ${(error as Error).message}`);
    }
  };
  let current: { unit: PendingUnit; events: AgentEvent[] } | undefined;
  // Writes of an event outside a unit (none the loop makes today) go with the next unit.
  let loose: PendingUnit | undefined;
  const unitNow = () => current?.unit ?? (loose ??= createRunUnit());
  const emit = (event: AgentEvent) => {
    if (store) {
      const unit = unitNow();
      memory?.record(event, unit);
      trace?.record(event, unit);
      const paused = event.type === "run_end" ? event.result.paused : undefined;
      if (paused && ttlSeconds !== undefined) unit.add({ kind: "open_approvals", requests: approvalsAwaited(paused.pending), ttlSeconds });
    }
    if (current) current.events.push(event);
    else if (pending) pending.after.push(event);
    else announce(event);
  };
  const build = <T>(body: () => T) => {
    const unit = { unit: loose ?? createRunUnit(), events: [] as AgentEvent[] };
    loose = undefined;
    current = unit;
    try {
      return { unit, result: body() };
    } finally {
      current = undefined;
    }
  };
  // The unit the run went ahead of: what was emitted since is announced after its own events.
  let pending: { landed: Promise<void>; after: AgentEvent[] } | undefined;
  // Its failure, thrown once: to the next unit (what the run did since rests on a unit taken back) or to `landed`.
  let failure: { error: unknown } | undefined;
  const throwFailure = () => {
    const failed = failure;
    failure = undefined;
    if (failed) throw failed.error;
  };
  const landed = async () => {
    if (pending) await pending.landed;
    throwFailure();
  };
  const atomically = async <T>(body: () => T): Promise<T> => {
    if (!store) return body();
    throwFailure();
    const { unit, result } = build(body);
    try {
      // A store that cannot write must stop the run, so this may throw.
      await unit.unit.commit(store);
    } catch (error) {
      if (pending) await pending.landed;
      failure = undefined; // this unit's error is the one to tell
      throw error;
    }
    await landed(); // committed before this one or with it; its events go first
    for (const event of unit.events) announce(event);
    return result;
  };
  const ahead = <T>(body: () => T): T => {
    if (!store) return body();
    throwFailure();
    if (pending) throw new Error("a run goes ahead of one unit at a time");
    const { unit, result } = build(body);
    const after: AgentEvent[] = [];
    const settle = (error?: { error: unknown }) => {
      pending = undefined;
      failure ??= error;
      if (!error) for (const event of [...unit.events, ...after]) announce(event);
    };
    pending = { after, landed: unit.unit.commit(store).then(() => settle(), (error: unknown) => settle({ error })) };
    return result;
  };
  return {
    signal: task.signal,
    memory,
    emit,
    atomically,
    ahead,
    landed,
    commit: (run, messages) => memory?.commit(run, messages, unitNow()),
  };
}
