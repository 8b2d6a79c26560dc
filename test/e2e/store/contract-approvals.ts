// The store contract, approvals: every outcome of a click, decided exactly once (also when two
// handles click at once), runReady for exactly one of a run's decisions, expiry, and approvals a
// newer message makes moot.
import { expect, it } from "vitest";
import { outcomeOf, pausedRun, runRecord, type Contract } from "../helpers/store-targets.js";

export function approvalsContract({ open }: Contract): void {
  it("a call's tool policy is kept with its approval: who may decide is its approvers, and its requester only when allowed", async () => {
    const store = await open();
    const [kept] = await pausedRun(store, "run_p", "slack:T1:C1:5.5", ["call_p"], 3600, {
      approvers: ["U7"],
      requesterMayApprove: false,
    });
    if (!kept) throw new Error("no approval opened");
    expect((await store.approval(kept.id))?.policy).toEqual({ approvers: ["U7"], requesterMayApprove: false });
    const click = { approvalId: kept.id, userId: "U1", approved: true, approvers: ["U9", "U1"] };
    // The requester, also a platform approver: not for a call its tool keeps from them.
    expect(await store.decideApproval(click)).toMatchObject({ kind: "not_allowed" });
    // A platform approver the tool does not name.
    expect(await store.decideApproval({ ...click, userId: "U9" })).toMatchObject({ kind: "not_allowed" });
    expect(await store.decideApproval({ ...click, userId: "U7" })).toMatchObject({
      kind: "decided",
      approval: { status: "approved", decidedBy: "U7" },
    });

    // A tool that says nothing leaves both to the deployment: its approvers, and its rule for requesters.
    const [open2] = await pausedRun(store, "run_q", "slack:T1:C1:6.6", ["call_q"]);
    expect(open2?.policy).toEqual({});
    const asked = { approvalId: open2?.id ?? "", userId: "U1", approved: true, approvers: ["U9"] };
    expect(await store.decideApproval({ ...asked, requesterMayApprove: false })).toMatchObject({ kind: "not_allowed" });
    expect(await store.decideApproval({ ...asked, userId: "U9", requesterMayApprove: false })).toMatchObject({
      kind: "decided",
    });
  });

  it("the two-person rule: two different approvers settle a call, each counted once; one denial settles it", async () => {
    const store = await open();
    const policy = { approvers: ["U7", "U8", "U9"], requesterMayApprove: false, approvalsNeeded: 2 };
    const [kept] = await pausedRun(store, "run_two", "slack:T1:C1:7.7", ["call_two"], 3600, policy);
    if (!kept) throw new Error("no approval opened");
    expect((await store.approval(kept.id))?.policy).toEqual(policy);
    const click = { approvalId: kept.id, userId: "U7", approved: true, approvers: [] };
    expect(await store.decideApproval({ ...click, userId: "U1" })).toMatchObject({ kind: "not_allowed" });
    expect(await store.decideApproval(click)).toMatchObject({
      kind: "counted",
      needed: 2,
      approval: { status: "pending", approvedBy: ["U7"], decidedBy: null },
    });
    expect(await store.decideApproval(click)).toMatchObject({ kind: "not_allowed", reason: "approved_already" });
    expect(await store.decideApproval({ ...click, userId: "U8" })).toMatchObject({
      kind: "decided",
      runReady: true,
      approval: { status: "approved", decidedBy: "U8", approvedBy: ["U7", "U8"] },
    });
    expect(await store.decisionsOf("run_two")).toMatchObject({
      call_two: { approved: true, by: "U8", approvedBy: ["U7", "U8"] },
    });

    const [other] = await pausedRun(store, "run_two_b", "slack:T1:C1:8.8", ["call_two_b"], 3600, policy);
    const deny = { approvalId: other?.id ?? "", userId: "U7", approved: true, approvers: [] };
    expect(await store.decideApproval(deny)).toMatchObject({ kind: "counted" });
    expect(await store.decideApproval({ ...deny, userId: "U9", approved: false })).toMatchObject({
      kind: "decided",
      approval: { status: "denied", decidedBy: "U9", approvedBy: ["U7"] },
    });
  });

  it("approvers by group or role: a click decides by the groups the platform found the clicker in, counting people", async () => {
    const store = await open();
    const policy = {
      approvers: ["group:S1", "role:1300000000000000400"],
      requesterMayApprove: false,
      approvalsNeeded: 2,
    };
    const [kept] = await pausedRun(store, "run_grp", "slack:T1:C1:9.1", ["call_grp"], 3600, policy);
    if (!kept) throw new Error("no approval opened");
    expect((await store.approval(kept.id))?.policy).toEqual(policy);
    const click = { approvalId: kept.id, userId: "U7", approved: true, approvers: [] };
    expect(await store.decideApproval(click)).toMatchObject({ kind: "not_allowed" });
    expect(await store.decideApproval({ ...click, memberOf: ["group:S2"] })).toMatchObject({ kind: "not_allowed" });
    // The requester, in the group: still not an approver of their own call.
    expect(await store.decideApproval({ ...click, userId: "U1", memberOf: ["group:S1"] })).toMatchObject({
      kind: "not_allowed",
    });
    const both = { ...click, memberOf: ["group:S1", "role:1300000000000000400"] };
    expect(await store.decideApproval(both)).toMatchObject({ kind: "counted", approval: { approvedBy: ["U7"] } });
    expect(await store.decideApproval(both)).toMatchObject({ kind: "not_allowed", reason: "approved_already" });
    expect(await store.decideApproval({ ...click, userId: "U8", memberOf: ["group:S1"] })).toMatchObject({
      kind: "decided",
      approval: { status: "approved", approvedBy: ["U7", "U8"] },
    });
  });

  it("a click is decided once, by the requester or an approver, where it was posted, before it expires, while its run waits for it", async () => {
    const store = await open();
    const [approval] = await pausedRun(store, "run_a", "slack:T1:C1:1.1", ["call_a"]);
    if (!approval) throw new Error("no approval opened");
    await store.attachApprovalMessage(approval.id, "C1:2.2");
    const click = { approvalId: approval.id, userId: "U1", approved: true, approvers: ["U9"] };
    expect(await store.decideApproval({ ...click, approvalId: "apv_unknown" })).toEqual({ kind: "unknown" });
    expect(await store.decideApproval({ ...click, origin: { sessionPrefix: "slack:T2:" } })).toEqual({
      kind: "unknown",
    });
    expect(
      await store.decideApproval({ ...click, origin: { sessionPrefix: "slack:T1:", messageRef: "C1:9.9" } }),
    ).toEqual({ kind: "unknown" });
    expect(await store.decideApproval({ ...click, origin: { sessionPrefix: "slack:T1:C1:1" } })).toEqual({
      kind: "unknown",
    }); // whole segments only
    expect(await store.decideApproval({ ...click, userId: "U2" })).toMatchObject({ kind: "not_allowed" });
    expect(await store.decideApproval({ ...click, now: new Date(Date.now() + 7_200_000) })).toMatchObject({
      kind: "expired",
    });
    expect((await store.approval(approval.id))?.status).toBe("pending");

    const decided = await store.decideApproval({
      ...click,
      userId: "U9",
      origin: { sessionPrefix: "slack:T1:", messageRef: "C1:2.2" },
    });
    expect(decided).toMatchObject({
      kind: "decided",
      runReady: true,
      approval: { id: approval.id, status: "approved", decidedBy: "U9", messageRef: "C1:2.2" },
    });
    expect(await store.decideApproval({ ...click, approved: false })).toMatchObject({
      kind: "already_decided",
      approval: { status: "approved" },
    });
    expect(await store.decisionsOf("run_a")).toEqual({
      call_a: { approved: true, by: "U9", argumentsHash: "hash-call_a" },
    });

    // Buttons posted but their message not yet recorded (a fast click, or the poster died in between):
    // a click from the approval's place counts and records its message; one from elsewhere does not.
    const [unrecorded] = await pausedRun(store, "run_c", "slack:T1:C1:3.3", ["call_c"]);
    const fromMessage = { approvalId: unrecorded?.id ?? "", userId: "U1", approved: true, approvers: [] };
    expect(
      await store.decideApproval({ ...fromMessage, origin: { sessionPrefix: "slack:T2:", messageRef: "C1:4.4" } }),
    ).toEqual({ kind: "unknown" });
    expect(
      await store.decideApproval({ ...fromMessage, origin: { sessionPrefix: "slack:T1:", messageRef: "C1:4.4" } }),
    ).toMatchObject({ kind: "decided", approval: { status: "approved", messageRef: "C1:4.4" } });
    expect((await store.approval(unrecorded?.id ?? ""))?.messageRef).toBe("C1:4.4");

    // A call its run no longer waits for (the run went on) is stale.
    const [other] = await pausedRun(store, "run_b", "slack:T1:C1:1.1", ["call_b"]);
    await store.record([{ kind: "resume_run", runId: "run_b" }]);
    expect(await store.decideApproval({ ...click, approvalId: other?.id ?? "" })).toMatchObject({ kind: "stale" });
  });

  it("runReady comes with the decision that settles the run's last pending approval; only that one joins its transaction", async () => {
    const store = await open();
    const [first, second] = await pausedRun(store, "run_two", "cli:two", ["call_1", "call_2"]);
    const joined: string[] = [];
    const join = async (_transaction: unknown, approval: { id: string }) => void joined.push(approval.id);
    expect(
      await store.decideApproval({ approvalId: first?.id ?? "", userId: "U1", approved: true, approvers: [] }, join),
    ).toMatchObject({ kind: "decided", runReady: false });
    expect(
      await store.decideApproval({ approvalId: second?.id ?? "", userId: "U1", approved: false, approvers: [] }, join),
    ).toMatchObject({ kind: "decided", runReady: true });
    expect(joined).toEqual([second?.id]);
    expect(await store.decisionsOf("run_two")).toEqual({
      call_1: { approved: true, by: "U1", argumentsHash: "hash-call_1" },
      call_2: { approved: false, by: "U1", argumentsHash: "hash-call_2" },
    });
  });

  it("of two handles clicking one approval at once, exactly one decides it (10 approvals)", async () => {
    const [first, second] = [await open(), await open()];
    for (let index = 0; index < 10; index++) {
      const [approval] = await pausedRun(first, `run_${index}`, `cli:race${index}`, ["call_x"]);
      const outcomes = await Promise.all(
        [first, second].map((store, which) =>
          store.decideApproval({ approvalId: approval?.id ?? "", userId: "U1", approved: which === 0, approvers: [] }),
        ),
      );
      expect(outcomes.map((outcome) => outcome.kind).sort()).toEqual(["already_decided", "decided"]);
    }
  });

  it("of a run's two approvals decided at once by two handles, exactly one decision says the run is ready (10 runs)", async () => {
    const [first, second] = [await open(), await open()];
    for (let index = 0; index < 10; index++) {
      const approvals = await pausedRun(first, `run_${index}`, `cli:pair${index}`, ["call_1", "call_2"]);
      const outcomes = await Promise.all(
        [first, second].map((store, which) =>
          store.decideApproval({ approvalId: approvals[which]?.id ?? "", userId: "U1", approved: true, approvers: [] }),
        ),
      );
      expect(outcomes.map((outcome) => outcome.kind)).toEqual(["decided", "decided"]);
      expect(outcomes.filter((outcome) => outcome.kind === "decided" && outcome.runReady)).toHaveLength(1);
    }
  });

  it("expires pending approvals past their time, of the sessions asked for; a newer message makes a session's approvals moot and ends its paused runs", async () => {
    const store = await open();
    const [slack] = await pausedRun(store, "run_s", "slack:T1:C1:1.1", ["call_s"], 60);
    const [discord] = await pausedRun(store, "run_d", "discord:G1:C1", ["call_d"], 60);
    const [mine] = await pausedRun(store, "run_m", "slack:T1:C2:1.1", ["call_m"], 60);
    const later = new Date(Date.now() + 120_000);
    expect(await store.expireApprovals("slack:", new Date())).toEqual([]);
    const expired = await store.expireApprovals("slack:", later, (sessionId) => sessionId !== "slack:T1:C2:1.1");
    expect(expired).toMatchObject([
      { id: slack?.id, status: "expired", decidedBy: "expired", decidedAt: later.toISOString() },
    ]);
    expect((await store.approval(discord?.id ?? ""))?.status).toBe("pending");
    expect((await store.approval(mine?.id ?? ""))?.status).toBe("pending");
    expect(await store.decisionsOf("run_s")).toEqual({
      call_s: { approved: false, by: "expired", argumentsHash: "hash-call_s", reason: "nobody approved it in time" },
    });

    expect(await store.supersedeApprovals("cli:nothing-waits")).toEqual([]);
    const moot = await store.supersedeApprovals("discord:G1:C1");
    expect(moot).toMatchObject([{ id: discord?.id, status: "expired", decidedBy: "superseded" }]);
    expect(await store.pausedRun("run_d")).toBeUndefined();
    expect(await store.run("run_d")).toMatchObject({ status: "superseded" });
    expect(
      await store.decideApproval({ approvalId: discord?.id ?? "", userId: "U1", approved: true, approvers: [] }),
    ).toMatchObject({ kind: "stale" });
    expect(await store.pendingApprovalsOfSession("slack:T1:C2:1.1")).toMatchObject([{ id: mine?.id }]);
    expect((await store.approvalsOfRun("run_m")).map((approval) => approval.toolCallId)).toEqual(["call_m"]);
    // A run that does not wait is left alone by a newer message.
    await store.record([
      { kind: "start_run", run: runRecord("run_busy", "cli:busy") },
      { kind: "end_run", outcome: outcomeOf("run_busy") },
    ]);
    expect(await store.supersedeApprovals("cli:busy")).toEqual([]);
    expect(await store.run("run_busy")).toMatchObject({ status: "final" });
  });
}
