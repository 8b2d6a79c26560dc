/** What the loop hands the tool executor: its options from the agent's configuration, and the run's scope. */
import type { ExecutorOptions, RunScope } from "../tools/executor.js";
import type { Live } from "./live.js";
import { hasReadContent, type AgentConfig, type RunState } from "./run.js";

export function executorOptions(config: AgentConfig): ExecutorOptions {
  return {
    registry: config.tools,
    approve: config.approve,
    defaultTimeoutMs: config.toolTimeoutMs,
    maxResultChars: config.maxResultChars,
    concurrency: config.toolConcurrency,
  };
}

export function scopeOf(run: RunState, live: Live): RunScope {
  return {
    runId: run.runId,
    sessionId: run.sessionId,
    userId: run.userId,
    readContent: hasReadContent(run),
    signal: live.signal,
    state: run.toolState,
    emit: (event) => live.emit({ ...event, step: run.steps }),
  };
}
