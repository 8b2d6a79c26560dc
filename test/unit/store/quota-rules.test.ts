// Which reservations in flight hold room (quota-rules' heldInFlight): those of processes that may
// still settle them. A process is judged as interruptOrphanedRuns judges a run's owner.
import { hostname } from "node:os";
import { describe, expect, it } from "vitest";
import { INSTANCE, STALE_AFTER_MS } from "../../../src/store/instances.js";
import { heldInFlight, type HoldRow } from "../../../src/store/quota-rules.js";

const NOW = Date.parse("2026-04-10T12:00:00.000Z");
const at = (msAgo: number) => new Date(NOW - msAgo).toISOString();
const hold = (owner: string | null, instance: Partial<HoldRow> | undefined, tokens = 100): HoldRow => ({
  owner,
  known: instance !== undefined,
  host: instance?.host ?? null,
  pid: instance?.pid ?? null,
  heartbeatAt: instance?.heartbeatAt ?? null,
  tokens,
  cost: tokens / 1_000,
  calls: 1,
});

describe("the reservations that hold room", () => {
  it("counts this process's, another host's that beat lately, and those from before owners; not a stale one, a forgotten one or one whose pid is gone here", () => {
    const kept = [
      hold(INSTANCE.id, undefined, 1), // this process, recorded or not
      hold("elsewhere", { host: "another-host", pid: 7, heartbeatAt: at(STALE_AFTER_MS - 1_000) }, 2),
      hold("elsewhere-never-beat", { host: "another-host", pid: 8, heartbeatAt: null }, 4), // another host's pid cannot be looked at
      hold(null, undefined, 8), // made before owners were recorded: its hold alone decides
    ];
    const dropped = [
      hold("stale", { host: "another-host", pid: 9, heartbeatAt: at(STALE_AFTER_MS + 1_000) }, 16),
      hold("forgotten", undefined, 32), // interruptOrphanedRuns deleted its instance: it was gone
      hold("exited", { host: hostname(), pid: 2 ** 22 + 1, heartbeatAt: at(1_000) }, 64), // above Linux's pid_max: no such process here
    ];
    expect(heldInFlight([...kept, ...dropped], NOW)).toEqual({ reservedTokens: 15, reservedCost: 0.015, inFlight: 4 });
    expect(heldInFlight(dropped, NOW)).toEqual({ reservedTokens: 0, reservedCost: 0, inFlight: 0 });
  });
});
