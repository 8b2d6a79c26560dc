/**
 * One task at a time per session, sessions side by side: each session key has a chain of tasks, and
 * a task starts when the one before it in the same session has settled (failed or not). The Slack
 * and Discord inbound handlers accept a conversation's events through it in the order they came.
 */
export interface SessionQueue {
  run<T>(sessionId: string, task: () => Promise<T>): Promise<T>;
  /** True while a task of the session runs or waits. */
  busy(sessionId: string): boolean;
  /** Resolves once no task runs or waits in any session. */
  idle(): Promise<void>;
}

export function createSessionQueue(): SessionQueue {
  const tails = new Map<string, Promise<unknown>>();
  return {
    run(sessionId, task) {
      const previous = tails.get(sessionId) ?? Promise.resolve();
      const result = previous.then(task, task);
      const tail = result.catch(() => undefined);
      tails.set(sessionId, tail);
      // Forget the session once its last task has settled, so the map does not grow forever.
      void tail.then(() => {
        if (tails.get(sessionId) === tail) tails.delete(sessionId);
      });
      return result;
    },
    busy: (sessionId) => tails.has(sessionId),
    async idle() {
      // A task may queue another (a click resuming a run), so look again until nothing is left.
      while (tails.size > 0) await Promise.all(tails.values());
    },
  };
}
