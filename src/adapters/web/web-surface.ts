/**
 * How one run looks on the web: every event goes to the hub, which pushes it to the pages and API
 * clients watching that run or session (Server-Sent Events). Approvals are shown as Approve / Deny
 * buttons by the page; decisions come back through POST /api/approvals/:id.
 */
import type { Approval } from "../../agent/approvals.js";
import type { ChatSurface } from "../../conversations/conversations.js";
import type { AgentEvent } from "../../agent/events.js";
import type { RunResult } from "../../agent/run.js";
import { cutReasoning } from "../../agent/trace.js";
import type { Usage } from "../../agent/types.js";
import type { ToolCallRecord } from "../../tools/types.js";
import { approvalView, type EventHub, type WebEvent } from "./event-hub.js";

/** Where the page shows an approval: the session's stream, not a message to update later. */
const WEB_MESSAGE_REF = "web";
/** The thinking a live event carries: the hub keeps events of hundreds of runs in memory; the trace keeps more. */
const LIVE_REASONING_CHARS = 16 * 1024;

export function openWebSurface(hub: EventHub, sessionId: string): ChatSurface {
  /** The turn's first run: a pipeline's later stages are runs of their own, and its end comes under the last one's id. */
  let firstRunId: string | undefined;
  return {
    onEvent(event: AgentEvent) {
      if (event.type === "run_start") firstRunId ??= event.runId;
      const shown = webEventOf(event);
      if (shown) hub.publish(sessionId, shown);
    },

    // The end is published here, not at the loop's run_end, so that a paused run's approvals come first.
    async finish(result: RunResult) {
      // A pipeline's first stage is over once a later one ends the turn: whoever follows it (by the id POST /api/runs gave) is told.
      if (firstRunId !== undefined && firstRunId !== result.runId) hub.end(firstRunId);
      hub.publish(sessionId, {
        type: "run_end",
        runId: result.runId,
        sessionId: result.sessionId,
        output: result.output,
        stopReason: result.stopReason,
        steps: result.steps,
        usage: result.usage,
        ...(result.error ? { error: result.error } : {}),
      });
    },

    queued(runId?: string) {
      if (runId) hub.publish(sessionId, { type: "queued", runId, sessionId });
    },

    async askApproval(approval: Approval) {
      hub.publish(sessionId, { type: "approval_requested", runId: approval.runId, approval: approvalView(approval) });
      return WEB_MESSAGE_REF;
    },
  };
}

/** Shows a decision (or an expiry); a superseded approval ends its run, which will not resume. */
export function showWebDecision(hub: EventHub) {
  return async (approval: Approval): Promise<void> => {
    hub.publish(approval.sessionId, {
      type: "approval_decided",
      runId: approval.runId,
      approval: approvalView(approval),
    });
    if (approval.decidedBy === "superseded") hub.end(approval.runId);
  };
}

/**
 * A model call as a page shows it: its tokens, its time, and its thinking cut to what a page keeps
 * (`cutBefore`: characters of it already cut, as a stored step's are).
 */
export function modelEndView(
  runId: string,
  step: number,
  usage: Pick<Usage, "promptTokens" | "completionTokens">,
  latencyMs: number,
  thinking: string | undefined,
  cutBefore = 0,
): WebEvent {
  const reasoning = cutReasoning(thinking, LIVE_REASONING_CHARS);
  return {
    type: "model_end",
    runId,
    step,
    promptTokens: usage.promptTokens,
    completionTokens: usage.completionTokens,
    latencyMs: Math.round(latencyMs),
    ...(reasoning ? { reasoning: reasoning.text, reasoningCutChars: reasoning.cutChars + cutBefore } : {}),
  };
}

/** An ended call as a page shows it: without the text the model read, which stays in the trace. */
export function toolEndView(runId: string, step: number, { content: _modelText, ...record }: ToolCallRecord): WebEvent {
  return { type: "tool_end", runId, step, record };
}

/** The events a page renders, as plain JSON; the full request and the stored messages stay in the trace. */
function webEventOf(event: AgentEvent): WebEvent | undefined {
  switch (event.type) {
    case "run_start":
      return {
        type: "run_start",
        runId: event.runId,
        sessionId: event.sessionId,
        userId: event.userId,
        input: event.input,
        ...(event.pipeline ? { pipeline: event.pipeline } : {}),
      };
    case "run_resumed":
      return { type: "run_resumed", runId: event.runId, sessionId: event.sessionId };
    case "model_start":
      return { type: "model_start", runId: event.runId, step: event.step };
    case "model_delta":
      return { type: "model_delta", runId: event.runId, step: event.step, text: event.text };
    case "model_end":
      return modelEndView(event.runId, event.step, event.response.usage, event.latencyMs, event.response.reasoning);
    case "tool_start":
      return {
        type: "tool_start",
        runId: event.runId,
        step: event.step,
        toolCallId: event.toolCallId,
        name: event.name,
        arguments: event.arguments,
      };
    case "tool_end":
      return toolEndView(event.runId, event.step, event.record);
    case "note":
      return { type: "note", runId: event.runId, step: event.step, text: event.text };
    default:
      // message: in the trace; approval_requested: shown once stored (askApproval); run_end: at finish.
      return undefined;
  }
}
