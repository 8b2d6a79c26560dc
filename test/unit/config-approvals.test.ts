// GLASSBOX_REQUESTER_MAY_APPROVE: one setting for every platform's clicks, true when unset, and a
// value that is not a yes or a no stops the start with one sentence.
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";

const PLATFORMS = {
  OPENAI_API_KEY: "sk-test",
  SLACK_BOT_TOKEN: "xoxb-test",
  SLACK_SIGNING_SECRET: "secret",
  DISCORD_TOKEN: "discord-test",
};

describe("GLASSBOX_REQUESTER_MAY_APPROVE", () => {
  it("lets the requester approve their own call when unset, on Slack, Discord and the web alike", () => {
    const config = loadConfig(PLATFORMS);
    expect([
      config.slack?.requesterMayApprove,
      config.discord?.requesterMayApprove,
      config.web.requesterMayApprove,
    ]).toEqual([true, true, true]);
  });

  it("false keeps every requester from approving their own call, everywhere", () => {
    const config = loadConfig({ ...PLATFORMS, GLASSBOX_REQUESTER_MAY_APPROVE: "false" });
    expect([
      config.slack?.requesterMayApprove,
      config.discord?.requesterMayApprove,
      config.web.requesterMayApprove,
    ]).toEqual([false, false, false]);
  });

  it("a value that is neither says so in one sentence", () => {
    expect(() => loadConfig({ ...PLATFORMS, GLASSBOX_REQUESTER_MAY_APPROVE: "sometimes" })).toThrow(
      "GLASSBOX_REQUESTER_MAY_APPROVE is 'sometimes'; set it to true or false.",
    );
  });
});
