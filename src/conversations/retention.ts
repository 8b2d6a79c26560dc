/**
 * GLASSBOX_RETENTION_DAYS: every process (any role) removes, at start and then daily, the
 * conversations nobody has touched for that many days (StorePort.erase, kind "idle"; one with a run
 * in progress stays), and logs the receipt: the rows removed per table and the erasure's time, as its
 * audit row has them; never a conversation's id, its words or a person's id. Several processes
 * sweeping at once remove each row once: the one that comes second finds nothing left to remove.
 * The run queue's turns of them (a given-up turn, say) go with them.
 */
import type { Logger } from "../logger.js";
import type { RunQueue } from "../queue/types.js";
import type { StorePort } from "../store/port.js";
import { eraseWithTurns } from "./turns.js";

export const RETENTION_SWEEP_MS = 24 * 60 * 60 * 1000;
const DAY_MS = 86_400_000;

/** Who the erasures audit row names for a retention sweep. */
export const RETENTION_ERASER = "retention";

export function startRetention<Transaction>(options: {
  store: Pick<StorePort<Transaction>, "erase">;
  /** The run queue, where it keeps turns the store's erasure can reach. */
  queue?: Pick<RunQueue<Transaction>, "forgetIn">;
  days: number;
  log: Logger;
  everyMs?: number;
}): { sweep(now?: Date): Promise<void>; stop(): void } {
  const { store, days, log } = options;
  const sweep = async (now = new Date()) => {
    const before = new Date(now.getTime() - days * DAY_MS).toISOString();
    try {
      const target = { kind: "idle" as const, id: before };
      const receipt = await (options.queue
        ? eraseWithTurns(store, options.queue, target, RETENTION_ERASER)
        : store.erase(target, RETENTION_ERASER));
      const removed = Object.fromEntries(Object.entries(receipt.removed).filter(([, count]) => count > 0));
      if (Object.keys(removed).length > 0)
        log.info(
          { kind: receipt.kind, at: receipt.at, removed, before },
          `retention: removed conversations idle for more than ${days} days`,
        );
    } catch (error) {
      log.warn(
        { error: (error as Error).message },
        "retention: removing old conversations failed; trying again tomorrow",
      );
    }
  };
  void sweep();
  const timer = setInterval(() => void sweep(), options.everyMs ?? RETENTION_SWEEP_MS);
  timer.unref();
  return { sweep, stop: () => clearInterval(timer) };
}
