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

describe("SLACK_APPROVERS and DISCORD_APPROVERS", () => {
  it("take user ids and the platform's own groups: Slack user groups, Discord roles", () => {
    const config = loadConfig({
      ...PLATFORMS,
      SLACK_APPROVERS: "U1, group:S0123ABC",
      DISCORD_APPROVERS: "123456789012345678,role:223456789012345678",
    });
    expect(config.slack?.approvers).toEqual(["U1", "group:S0123ABC"]);
    expect(config.discord?.approvers).toEqual(["123456789012345678", "role:223456789012345678"]);
  });

  it("a mistake, or the other platform's kind of group, is one sentence with the fix", () => {
    const mistakes: Array<[Record<string, string>, string]> = [
      [
        { SLACK_APPROVERS: "<!subteam^S0123ABC|@leads>" },
        "SLACK_APPROVERS names <!subteam^S0123ABC|@leads>, a Slack user group mention; write it as group:S0123ABC.",
      ],
      [
        { SLACK_APPROVERS: "group:leads" },
        "SLACK_APPROVERS names group:leads, which is no Slack user group id; write a group as group:S0123ABC, with its id (not its @handle).",
      ],
      [
        { SLACK_APPROVERS: "role:223456789012345678" },
        "SLACK_APPROVERS names role:223456789012345678, a Discord role; list user ids and Slack user groups (group:S...) there.",
      ],
      [
        { DISCORD_APPROVERS: "<@&223456789012345678>" },
        "DISCORD_APPROVERS names <@&223456789012345678>, a Discord role mention; write it as role:223456789012345678.",
      ],
      [
        { DISCORD_APPROVERS: "group:S0123ABC" },
        "DISCORD_APPROVERS names group:S0123ABC, a Slack user group; list user ids and Discord roles (role:...) there.",
      ],
    ];
    for (const [env, sentence] of mistakes) expect(() => loadConfig({ ...PLATFORMS, ...env })).toThrow(sentence);
  });
});
