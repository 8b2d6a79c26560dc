/**
 * The tool engine: runs the calls of one model response and turns every outcome — success, bad
 * arguments, unknown tool, throw, hang, repeat, denial — into one envelope the model can act on.
 *
 * Per response: plan every call (parse, repair, validate, guard) in order; run the runnable ones in
 * parallel (bounded), a call waiting for the calls of the tools it `dependsOn`; dangerous calls ask
 * the approval gate first. Identical calls run once. Records come back in the order of the calls.
 * Running one call (its time limit, cancel and record) is run-call.ts.
 */
import { createHash } from "node:crypto";
import { callNeedsApproval } from "./approval-rule.js";
import { canonicalJson, parseToolArguments } from "./args.js";
import { CANCELLED, createSemaphore, errorText, settleOrCancel } from "./call-outcome.js";
import { errorRecord, runCall, type CallToRun } from "./run-call.js";
import type { ToolRegistry } from "./registry.js";
import {
  ToolPause,
  type ApprovalDecision,
  type ApprovalGate,
  type ApprovalRequest,
  type ToolCall,
  type ToolCallRecord,
  type ToolContext,
  type ToolErrorType,
  type ToolEvent,
} from "./types.js";

export interface ExecutorOptions {
  registry: ToolRegistry;
  /** Decides dangerous calls; without one, every dangerous call is denied. */
  approve?: ApprovalGate;
  /** Per-call time limit unless a tool sets its own (default 10 s). */
  defaultTimeoutMs?: number;
  /** Longest tool result text the model reads (default 4,000 characters). */
  maxResultChars?: number;
  /** How many calls of one response run at once (default 4). */
  concurrency?: number;
}

/** What the engine remembers across the steps of one run. Plain data, stored with a paused run. */
export interface ToolRunState {
  /** Times each exact call (tool + canonical arguments) was made. */
  callCounts: Record<string, number>;
  /** Times each tool timed out. */
  timeouts: Record<string, number>;
  /** Dangerous calls that timed out: their effect is unknown, so they are never repeated. */
  unknownOutcome: string[];
}

export const newToolRunState = (): ToolRunState => ({ callCounts: {}, timeouts: {}, unknownOutcome: [] });

export interface RunScope {
  runId: string;
  sessionId: string;
  userId: string;
  /** Whether the run had read files or tool results before these calls (see ToolContext.readContent). */
  readContent?: boolean;
  signal?: AbortSignal;
  state: ToolRunState;
  emit?: (event: ToolEvent) => void;
}

/** A call that waits for a human, or for a call that does. Plain data, stored with a paused run. */
export interface PendingToolCall {
  call: ToolCall;
  arguments: Record<string, unknown>;
  repairs: string[];
  /** Present once a person has been asked; absent while the call waits on a dependency. */
  approval?: ApprovalRequest;
  /** A call that paused on approvals of its own (a sub-agent's): what they are, and its state to resume. */
  nested?: { requests: ApprovalRequest[]; state: unknown };
  /** Identical calls of the same response that share this call's result. */
  duplicateIds: string[];
}

export interface ToolStepOutcome {
  /** Finished calls, in the order the model sent them. */
  records: ToolCallRecord[];
  pending: PendingToolCall[];
}

const DEFAULT_CONCURRENCY = 4;
/** Calls of one model reply that run; the rest are refused (a reply of 300 calls is a loop, not a plan). */
export const MAX_CALLS_PER_REPLY = 16;
/** Dangerous calls of one model reply that ask a person; the rest are refused (no wall of approval cards). */
export const MAX_DANGEROUS_PER_REPLY = 3;
const MAX_TIMEOUTS_PER_TOOL = 2;
const MAX_IDENTICAL_CALLS = 2;

export async function executeToolCalls(
  calls: ToolCall[],
  options: ExecutorOptions,
  scope: RunScope,
): Promise<ToolStepOutcome> {
  const units: Unit[] = [];
  const finished = new Map<string, ToolCallRecord>();
  const byKey = new Map<string, Unit | ToolCallRecord>();
  let dangerous = 0;
  for (const call of calls) {
    const plan = planCall(call, options, scope, byKey);
    if ("duplicateOf" in plan) addDuplicate(plan.duplicateOf, call, finished);
    else if ("record" in plan) finished.set(call.id, plan.record);
    else {
      const refusal = overLimit(plan.unit, units.length, plan.unit.dangerous ? ++dangerous : 0, options);
      if (refusal) byKey.set(plan.unit.key, refusal);
      if (refusal) finished.set(call.id, refusal);
      else units.push(plan.unit);
    }
  }
  const decide = (unit: Unit) => askGate(unit, options, scope);
  return endEveryCall(scope, (tracked) =>
    schedule(units, decide, callHandlerOf, options, tracked).then((results) => collect(calls, finished, results)),
  );
}

/** Continue a paused step: approved calls run, denied ones get `denied`, waiting ones stay pending. */
export async function resumeToolCalls(
  pending: PendingToolCall[],
  decisions: Record<string, ApprovalDecision>,
  options: ExecutorOptions,
  scope: RunScope,
): Promise<ToolStepOutcome> {
  const units: Unit[] = [];
  const finished = new Map<string, ToolCallRecord>();
  for (const waiting of pending) {
    const tool = options.registry.get(waiting.call.function.name);
    const unit: Unit | undefined = tool && {
      ...waiting,
      tool,
      key: callKey(waiting.call.function.name, waiting.arguments),
      // Asked already, it stays asked, whatever the tool's rule says now.
      dangerous: waiting.approval !== undefined || callNeedsApproval(tool.definition, waiting.arguments),
    };
    if (unit) units.push(unit);
    else
      finished.set(
        waiting.call.id,
        errorRecord(
          waiting.call,
          "tool_not_found",
          `Tool '${waiting.call.function.name}' is no longer available.`,
          options,
        ),
      );
  }
  const decide = async (unit: Unit): Promise<ApprovalDecision | "pending"> => {
    const decision = decisions[unit.call.id];
    if (decision && decision.argumentsHash === argumentsHash(unit.arguments)) return decision;
    return unit.approval ? "pending" : askGate(unit, options, scope);
  };
  // A call that paused on approvals of its own continues from its state, with the same decisions.
  const invoke: Invoke = (unit, context) => {
    const { resume } = unit.tool.definition;
    if (!unit.nested) return callHandlerOf(unit, context);
    if (!resume) throw new Error(`'${unit.tool.definition.name}' paused but cannot be resumed.`);
    return resume(unit.nested.state, decisions, context);
  };
  const calls = pending.flatMap((waiting) => [
    waiting.call,
    ...waiting.duplicateIds.map((id) => ({ ...waiting.call, id })),
  ]);
  return endEveryCall(scope, (tracked) =>
    schedule(units, decide, invoke, options, tracked).then((results) => collect(calls, finished, results)),
  );
}

/**
 * Every finished call gets its tool_end, which the trace records it by: a call that ran has it
 * already; one refused before it ran (unknown tool, invalid arguments, a repeat, denied by a person,
 * cancelled while it waited) or sharing an identical call's result gets it here, in the model's order.
 */
async function endEveryCall(
  scope: RunScope,
  step: (scope: RunScope) => Promise<ToolStepOutcome>,
): Promise<ToolStepOutcome> {
  const ended = new Set<string>();
  const tracked: RunScope = {
    ...scope,
    emit: (event) => {
      if (event.type === "tool_end") ended.add(event.record.id);
      scope.emit?.(event);
    },
  };
  const outcome = await step(tracked);
  for (const record of outcome.records)
    if (!ended.has(record.id)) scope.emit?.({ type: "tool_end", runId: scope.runId, record });
  return outcome;
}

type Invoke = (unit: Unit, context: ToolContext) => unknown;
// The handler gets its own copy: what it does to its arguments must not change the recorded ones.
const callHandlerOf: Invoke = (unit, context) => unit.tool.definition.handler(structuredClone(unit.arguments), context);

/** What a paused step waits for: the approvals of its own calls and of the calls inside paused tools. */
export function approvalsAwaited(pending: PendingToolCall[]): ApprovalRequest[] {
  return pending.flatMap((call) => call.nested?.requests ?? (call.approval ? [call.approval] : []));
}

export function argumentsHash(args: Record<string, unknown>): string {
  return createHash("sha256").update(canonicalJson(args)).digest("hex");
}

// ---- planning: everything that can be decided before a call runs ----------------------------

/** A call that passed planning and will run (or wait for a decision). */
interface Unit extends PendingToolCall, CallToRun {}

type Plan = { unit: Unit } | { record: ToolCallRecord } | { duplicateOf: Unit | ToolCallRecord };

function planCall(
  call: ToolCall,
  options: ExecutorOptions,
  scope: RunScope,
  byKey: Map<string, Unit | ToolCallRecord>,
): Plan {
  const { name, arguments: raw } = call.function;
  const parsed = parseToolArguments(raw);
  const tool = options.registry.get(name);
  const validated = tool && parsed.ok ? tool.validate(parsed.value) : undefined;
  const key = validated?.ok ? callKey(name, validated.value) : `${name}\u0000${raw}`;
  const earlier = byKey.get(key);
  if (earlier) return { duplicateOf: earlier };

  const plan = ((): Plan => {
    const fail = (type: ToolErrorType, message: string, extra: Partial<ToolCallRecord> = {}) => ({
      record: { ...errorRecord(call, type, message, options), ...extra },
    });
    if (!tool) return fail("tool_not_found", unknownToolMessage(name, options.registry));
    if (!parsed.ok)
      return fail("invalid_arguments", `${parsed.message}. Send the arguments as one JSON object.`, {
        repairs: parsed.repairs,
      });
    if (!validated?.ok)
      return fail("invalid_arguments", validated?.message ?? "invalid arguments", { repairs: parsed.repairs });
    const args = validated.value;
    const repairs = [...parsed.repairs, ...validated.repairs];
    const known = { arguments: args, repairs };
    if ((scope.state.timeouts[name] ?? 0) >= MAX_TIMEOUTS_PER_TOOL) {
      return fail(
        "timeout",
        `'${name}' timed out ${MAX_TIMEOUTS_PER_TOOL} times in this run and will not be run again in this run; find another way or answer with what you have.`,
        known,
      );
    }
    if (scope.state.unknownOutcome.includes(key)) {
      return fail(
        "timeout",
        `This exact '${name}' call timed out earlier and its outcome is unknown, so it is not retried automatically; tell the user it may or may not have happened.`,
        known,
      );
    }
    const count = (scope.state.callCounts[key] ?? 0) + 1;
    scope.state.callCounts[key] = count;
    if (count > MAX_IDENTICAL_CALLS) {
      return fail(
        "repeated_call",
        `'${name}' was already called ${MAX_IDENTICAL_CALLS} times with these exact arguments in this run; the result will not change. Use the earlier result, change the arguments, or answer.`,
        known,
      );
    }
    const dangerous = callNeedsApproval(tool.definition, args);
    return { unit: { call, tool, arguments: args, repairs, key, dangerous, duplicateIds: [] } };
  })();
  byKey.set(key, "unit" in plan ? plan.unit : (plan as { record: ToolCallRecord }).record);
  return plan;
}

/** The refusal of a call past the reply's limits, with what the model can do about it; undefined within them. */
function overLimit(unit: Unit, running: number, dangerousNumber: number, options: ExecutorOptions) {
  const refuse = (type: ToolErrorType, message: string) => ({
    ...errorRecord(unit.call, type, message, options),
    arguments: unit.arguments,
    repairs: unit.repairs,
    dangerous: unit.dangerous,
  });
  if (running >= MAX_CALLS_PER_REPLY)
    return refuse(
      "execution_error",
      `Not run: one reply may make at most ${MAX_CALLS_PER_REPLY} tool calls. Use the results of those that ran, then call this again if it is still needed.`,
    );
  if (dangerousNumber > MAX_DANGEROUS_PER_REPLY)
    return refuse(
      "denied",
      `Not run: one reply may ask people to approve at most ${MAX_DANGEROUS_PER_REPLY} calls. Ask for this one later, once those are decided, if it is still needed.`,
    );
  return undefined;
}

function addDuplicate(original: Unit | ToolCallRecord, call: ToolCall, finished: Map<string, ToolCallRecord>): void {
  if ("tool" in original) original.duplicateIds.push(call.id);
  else finished.set(call.id, { ...original, id: call.id, rawArguments: call.function.arguments });
}

function callKey(name: string, args: Record<string, unknown>): string {
  return `${name}\u0000${canonicalJson(args)}`;
}

function unknownToolMessage(name: string, registry: ToolRegistry): string {
  const [closest] = registry.closestNames(name);
  const hint = closest ? ` Did you mean '${closest}'?` : "";
  return `There is no tool named '${name}'.${hint} Available tools: ${registry.names().join(", ") || "none"}.`;
}

// ---- scheduling: dependencies, bounded parallelism, approvals ------------------------------

type UnitResult = { record: ToolCallRecord } | { pending: PendingToolCall };

async function schedule(
  units: Unit[],
  decide: (unit: Unit) => Promise<ApprovalDecision | "pending">,
  invoke: Invoke,
  options: ExecutorOptions,
  scope: RunScope,
): Promise<Map<Unit, UnitResult>> {
  const slots = createSemaphore(options.concurrency ?? DEFAULT_CONCURRENCY);
  let approvals: Promise<unknown> = Promise.resolve();
  // One question at a time, so terminal prompts and chat buttons never interleave.
  const decideInTurn = (unit: Unit) => {
    const decision = approvals.then(() => decide(unit));
    approvals = decision.catch(() => undefined);
    return decision;
  };
  const results = new Map<Unit, Promise<UnitResult>>();
  const runUnit = async (unit: Unit): Promise<UnitResult> => {
    const { dependsOn } = unit.tool.definition;
    if (dependsOn?.length) {
      await null; // let every unit register its promise before any looks up its dependencies
      const dependencies = units.filter((other) => other !== unit && dependsOn.includes(other.tool.definition.name));
      const settled = await Promise.all(dependencies.map((other) => results.get(other)));
      if (settled.some((result) => result && "pending" in result)) return { pending: toPending(unit) };
    }

    let approval: ApprovalDecision | undefined;
    // A paused call's own decision was made before it first ran; what it waits for now is decided inside it.
    if (unit.dangerous && !unit.nested) {
      const refuse = (by: string, reason: string): ApprovalDecision => ({
        approved: false,
        by,
        reason,
        argumentsHash: argumentsHash(unit.arguments),
      });
      // A question nobody answers must not outlive a cancelled run.
      const decision = await settleOrCancel(decideInTurn(unit), scope.signal, () =>
        refuse("cancelled", "the run was cancelled"),
      ).catch((error: unknown) => refuse("error", `the approval could not be asked: ${errorText(error)}`));
      if (decision === "pending") return { pending: { ...toPending(unit), approval: approvalRequest(unit, scope) } };
      approval = decision;
      if (!decision.approved) {
        const why = decision.reason ? ` (${decision.reason})` : "";
        return {
          record: {
            ...errorRecord(
              unit.call,
              "denied",
              `A person did not approve this call${why}; it was not run. Do not retry it; tell the user.`,
              options,
            ),
            arguments: unit.arguments,
            repairs: unit.repairs,
            dangerous: true,
            approval,
          },
        };
      }
    }
    const release = slots.tryAcquire() ?? (await slots.acquire());
    try {
      // A call still waiting (for a slot, a dependency or a person) when the run was cancelled never starts.
      if (scope.signal?.aborted) {
        return {
          record: {
            ...errorRecord(unit.call, "execution_error", CANCELLED, options),
            arguments: unit.arguments,
            repairs: unit.repairs,
            ...(approval ? { approval } : {}),
          },
        };
      }
      const ran = await runCall(unit, invoke, options, scope, approval);
      if (ran instanceof ToolPause)
        return { pending: { ...toPending(unit), nested: { requests: ran.requests, state: ran.state } } };
      return { record: ran };
    } finally {
      release();
    }
  };
  for (const unit of units) results.set(unit, runUnit(unit));
  const entries = await Promise.all([...results].map(async ([unit, result]) => [unit, await result] as const));
  return new Map(entries);
}

function toPending({ call, arguments: args, repairs, duplicateIds, approval, nested }: Unit): PendingToolCall {
  return {
    call,
    arguments: args,
    repairs,
    duplicateIds,
    ...(approval ? { approval } : {}),
    ...(nested ? { nested } : {}),
  };
}

async function askGate(unit: Unit, options: ExecutorOptions, scope: RunScope): Promise<ApprovalDecision | "pending"> {
  const request = approvalRequest(unit, scope);
  if (!options.approve)
    return { approved: false, by: "policy", reason: "no approver is configured", argumentsHash: request.argumentsHash };
  scope.emit?.({ type: "approval_requested", runId: scope.runId, request });
  return options.approve(request);
}

function approvalRequest(unit: Unit, scope: RunScope): ApprovalRequest {
  const { approvers, requesterMayApprove, approvalsNeeded, requesterConfirms } = unit.tool.definition;
  return {
    ...(approvers ? { approvers: [...approvers] } : {}),
    // A confirmation is the requester's by nature: no self-approval setting takes it from them.
    ...(requesterConfirms === true
      ? { requesterConfirms: true }
      : requesterMayApprove !== undefined
        ? { requesterMayApprove }
        : {}),
    ...(approvalsNeeded !== undefined && approvalsNeeded > 1 ? { approvalsNeeded } : {}),
    runId: scope.runId,
    sessionId: scope.sessionId,
    userId: scope.userId,
    toolCallId: unit.call.id,
    toolName: unit.tool.definition.name,
    arguments: unit.arguments,
    argumentsHash: argumentsHash(unit.arguments),
  };
}

function collect(
  calls: ToolCall[],
  finished: Map<string, ToolCallRecord>,
  results: Map<Unit, UnitResult>,
): ToolStepOutcome {
  const pending: PendingToolCall[] = [];
  for (const [unit, result] of results) {
    if ("pending" in result) pending.push(result.pending);
    else for (const id of [unit.call.id, ...unit.duplicateIds]) finished.set(id, { ...result.record, id });
  }
  // Identical calls share one result, but each record keeps the arguments text its own call sent.
  const records = calls.flatMap((call) => {
    const record = finished.get(call.id);
    return record ? [{ ...record, rawArguments: call.function.arguments }] : [];
  });
  return { records, pending };
}
