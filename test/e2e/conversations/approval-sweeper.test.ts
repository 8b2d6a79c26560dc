// The workers' sweep of expired approvals (src/conversations/approval-sweeper.ts), on SQLite with the
// in-process queue and on PostgreSQL (when GLASSBOX_TEST_DATABASE_URL is set),
// with a worker that only records the turns it gets: approvals past their time are expired once,
// their messages updated, and the run whose approvals are now all settled gets its resume turn;
// a run still waiting for a click gets none; two workers sweeping at once expire each approval once.
import { afterEach, describe, expect, it, vi } from "vitest";
import type { RunQueue } from "../../../src/queue/types.js";
import type { Approval } from "../../../src/store/port.js";
import { startApprovalSweeper, type ApprovalSweeper } from "../../../src/conversations/approval-sweeper.js";
import { pausedRunOf, TARGETS, WAIT, type IngressHarness } from "../helpers/ingress.js";

const LATER = () => new Date(Date.now() + 2 * 3_600_000); // past the approvals' hour

for (const target of TARGETS) {
  describe.runIf(target.available)(`expired approvals swept by workers: ${target.name}`, () => {
    let harness: IngressHarness;
    const sweepers: ApprovalSweeper[] = [];
    afterEach(async () => {
      for (const sweeper of sweepers.splice(0)) await sweeper.stop();
      await harness?.close();
    });

    function sweeperOn(store: IngressHarness["store"], shown: Approval[]): ApprovalSweeper {
      const queue = harness.queue as unknown as Pick<RunQueue<unknown>, "enqueue">;
      const sweeper = startApprovalSweeper({
        store,
        queue,
        showDecision: async (approval) => void shown.push(approval),
        log: harness.log,
        everyMs: 3_600_000,
      });
      sweepers.push(sweeper);
      return sweeper;
    }

    it("expires what nobody decided in time, updates its messages, and enqueues the resume of the run once all are settled", async () => {
      harness = await target.open();
      const shown: Approval[] = [];
      const sweeper = sweeperOn(harness.store, shown);
      await pausedRunOf(harness.store, "run_both", "slack:T1:C1:1.1", "U1", ["call_a", "call_b"]);
      const [first] = await pausedRunOf(harness.store, "run_clicked", "slack:T1:C1:2.2", "U1", ["call_c", "call_d"]);
      // One of run_clicked's approvals was decided by a click, which did not ready the run.
      const click = await harness.store.decideApproval({
        approvalId: first?.id as string,
        userId: "U1",
        approved: true,
        approvers: [],
      });
      expect(click).toMatchObject({ kind: "decided", runReady: false });

      expect(await sweeper.sweep(new Date())).toEqual([]); // nothing is due yet
      const expired = await sweeper.sweep(LATER());
      expect(expired.map((approval) => approval.toolCallId).sort()).toEqual(["call_a", "call_b", "call_d"]);
      expect(shown.map((approval) => `${approval.toolCallId}:${approval.status}`).sort()).toEqual([
        "call_a:expired",
        "call_b:expired",
        "call_d:expired",
      ]);

      const turns = await harness.waitForTurns(2);
      expect(turns.map((turn) => turn.key).sort()).toEqual(["resume:run_both", "resume:run_clicked"]);
      expect(turns.find((turn) => turn.key === "resume:run_both")?.payload).toMatchObject({
        kind: "resume",
        runId: "run_both",
        sessionId: "slack:T1:C1:1.1",
      });
      expect(await sweeper.sweep(LATER())).toEqual([]);
    });

    it("leaves a run waiting while one of its approvals has time left, and resumes it once that one expires too", async () => {
      harness = await target.open();
      const sweeper = sweeperOn(harness.store, []);
      await pausedRunOf(harness.store, "run_mixed", "web:w1", "U1", ["call_a"]);
      // A second call of the same run asked later, with a longer time.
      await harness.store.openApprovals(
        [
          {
            runId: "run_mixed",
            sessionId: "web:w1",
            userId: "U1",
            toolCallId: "call_b",
            toolName: "post_notice",
            arguments: {},
            argumentsHash: "hash-call_b",
          },
        ],
        6 * 3_600,
      );
      expect((await sweeper.sweep(LATER())).map((approval) => approval.toolCallId)).toEqual(["call_a"]);
      // A later message of the same conversation shows that no resume was enqueued before it.
      await harness.store.acceptEvent({ eventIds: ["later-message"] }, (transaction) =>
        harness.ingress.queue.enqueueIn(transaction, { conversation: "web:w1", key: "later-message", payload: {} }),
      );
      expect((await harness.waitForTurns(1)).map((turn) => turn.key)).toEqual(["later-message"]);
      expect(
        (await sweeper.sweep(new Date(Date.now() + 7 * 3_600_000))).map((approval) => approval.toolCallId),
      ).toEqual(["call_b"]);
      expect((await harness.waitForTurns(2)).map((turn) => turn.key)).toEqual(["later-message", "resume:run_mixed"]);
    });

    it("two workers sweeping at once expire each approval once", async () => {
      harness = await target.open();
      const shownHere: Approval[] = [];
      const shownThere: Approval[] = [];
      const here = sweeperOn(harness.store, shownHere);
      const there = sweeperOn(await harness.another(), shownThere);
      for (let index = 0; index < 5; index++)
        await pausedRunOf(harness.store, `run_${index}`, `slack:T1:C1:${index}.0`, "U1", ["call_a", "call_b"]);
      const now = LATER();
      const [a, b] = await Promise.all([here.sweep(now), there.sweep(now)]);
      const ids = [...a, ...b].map((approval) => approval.id);
      expect(ids).toHaveLength(10);
      expect(new Set(ids).size).toBe(10);
      expect(shownHere.length + shownThere.length).toBe(10);
      // Every run is resumed. When each sweeper expired one of a run's two approvals, both may enqueue
      // its resume: the key adds nothing while the first waits or runs, but once the recording worker
      // has finished it the second is a turn of its own (a real resume then finds the run no longer
      // paused and does nothing). So at most one resume per run per sweeper.
      const runs = new Set([0, 1, 2, 3, 4].map((index) => `resume:run_${index}`));
      await vi.waitFor(() => expect(new Set(harness?.turns.map((turn) => turn.key))).toEqual(runs), WAIT);
      expect(harness.turns.length).toBeLessThanOrEqual(10);
    });
  });
}
