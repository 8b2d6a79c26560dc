/**
 * The approval card's mentions: with the app installed in many workspaces a person is kept as
 * `<team>:<user>`, and Slack only recognises the user part in a mention.
 */
import { describe, expect, it } from "vitest";
import type { Approval } from "../../../../src/agent/approvals.js";
import { refusalFor } from "../../../../src/adapters/approval-replies.js";
import { approvalOutcome, approvalQuestion, slackMention } from "../../../../src/adapters/slack/approval-blocks.js";

const approval: Approval = {
  id: "ap_1",
  runId: "run_1",
  sessionId: "slack:T0TEAM:C1:1700000000.000100",
  toolCallId: "call_1",
  toolName: "cancel_order",
  arguments: { order_id: "20240410003" },
  argumentsHash: "h",
  requester: "T0TEAM:U0ASKER",
  status: "pending",
  decidedBy: null,
  decidedAt: null,
  expiresAt: "2026-12-06T10:00:00.000Z",
  messageRef: null,
  policy: {},
  approvedBy: [],
};

describe("Slack approval mentions", () => {
  it("regression: a many-workspace user is mentioned by the user id alone, in the question, the outcome and a refusal", () => {
    const question = approvalQuestion(approval);
    expect(question.text).toContain("<@U0ASKER> asked me to run");
    expect(JSON.stringify(question.blocks)).toContain("Only <@U0ASKER> or an approver can decide");
    expect(JSON.stringify(question)).not.toContain("T0TEAM:U0ASKER");

    const decided = {
      ...approval,
      status: "approved" as const,
      decidedBy: "T0TEAM:U0BOSS",
      decidedAt: approval.expiresAt,
    };
    expect(approvalOutcome(decided).text).toContain("Approved by <@U0BOSS>");

    expect(refusalFor({ kind: "not_allowed", approval }, { approvers: ["T0TEAM:U0BOSS"] }, slackMention)).toBe(
      "Only <@U0ASKER> or an approver (<@U0BOSS>) can approve this.",
    );
  });

  it("a call its requester may not approve names who can, from its tool's approvers or the platform's", () => {
    const secondPerson = { ...approval, policy: { requesterMayApprove: false } };
    expect(
      refusalFor(
        { kind: "not_allowed", approval: secondPerson },
        { approvers: ["T0TEAM:U0BOSS", "T0TEAM:U0ASKER"] },
        slackMention,
      ),
    ).toBe("This needs someone other than <@U0ASKER> to approve it: <@U0BOSS>.");
    const toolApprovers = {
      ...approval,
      policy: { approvers: ["U1", "U2", "U3", "U4", "U5", "U6"], requesterMayApprove: false },
    };
    expect(refusalFor({ kind: "not_allowed", approval: toolApprovers }, { approvers: ["U9"] })).toBe(
      "This needs someone other than <@T0TEAM:U0ASKER> to approve it: <@U1>, <@U2>, <@U3>, <@U4>, <@U5> or another approver.",
    );
    expect(refusalFor({ kind: "not_allowed", approval }, { approvers: [], requesterMayApprove: false })).toBe(
      "This needs someone other than <@T0TEAM:U0ASKER> to approve it, and nobody is set to; ask an admin to name an approver.",
    );
  });

  it("keeps a one-workspace user's id as it is", () => {
    expect(slackMention("U0ASKER")).toBe("<@U0ASKER>");
    expect(refusalFor({ kind: "not_allowed", approval: { ...approval, requester: "123" } }, { approvers: [] })).toBe(
      "Only <@123> can approve this.",
    );
  });
});
