// Who may decide a click when approvers name groups and roles: the platform says which of them the
// person clicking is in (memberOf); a requester never decides through a group; the two-person rule
// counts people, so one person in two groups approves once and two members of one group are two.
import { describe, expect, it } from "vitest";
import type { Approval } from "../../../src/agent/approvals.js";
import { refusalFor, whoDecides } from "../../../src/adapters/approval-replies.js";
import { slackApprover } from "../../../src/adapters/slack/approval-blocks.js";
import { approvalAfter, judgeClick, mayDecide } from "../../../src/store/approval-rules.js";
import type { DecisionRequest } from "../../../src/store/port-data.js";

const approval: Approval = {
  id: "ap_1",
  runId: "run_1",
  sessionId: "slack:T1:C1:1700000000.000100",
  toolCallId: "call_1",
  toolName: "cancel_order",
  arguments: { order_id: "1" },
  argumentsHash: "h",
  requester: "U1",
  status: "pending",
  decidedBy: null,
  decidedAt: null,
  expiresAt: "2999-01-01T00:00:00.000Z",
  messageRef: null,
  policy: { approvers: ["group:S1", "role:123456789012345678", "U9"], requesterMayApprove: false },
  approvedBy: [],
};
const paused = JSON.stringify({
  pending: [{ call: { id: "call_1" }, approval: { argumentsHash: "h" } }],
});
const click = (userId: string, memberOf?: string[]): DecisionRequest => ({
  approvalId: "ap_1",
  userId,
  approved: true,
  approvers: [],
  ...(memberOf ? { memberOf } : {}),
});

describe("approvers named by group or role", () => {
  it("a member of a named group or role may decide; someone in none of them, or in another, may not", () => {
    expect(mayDecide(approval, { approvers: [] }, "U2", ["group:S1"])).toBe(true);
    expect(mayDecide(approval, { approvers: [] }, "U2", ["role:123456789012345678"])).toBe(true);
    expect(mayDecide(approval, { approvers: [] }, "U9")).toBe(true);
    expect(mayDecide(approval, { approvers: [] }, "U2")).toBe(false);
    expect(mayDecide(approval, { approvers: [] }, "U2", ["group:S2", "role:1"])).toBe(false);
    expect(judgeClick(approval, click("U2", ["group:S1"]), paused).kind).toBe("decide");
    expect(judgeClick(approval, click("U2"), paused).kind).toBe("not_allowed");
  });

  it("the deployment's approvers may name groups too, for a call whose tool names none", () => {
    const plain = { ...approval, policy: {} };
    expect(mayDecide(plain, { approvers: ["group:S1"] }, "U2", ["group:S1"])).toBe(true);
    expect(mayDecide(plain, { approvers: ["group:S1"], requesterMayApprove: false }, "U1", ["group:S1"])).toBe(false);
  });

  it("a requester in an approver group is still the requester: not an approver of their own call", () => {
    expect(mayDecide(approval, { approvers: [] }, "U1", ["group:S1"])).toBe(false);
    expect(judgeClick(approval, click("U1", ["group:S1"]), paused).kind).toBe("not_allowed");
  });

  it("the two-person rule counts people: one person in two groups once, two members of one group twice", () => {
    const twoPerson = { ...approval, policy: { ...approval.policy, approvalsNeeded: 2 } };
    const first = approvalAfter(twoPerson, click("U2", ["group:S1", "role:123456789012345678"]));
    expect(first).toEqual({ approvedBy: ["U2"], settles: false });
    const counted = { ...twoPerson, approvedBy: first.approvedBy };
    expect(judgeClick(counted, click("U2", ["group:S1", "role:123456789012345678"]), paused)).toMatchObject({
      kind: "not_allowed",
      reason: "approved_already",
    });
    expect(judgeClick(counted, click("U3", ["group:S1"]), paused).kind).toBe("decide");
    expect(approvalAfter(counted, click("U3", ["group:S1"]))).toEqual({ approvedBy: ["U2", "U3"], settles: true });
  });

  it("the card and a refusal name a platform's own groups in its mention form, and leave the other's out", () => {
    expect(whoDecides(approval)).toBe("Only an approver other than <@U1> can decide: <@&123456789012345678>, <@U9>");
    expect(whoDecides(approval, slackApprover)).toBe(
      "Only an approver other than <@U1> can decide: <!subteam^S1>, <@U9>",
    );
    expect(refusalFor({ kind: "not_allowed", approval }, { approvers: [] }, slackApprover)).toBe(
      "This needs someone other than <@U1> to approve it: <!subteam^S1>, <@U9>.",
    );
    const mayOwn = { ...approval, policy: { approvers: ["role:123456789012345678"] } };
    expect(refusalFor({ kind: "not_allowed", approval: mayOwn }, { approvers: [] })).toBe(
      "Only <@U1> or an approver (<@&123456789012345678>) can approve this.",
    );
    // Only a Discord role is named: Slack has nobody to name.
    expect(refusalFor({ kind: "not_allowed", approval: mayOwn }, { approvers: [] }, slackApprover)).toBe(
      "Only <@U1> can approve this.",
    );
  });
});
