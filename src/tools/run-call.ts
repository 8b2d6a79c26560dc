/**
 * Running one planned tool call: its context (own signal on first use, reported usage), the
 * handler raced against its time limit and the run's cancel, and the record the model and the
 * trace read, announced by tool_start and tool_end. The executor (executor.ts) decides what runs.
 */
import { approvalOf } from "./approval-rule.js";
import {
  callHandler,
  envelopeFor,
  errorEnvelope,
  renderForModel,
  stackOf,
  settleOrCancel,
  withTimeout,
  type Outcome,
} from "./call-outcome.js";
import type { ExecutorOptions, RunScope } from "./executor.js";
import type { RegisteredTool } from "./registry.js";
import {
  ToolPause,
  type ApprovalDecision,
  type ToolCall,
  type ToolCallRecord,
  type ToolContext,
  type ToolErrorType,
  type TokenUsage,
} from "./types.js";

/** What running a call needs of the plan: the call, its tool, its validated arguments and their repairs, its identity within the run. */
export interface CallToRun {
  call: ToolCall;
  tool: RegisteredTool;
  arguments: Record<string, unknown>;
  repairs: string[];
  /** The tool and its canonical arguments: a dangerous call that timed out is remembered by it. */
  key: string;
  /** This call waits for a person (its tool's `dangerous`, for these arguments). */
  dangerous: boolean;
}

const DEFAULT_TIMEOUT_MS = 10_000;
const DEFAULT_MAX_RESULT_CHARS = 4_000;

/** The timeout races the handler: the run moves on even if a handler ignores its signal. */
export async function runCall<U extends CallToRun>(
  unit: U,
  invoke: (unit: U, context: ToolContext) => unknown,
  options: ExecutorOptions,
  scope: RunScope,
  approval?: ApprovalDecision,
): Promise<ToolCallRecord | ToolPause> {
  const { tool, call } = unit;
  const name = tool.definition.name;
  const timeoutMs = tool.definition.timeoutMs ?? options.defaultTimeoutMs ?? DEFAULT_TIMEOUT_MS;
  // The call's own signal is made on first use: most handlers never look at it.
  let controller: AbortController | undefined;
  let signal: AbortSignal | undefined;
  let ended = false;
  let usage: TokenUsage | undefined;
  const context: ToolContext = {
    sessionId: scope.sessionId,
    userId: scope.userId,
    runId: scope.runId,
    toolCallId: call.id,
    readContent: scope.readContent === true,
    approve: options.approve,
    reportUsage(spent: TokenUsage) {
      usage = {
        promptTokens: (usage?.promptTokens ?? 0) + spent.promptTokens,
        completionTokens: (usage?.completionTokens ?? 0) + spent.completionTokens,
        totalTokens: (usage?.totalTokens ?? 0) + spent.totalTokens,
      };
    },
    get signal(): AbortSignal {
      if (!signal) {
        controller = new AbortController();
        if (ended) controller.abort();
        signal = scope.signal ? AbortSignal.any([scope.signal, controller.signal]) : controller.signal;
      }
      return signal;
    },
  };
  scope.emit?.({ type: "tool_start", runId: scope.runId, toolCallId: call.id, name, arguments: unit.arguments });

  const started = performance.now();
  const handled = callHandler(() => invoke(unit, context));
  const outcome = await settleOrCancel(
    withTimeout(handled, timeoutMs),
    scope.signal,
    (): Outcome => ({ kind: "cancelled" }),
  );
  if (outcome.kind === "timeout" || outcome.kind === "cancelled") {
    ended = true;
    controller?.abort();
  }
  if (outcome.kind === "returned" && outcome.data instanceof ToolPause) return outcome.data;
  const durationMs = performance.now() - started;

  const { dangerous } = unit;
  const envelope = envelopeFor(outcome, name, timeoutMs, dangerous);
  const stack = outcome.kind === "threw" ? stackOf(outcome.error) : undefined; // the trace's, not the model's
  if (outcome.kind === "timeout") {
    scope.state.timeouts[name] = (scope.state.timeouts[name] ?? 0) + 1;
    if (dangerous) scope.state.unknownOutcome.push(unit.key);
  }
  const record: ToolCallRecord = {
    id: call.id,
    name,
    rawArguments: call.function.arguments,
    arguments: unit.arguments,
    repairs: unit.repairs,
    ...renderForModel(envelope, options.maxResultChars ?? DEFAULT_MAX_RESULT_CHARS),
    durationMs,
    dangerous,
    ...(approval ? { approval } : {}),
    ...(usage ? { usage } : {}),
    ...(stack ? { errorStack: stack } : {}),
  };
  scope.emit?.({ type: "tool_end", runId: scope.runId, record });
  return record;
}

/** The record of a call that never ran (or was refused), with the envelope the model reads. */
export function errorRecord(
  call: ToolCall,
  type: ToolErrorType,
  message: string,
  options: ExecutorOptions,
): ToolCallRecord {
  const envelope = errorEnvelope(type, message);
  const tool = options.registry.get(call.function.name)?.definition;
  const dangerous = tool !== undefined && approvalOf(tool) === "always";
  return {
    id: call.id,
    name: call.function.name,
    rawArguments: call.function.arguments,
    repairs: [],
    ...renderForModel(envelope, options.maxResultChars ?? DEFAULT_MAX_RESULT_CHARS),
    durationMs: 0,
    dangerous,
  };
}
