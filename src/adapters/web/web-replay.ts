/** The trace viewer's "Replay this run", where a process has a model: the playground, and `all` on PostgreSQL. */
import { GlassboxError } from "../../agent/errors.js";
import { replayRun, type ReplayComparison } from "../../agent/replay.js";
import type { RunSlots } from "../../agent/run-slots.js";
import type { ChatModel } from "../../agent/types.js";
import type { StorePort } from "../../store/port.js";
import { recordedRunOf } from "../trace-readings.js";
import { HttpError } from "./http.js";

export type ReplayOnModel = (
  runId: string,
  options: { model?: string; systemPrompt?: string },
) => Promise<ReplayComparison>;

/**
 * Replays on the agent's model, or on another named one when the server can make it. A replay takes
 * one of the process's run slots (GLASSBOX_MAX_CONCURRENT_RUNS) like any run, waiting in line for it.
 */
export function replayOn(
  model: ChatModel,
  store: StorePort,
  modelNamed?: (name: string) => ChatModel,
  slots?: RunSlots,
): ReplayOnModel {
  return async (runId, options) => {
    if (options.model && options.model !== model.name && !modelNamed)
      throw new HttpError(
        400,
        `This server replays on its own model (${model.name}) only; use glassbox replay --model for another one.`,
      );
    const chosen = options.model && options.model !== model.name && modelNamed ? modelNamed(options.model) : model;
    const release = await slots?.acquire();
    try {
      return await replayRun(await recordedRunOf(store, runId), runId, {
        model: chosen,
        ...(options.systemPrompt ? { systemPrompt: options.systemPrompt } : {}),
      });
    } catch (error) {
      // A run that cannot be replayed (it made no model call) is the caller's sentence, not a fault.
      if (error instanceof GlassboxError && error.code === "configuration") throw new HttpError(409, error.message);
      throw error;
    } finally {
      release?.();
    }
  };
}
