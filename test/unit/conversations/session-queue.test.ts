// The session queue the inbound handlers accept a conversation's events through: one task at a time
// per session, sessions side by side. Ordering is proved by promises the tasks wait on, never by timing.
import { describe, expect, it } from "vitest";
import { createSessionQueue } from "../../../src/conversations/session-queue.js";
import { deferred } from "../../helpers/agent.js";

/** Lets every pending promise callback run (no timer involved beyond one turn of the event loop). */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("createSessionQueue", () => {
  it("runs the tasks of one session one after the other, in order", async () => {
    const queue = createSessionQueue();
    const log: string[] = [];
    const gate = deferred();
    const first = queue.run("s", async () => {
      log.push("first start");
      await gate.promise;
      log.push("first end");
      return 1;
    });
    const second = queue.run("s", async () => {
      log.push("second start");
      return 2;
    });
    const third = queue.run("s", async () => {
      log.push("third start");
      return 3;
    });
    await settle();
    expect(log).toEqual(["first start"]);
    expect(queue.busy("s")).toBe(true);
    gate.resolve();
    expect(await Promise.all([first, second, third])).toEqual([1, 2, 3]);
    expect(log).toEqual(["first start", "first end", "second start", "third start"]);
    await settle();
    expect(queue.busy("s")).toBe(false);
  });

  it("runs different sessions side by side", async () => {
    const queue = createSessionQueue();
    const gate = deferred();
    const slow = queue.run("a", async () => {
      await gate.promise;
      return "a";
    });
    // Session b finishes while a is still waiting; were they serialized, this would never resolve.
    expect(await queue.run("b", async () => "b")).toBe("b");
    expect(queue.busy("a")).toBe(true);
    gate.resolve();
    expect(await slow).toBe("a");
  });

  it("goes on after a task that fails (rejects or throws at once), and passes the failure to its caller", async () => {
    const queue = createSessionQueue();
    const rejected = queue.run("s", async () => {
      throw new Error("boom");
    });
    const thrown = queue.run("s", () => {
      throw new Error("thrown synchronously");
    });
    const next = queue.run("s", async () => "still runs");
    await expect(rejected).rejects.toThrow("boom");
    await expect(thrown).rejects.toThrow("thrown synchronously");
    expect(await next).toBe("still runs");
    await settle();
    expect(queue.busy("s")).toBe(false);
  });
});
