/**
 * A stop asked through the store (by another process: a click in ingress, a worker's API) reaches a
 * run as its abort signal: before each model call the chat model asks the store whether the run was
 * cancelled and, if so, aborts the run where it runs. A stop whose notice was missed still lands
 * between steps, and the loop knows nothing of stores or processes.
 */
import { GlassboxError } from "../agent/errors.js";
import type { ChatModel } from "../agent/types.js";

export function stoppedFromStore(
  model: ChatModel,
  cancelRequested: (runId: string) => Promise<boolean>,
  stopRun: (runId: string) => boolean,
): ChatModel {
  return {
    name: model.name,
    async chat(request) {
      if (request.runId !== undefined && (await cancelRequested(request.runId))) {
        // A run this process does not track (not a queued turn) has no signal here to abort.
        if (!stopRun(request.runId)) throw new GlassboxError("cancelled", "The run was cancelled.");
        request.signal?.throwIfAborted();
      }
      return model.chat(request);
    },
  };
}
