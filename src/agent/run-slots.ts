/**
 * Bounded load: at most `limit` runs in progress at once (GLASSBOX_MAX_CONCURRENT_RUNS), shared by
 * every adapter of the process; the rest wait in arrival order. A burst of messages then costs a
 * queue, not a pile of concurrent model calls, memory and tool work.
 */
export interface RunSlots {
  /** Resolves with a release function once a slot is free, in arrival order; rejects if `signal` aborts first. */
  acquire(signal?: AbortSignal): Promise<() => void>;
  /** Runs in progress and runs waiting for a slot. */
  counts(): { running: number; waiting: number };
}

export function createRunSlots(limit: number): RunSlots {
  let running = 0;
  const waiting: Array<() => void> = [];
  const release = () => {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      running -= 1;
      waiting.shift()?.();
    };
  };
  return {
    acquire(signal) {
      if (running < limit && waiting.length === 0) {
        running += 1;
        return Promise.resolve(release());
      }
      return new Promise((resolve, reject) => {
        const take = () => {
          signal?.removeEventListener("abort", abandon);
          running += 1;
          resolve(release());
        };
        const abandon = () => {
          const index = waiting.indexOf(take);
          if (index >= 0) waiting.splice(index, 1);
          reject(signal?.reason ?? new Error("aborted"));
        };
        waiting.push(take);
        signal?.addEventListener("abort", abandon, { once: true });
      });
    },
    counts: () => ({ running, waiting: waiting.length }),
  };
}
