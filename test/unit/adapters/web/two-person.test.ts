// The two-person rule through the web playground's HTTP API: the real server over the real agent (the
// scripted model running the demo's rules, the demo shop's cancel_order), with channel settings whose
// defaults (the web's sessions take them) say a cancellation needs two approvers other than the
// person who asked. The first approval is `counted`, the same person again is refused, the second runs it.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CANCELLABLE_ORDER,
  cleanUp,
  getJson,
  postJson,
  startPlayground,
  WAIT,
  type Playground,
} from "../../../helpers/web.js";

interface RunBody {
  status: string;
  done: boolean;
  output: string | null;
  approvals: Array<{ id: string; status: string }>;
}

function settingsFile(): string {
  const file = join(mkdtempSync(join(tmpdir(), "glassbox-web-two-person-")), "channels.yaml");
  writeFileSync(
    file,
    [
      "defaults:",
      '  approvers: ["web:bob", "web:carol"]',
      "  requesterMayApprove: false",
      "  twoPersonRule: [cancel_order]",
      "",
    ].join("\n"),
  );
  return file;
}

describe("the two-person rule through the web API", () => {
  let playground: Playground;
  let api: string;
  beforeAll(async () => {
    playground = await startPlayground({ env: { GLASSBOX_CHANNELS: settingsFile() } });
    api = `${playground.url}api`;
  });
  afterAll(cleanUp);

  it("counts the first approval, refuses the requester and a second approval by the same person, and runs on the second person's", async () => {
    const input = `Cancel order ${CANCELLABLE_ORDER} because I ordered it twice`;
    const started = await postJson(`${api}/runs`, { session: "two-person", input, userId: "alice" });
    expect(started.status).toBe(202);
    const runId = started.body.runId as string;
    let run: RunBody | undefined;
    await expect
      .poll(async () => (run = (await getJson<RunBody>(`${api}/runs/${runId}`)).body).status, WAIT)
      .toBe("awaiting_approval");
    const approvalId = run?.approvals[0]?.id ?? "";
    const decide = (userId: string) => postJson(`${api}/approvals/${approvalId}`, { approved: true, userId });

    expect((await decide("alice")).status).toBe(403);
    const first = await decide("bob");
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({
      outcome: "counted",
      needed: 2,
      resumed: false,
      approval: { status: "pending", approvedBy: ["web:bob"], approvalsNeeded: 2 },
    });
    const again = await decide("bob");
    expect(again.status).toBe(409);
    expect(again.body).toMatchObject({ outcome: "approved_already" });
    expect((await getJson<RunBody>(`${api}/runs/${runId}`)).body.status).toBe("awaiting_approval");

    const second = await decide("carol");
    expect(second.body).toMatchObject({
      outcome: "decided",
      resumed: true,
      approval: { status: "approved", decidedBy: "web:carol", approvedBy: ["web:bob", "web:carol"] },
    });
    await expect.poll(async () => (run = (await getJson<RunBody>(`${api}/runs/${runId}`)).body).done, WAIT).toBe(true);
    expect(run?.output).toContain("cancelled");
  });
});
