import type { ApprovalDecision, ToolEvent } from "../tools/types.js";
import type { Message, ModelResponse, ToolSpec } from "./types.js";
import type { PipelineStage, RunResult } from "./run.js";
import type { ThreadReading } from "./thread-context.js";

/** Progress of a run, as a stream of typed events; adapters and traces render them their own way. */
export type AgentEvent =
  | {
      type: "run_start";
      runId: string;
      sessionId: string;
      userId: string;
      input: string;
      parent?: { runId: string; toolCallId: string };
      pipeline?: PipelineStage;
      /** The channel settings the run used: their file and version. */
      configuration?: string;
      /** What the run read of its thread before the mention. */
      threadContext?: ThreadReading;
    }
  | {
      type: "run_resumed";
      runId: string;
      sessionId: string;
      decisions: Record<string, ApprovalDecision>;
      parent?: { runId: string; toolCallId: string };
    }
  | {
      type: "model_start";
      runId: string;
      step: number;
      messages: Message[];
      toolCount: number;
      tools?: ToolSpec[];
      toolChoice?: "auto" | "none";
    }
  | { type: "model_delta"; runId: string; step: number; text: string }
  | { type: "model_end"; runId: string; step: number; response: ModelResponse; latencyMs: number }
  /** Every message the run adds to the conversation, as it is added (memory stores these). */
  | { type: "message"; runId: string; message: Message }
  /** A guard's note to the model (repeats, unchanged results, the step limit). */
  | { type: "note"; runId: string; step: number; text: string }
  | (ToolEvent & { step: number })
  | { type: "run_end"; runId: string; result: RunResult };

export type AgentEventListener = (event: AgentEvent) => void;
