/**
 * resumeAgent as the library exports it: the loop's, after a check that every decision is for a
 * call the paused run waits for, with that call's arguments hash. Without the check a mistyped id
 * decides nothing and the run silently pauses again. The chat adapters call the loop's own
 * resumeAgent, with every decision their run has had (earlier pauses' too), so it takes a superset.
 */
import { approvalsAwaited } from "../tools/executor.js";
import type { ApprovalDecision, ApprovalRequest } from "../tools/types.js";
import { configurationError } from "./errors.js";
import { resumeAgent as resumeLoop } from "./loop.js";
import type { AgentConfig, PausedRun, RunResult, Task } from "./run.js";

/** The approvals a paused run waits for: decide each under its `toolCallId`, with its `argumentsHash`. */
export function pendingApprovals(paused: PausedRun): ApprovalRequest[] {
  return approvalsAwaited(paused.pending);
}

/**
 * Continues a paused run with decisions keyed by the `toolCallId` of its pending approvals
 * (`pendingApprovals(result.paused)`, or the `approval_requested` events). Calls left undecided
 * keep waiting. A decision under any other id, or with another arguments hash, is an error.
 */
export async function resumeAgent(
  config: AgentConfig,
  paused: PausedRun,
  decisions: Record<string, ApprovalDecision>,
  options: Pick<Task, "signal" | "onEvent"> = {},
): Promise<RunResult> {
  const waiting = new Map(pendingApprovals(paused).map((request) => [request.toolCallId, request]));
  const list =
    [...waiting.values()].map((request) => `${request.toolCallId} (${request.toolName})`).join(", ") || "nothing";
  for (const [id, decision] of Object.entries(decisions)) {
    const request = waiting.get(id);
    if (!request)
      throw configurationError(
        `resumeAgent got a decision for '${id}', which run ${paused.runId} does not wait for; it waits for ${list}: key each decision by the toolCallId of pendingApprovals(paused).`,
      );
    if (decision?.argumentsHash !== request.argumentsHash) {
      throw configurationError(
        `resumeAgent got a decision for '${id}' whose argumentsHash is not that call's; copy argumentsHash from its pending approval, so a decision only ever applies to the arguments it was made for.`,
      );
    }
  }
  return resumeLoop(config, paused, decisions, options);
}
