/**
 * A run's live side: every event goes to memory and the trace as it happens and then to the
 * listener, and their writes are committed in units, one `record` on the store port each. Events
 * emitted within a unit are announced once it has committed, so a listener never hears of a record
 * that a failed unit took back. A run that pauses opens the approvals it waits for in that same unit
 * (with approvalTtlSeconds), so a crash right after the pause still leaves them to be clicked.
 *
 * A unit may be held: its events are announced at once, and its writes wait to commit with the next
 * unit, or on their own once HOLD_MS have passed. The loop holds a step's reply while its tools run,
 * so a step with quick, safe tools is one commit (each commit writes whole pages of several tables).
 * A unit that ends the run is never held. Should a held unit fail to commit, the run ends in an
 * internal error having announced a reply the store does not have.
 */
import { approvalsAwaited } from "../tools/executor.js";
import type { AgentEvent } from "./events.js";
import type { Memory } from "./memory.js";
import { createRunUnit, type PendingUnit, type RunWriter } from "./run-unit.js";
import type { AgentConfig, RunState, Task } from "./run.js";
import type { Message } from "./types.js";

/** The longest a held unit waits for the next one: a slow tool's step still reaches the trace (and survives a crash) soon. */
export const HOLD_MS = 200;

export interface Live {
  signal?: AbortSignal;
  memory?: Memory;
  emit: (event: AgentEvent) => void;
  /**
   * One unit of records: all that memory and the trace write during `body` is committed together
   * before it resolves; its events are announced after. Held, it commits with the next unit (or
   * within HOLD_MS) and its events are announced at once.
   */
  atomically: <T>(body: () => T, options?: { hold?: boolean }) => Promise<T>;
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
  // Writes held, or of an event outside a unit, go with the next unit.
  let loose: PendingUnit | undefined;
  let holding: NodeJS.Timeout | undefined;
  // A held unit committed on its own, which the next unit waits for (and fails with, as it would have).
  let committing: Promise<void> | undefined;
  const unitNow = () => current?.unit ?? (loose ??= createRunUnit());
  const takeLoose = () => {
    clearTimeout(holding);
    holding = undefined;
    const unit = loose;
    loose = undefined;
    return unit;
  };
  const emit = (event: AgentEvent) => {
    if (store) {
      const unit = unitNow();
      memory?.record(event, unit);
      trace?.record(event, unit);
      const paused = event.type === "run_end" ? event.result.paused : undefined;
      if (paused && ttlSeconds !== undefined) unit.add({ kind: "open_approvals", requests: approvalsAwaited(paused.pending), ttlSeconds });
    }
    if (current) current.events.push(event);
    else announce(event);
  };
  const holdUntilNext = (unit: PendingUnit, writer: RunWriter) => {
    loose = unit;
    holding = setTimeout(() => {
      committing = takeLoose()?.commit(writer);
      committing?.catch(() => {}); // the next unit rethrows it
    }, HOLD_MS);
    holding.unref();
  };
  const atomically = async <T>(body: () => T, options: { hold?: boolean } = {}): Promise<T> => {
    if (!store) return body();
    const held = committing;
    committing = undefined;
    if (held) await held;
    const unit = { unit: takeLoose() ?? createRunUnit(), events: [] as AgentEvent[] };
    current = unit;
    let result: T;
    try {
      result = body();
    } finally {
      current = undefined;
    }
    if (options.hold && !unit.events.some((event) => event.type === "run_end")) {
      holdUntilNext(unit.unit, store);
      for (const event of unit.events) announce(event);
      return result;
    }
    // A store that cannot write must stop the run, so this may throw.
    await unit.unit.commit(store);
    for (const event of unit.events) announce(event);
    return result;
  };
  return {
    signal: task.signal,
    memory,
    emit,
    atomically,
    commit: (run, messages) => memory?.commit(run, messages, unitNow()),
  };
}
