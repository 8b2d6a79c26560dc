// resumeAgent as the library exports it (src/index.ts): the ids to decide come from the paused
// run's pending approvals, and a decision under any other id, or for other arguments, is an error
// instead of a silent second pause. Real openai SDK against the scripted model server.
import { afterEach, describe, expect, it } from "vitest";
import {
  createToolRegistry,
  pendingApprovals,
  resumeAgent,
  runAgent,
  type AgentConfig,
  type PausedRun,
} from "../../../src/index.js";
import { closeServers, modelFor, recordingTool, startServer } from "../../helpers/agent.js";

afterEach(closeServers);

async function pausedOnTwoCalls() {
  const server = await startServer({
    script: [
      {
        toolCalls: [
          { id: "call_refund", name: "refund", arguments: '{"order":"A1"}' },
          { id: "call_email", name: "email", arguments: '{"to":"ann"}' },
        ],
      },
      { content: "Refunded; the email waits." },
      { content: "Both done." },
    ],
  });
  const refund = recordingTool("refund", (args) => ({ refunded: args.order }), { dangerous: true });
  const email = recordingTool("email", (args) => ({ sent: args.to }), { dangerous: true });
  const config: AgentConfig = {
    model: modelFor(server),
    tools: createToolRegistry([refund.tool, email.tool]),
    approve: async () => "pending",
  };
  const first = await runAgent(config, { input: "Refund A1 and tell Ann", sessionId: "library" });
  expect(first.stopReason).toBe("awaiting_approval");
  return { server, config, paused: first.paused as PausedRun, refund, email };
}

describe("resumeAgent from the library", () => {
  it("pendingApprovals lists what the paused run waits for, with the ids and hashes to decide", async () => {
    const { paused } = await pausedOnTwoCalls();
    expect(pendingApprovals(paused)).toEqual([
      expect.objectContaining({
        toolCallId: "call_refund",
        toolName: "refund",
        arguments: { order: "A1" },
        argumentsHash: expect.stringMatching(/^[0-9a-f]{64}$/),
      }),
      expect.objectContaining({ toolCallId: "call_email", toolName: "email", arguments: { to: "ann" } }),
    ]);
  });

  it("regression: a decision under an id the run does not wait for is an error, not a silent new pause", async () => {
    const { server, config, paused, refund } = await pausedOnTwoCalls();
    const [request] = pendingApprovals(paused);
    const requestsBefore = server.requests.length;
    await expect(
      resumeAgent(config, paused, {
        call_refnud: { approved: true, by: "me", argumentsHash: request?.argumentsHash ?? "" },
      }),
    ).rejects.toThrow(
      `resumeAgent got a decision for 'call_refnud', which run ${paused.runId} does not wait for; it waits for call_refund (refund), call_email (email): key each decision by the toolCallId of pendingApprovals(paused).`,
    );
    expect(server.requests.length).toBe(requestsBefore);
    expect(refund.calls).toHaveLength(0);
  });

  it("a decision with another call's arguments hash is an error too", async () => {
    const { config, paused, refund } = await pausedOnTwoCalls();
    const [refundRequest, emailRequest] = pendingApprovals(paused);
    await expect(
      resumeAgent(config, paused, {
        [refundRequest?.toolCallId ?? ""]: {
          approved: true,
          by: "me",
          argumentsHash: emailRequest?.argumentsHash ?? "",
        },
      }),
    ).rejects.toThrow("resumeAgent got a decision for 'call_refund' whose argumentsHash is not that call's");
    expect(refund.calls).toHaveLength(0);
  });

  it("deciding some of the pending calls runs those and keeps waiting for the rest", async () => {
    const { config, paused, refund, email } = await pausedOnTwoCalls();
    const [refundRequest] = pendingApprovals(paused);
    const second = await resumeAgent(config, paused, {
      call_refund: { approved: true, by: "me", argumentsHash: refundRequest?.argumentsHash ?? "" },
    });
    expect(second.stopReason).toBe("awaiting_approval");
    expect(refund.calls).toHaveLength(1);
    expect(email.calls).toHaveLength(0);
    const secondPaused = second.paused as PausedRun;
    expect(pendingApprovals(secondPaused).map((request) => request.toolCallId)).toEqual(["call_email"]);
    const [emailRequest] = pendingApprovals(secondPaused);
    const third = await resumeAgent(config, secondPaused, {
      call_email: { approved: true, by: "me", argumentsHash: emailRequest?.argumentsHash ?? "" },
    });
    expect(third).toMatchObject({ stopReason: "final" });
    expect(email.calls).toHaveLength(1);
  });
});
