/**
 * Conversations: what adapters talk to. Each message becomes a run of the shared agent, one run at
 * a time per session (a message that arrives while its session is busy waits its turn), with
 * memory in the store. `stop` cancels the running run; `reset` starts the session afresh.
 */
import { runAgent, type AgentConfig, type RunResult, type Task } from "./loop.js";
import { createSessionQueue } from "./session-queue.js";
import type { Store } from "./store.js";

export interface MessageTask extends Omit<Task, "history"> {
  sessionId: string;
  userId: string;
}

export interface Conversations {
  send(task: MessageTask): Promise<RunResult>;
  /** Cancels the session's running run; false when nothing was running. */
  stop(sessionId: string): boolean;
  /**
   * A new start: later runs see none of the session's earlier messages (which are kept). Stops the
   * running run; resolves once the reset is written (false when there was no such session).
   */
  reset(sessionId: string): Promise<boolean>;
  busy(sessionId: string): boolean;
}

export function createConversations(agent: AgentConfig, store: Store): Conversations {
  const queue = createSessionQueue();
  const running = new Map<string, AbortController>();
  return {
    send(task) {
      return queue.run(task.sessionId, async () => {
        const controller = new AbortController();
        running.set(task.sessionId, controller);
        const signal = task.signal ? AbortSignal.any([task.signal, controller.signal]) : controller.signal;
        try {
          return await runAgent(agent, { ...task, signal });
        } finally {
          running.delete(task.sessionId);
        }
      });
    },
    stop(sessionId) {
      const controller = running.get(sessionId);
      controller?.abort();
      return controller !== undefined;
    },
    reset(sessionId) {
      running.get(sessionId)?.abort();
      // Returned, not dropped: a store that cannot write must reach the caller, not crash the
      // process as an unhandled rejection.
      return queue.run(sessionId, async () => store.resetSession(sessionId));
    },
    busy: (sessionId) => queue.busy(sessionId),
  };
}
