/**
 * Approvals nobody decided in time: every worker process sweeps (every 30 s by default), marks
 * expired the pending approvals past their time, updates their buttons' messages, and enqueues the
 * resume of every run whose approvals are now all settled (the run goes on with `denied` for them).
 *
 * Safe when several workers sweep at once: an approval is expired by exactly one of them (only a
 * pending one is marked), and a resume's key (`resume:<runId>`) adds nothing while one waits or
 * runs; a resume that finds its run no longer paused does nothing. A click deciding a run's other
 * approval at the very moment of the sweep can leave both thinking the other will resume it, so the
 * runs of one sweep are looked at again on the next.
 */
import type { Logger } from "../logger.js";
import { resumeTurn } from "./turns.js";
import type { RunQueue } from "../queue/types.js";
import type { Approval, StorePort } from "../store/port.js";

export const APPROVAL_SWEEP_MS = 30_000;

export interface ApprovalSweeper {
  /** One sweep now; resolves with the approvals it expired (for tests). */
  sweep(now?: Date): Promise<Approval[]>;
  stop(): Promise<void>;
}

export function startApprovalSweeper(options: {
  store: Pick<StorePort, "expireApprovals" | "approvalsOfRun" | "pausedRun">;
  queue: Pick<RunQueue<unknown>, "enqueue">;
  showDecision: (approval: Approval) => Promise<void>;
  log: Logger;
  everyMs?: number;
}): ApprovalSweeper {
  const { store, queue, log } = options;
  let recheck = new Map<string, Approval>(); // runs of earlier sweeps that still had a pending approval, by run id
  let running: Promise<Approval[]> | undefined;

  async function sweepOnce(now: Date): Promise<Approval[]> {
    const expired = await store.expireApprovals("", now);
    for (const approval of expired)
      await options
        .showDecision(approval)
        .catch((error: unknown) =>
          log.warn({ error: (error as Error).message }, "updating an expired approval's message failed"),
        );
    const runs = new Map([...recheck, ...expired.map((approval) => [approval.runId, approval] as const)]);
    recheck = new Map();
    for (const [runId, approval] of runs) {
      const settled = (await store.approvalsOfRun(runId)).every((other) => other.status !== "pending");
      if (!settled)
        recheck.set(runId, approval); // still waiting for a click, or for one deciding right now
      else if ((await store.pausedRun(runId)) !== undefined) await queue.enqueue(resumeTurn(approval));
    }
    if (expired.length > 0) log.info({ approvals: expired.length }, "expired approvals nobody decided in time");
    return expired;
  }

  const sweep = (now = new Date()) => {
    // One sweep at a time in this process; a timer that fires during one waits for the next round.
    running ??= sweepOnce(now).finally(() => (running = undefined));
    return running;
  };
  const timer = setInterval(() => {
    if (!running)
      void sweep().catch((error: unknown) =>
        log.warn({ error: (error as Error).message }, "the approval sweep failed; it runs again shortly"),
      );
  }, options.everyMs ?? APPROVAL_SWEEP_MS);
  timer.unref();

  return {
    sweep,
    async stop() {
      clearInterval(timer);
      await running?.catch(() => {});
    },
  };
}
