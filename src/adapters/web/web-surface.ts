import { cutReasoning } from "../../agent/trace.js";
import type { Usage } from "../../agent/types.js";
import type { ToolCallRecord } from "../../tools/types.js";
import type { WebEvent } from "./event-hub.js";

/** The thinking a live event carries: the hub keeps events of hundreds of runs in memory; the trace keeps more. */
const LIVE_REASONING_CHARS = 16 * 1024;

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
