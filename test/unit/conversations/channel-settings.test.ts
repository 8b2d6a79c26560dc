// The per-channel settings file: what it says for a session (defaults, workspace, channel), the one
// sentence for each kind of mistake (naming the line), and reading it again when it changes.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it, vi } from "vitest";
import { refusalHere, toolAllowed } from "../../../src/conversations/channel-agent.js";
import { readChannelSettings, settingsFor, watchChannelSettings } from "../../../src/conversations/channel-settings.js";
import { createLogger } from "../../../src/logger.js";

const EXAMPLE = fileURLToPath(new URL("../../../examples/channels.yaml", import.meta.url));
const TOOLS = ["current_time", "calculator", "get_order_status", "cancel_order", "send_message", "remember", "forget"];

function fileWith(text: string, name = "channels.yaml"): string {
  const path = join(mkdtempSync(join(tmpdir(), "glassbox-channels-")), name);
  writeFileSync(path, text);
  return path;
}

const mistake = (text: string, name?: string) => {
  const path = fileWith(text, name);
  try {
    readChannelSettings(path, TOOLS);
  } catch (error) {
    return (error as Error).message.replace(path, "FILE");
  }
  throw new Error("no mistake found");
};

describe("per-channel settings", () => {
  it("the example file: the defaults, then the workspace's, then the channel's, for Slack and Discord sessions", () => {
    const settings = readChannelSettings(EXAMPLE, TOOLS);
    expect(settings.source.version).toMatch(/^[0-9a-f]{12}$/);
    expect(settingsFor(settings, "slack:T0FAKE0001:C0SUPPORT:1718000000.000100")).toEqual({
      systemPrompt: "You help the support team answer customers about their orders.",
      tools: ["current_time", "calculator", "get_order_status", "remember", "forget"],
      budget: { channel: { daily: { cost: 5 }, monthly: { cost: 60 } } },
    });
    expect(settingsFor(settings, "slack:T0FAKE0001:C0RANDOM:1718000000.000200")).toEqual({
      systemPrompt: "You are the Example team's assistant. Keep answers short.",
      model: "gpt-4.1-nano",
      tools: [],
    });
    expect(settingsFor(settings, "slack:T0OTHER:C9:1")).toEqual(settings.defaults);
    expect(settingsFor(settings, "discord:1100000000000000100:C0SUPPORT:1200")).toMatchObject({
      tools: ["current_time", "calculator", "get_order_status", "remember", "forget"],
    });
    expect(settingsFor(settings, "web:abc")).toEqual(settings.defaults);
    expect(settingsFor(settings, "cli:abc")).toEqual(settings.defaults);
  });

  it("users: only those listed are served there, by their id with or without its workspace", () => {
    const finance = settingsFor(readChannelSettings(EXAMPLE, TOOLS), "slack:T0FAKE0001:C0FINANCE:1");
    expect(refusalHere(finance, "U0FINANCE1")).toBeUndefined();
    expect(refusalHere(finance, "T0FAKE0001:U0FINANCE2")).toBeUndefined();
    expect(refusalHere(finance, "U1")).toMatch(/^I'm not set up to work for you in this channel/);
    expect(refusalHere(finance, undefined)).toBeDefined();
    expect(refusalHere({}, "U1")).toBeUndefined(); // no list: everyone
  });

  it("Discord's ids written unquoted stay exactly themselves (they are past 2^53)", () => {
    const path = fileWith("channels:\n  1300000000000000101:\n    users: [1300000000000000301]\n");
    const settings = readChannelSettings(path, TOOLS);
    expect(Object.keys(settings.channels)).toEqual(["1300000000000000101"]);
    expect(settingsFor(settings, "discord:1300000000000000100:1300000000000000101").users).toEqual([
      "1300000000000000301",
    ]);
  });

  it("tools may be named by patterns", () => {
    expect(toolAllowed(["crm_*"], "crm_lookup")).toBe(true);
    expect(toolAllowed(["crm_*"], "crm")).toBe(false);
    expect(toolAllowed(["*_order*"], "get_order_status")).toBe(true);
    expect(toolAllowed(["calculator"], "calculator.x")).toBe(false);
    expect(toolAllowed([], "calculator")).toBe(false);
  });

  it("a mistake is one sentence naming the file's line, with what was likely meant", () => {
    expect(mistake("defaults:\n  tols: [calculator]\n")).toBe(
      "FILE:2: defaults.tols is not a setting; did you mean tools?",
    );
    expect(mistake("chanels:\n  C1: {}\n")).toBe("FILE:1: chanels is not a setting; did you mean channels?");
    expect(mistake("channels:\n  C1:\n    budget:\n      channel: { daly: { cost: 5 } }\n")).toBe(
      "FILE:4: channels.C1.budget.channel.daly is not a setting; did you mean daily?",
    );
    expect(mistake("channels:\n  C1:\n    budget:\n      user: { daily: { tokens: 1.5 } }\n")).toBe(
      "FILE:4: channels.C1.budget.user.daily.tokens must be a whole number of tokens above 0.",
    );
    expect(mistake("channels:\n  C1:\n    budget:\n      team: { daily: { cost: 5 } }\n")).toBe(
      "FILE:4: channels.C1.budget.team is not a setting; the settings are channel, workspace, user.",
    );
    expect(mistake("channels:\n  C1:\n    tools: [calculater]\n")).toBe(
      "FILE:3: channels.C1.tools names calculater, which is no tool here; did you mean calculator?",
    );
    expect(mistake("channels:\n  C1:\n    tools: calculator\n")).toMatch(
      /^FILE:3: channels\.C1\.tools must be a list of tool names or patterns/,
    );
    expect(mistake("channels:\n  C1:\n    systemPromptFile: missing.txt\n")).toMatch(
      /^FILE:3: channels\.C1\.systemPromptFile names .*missing\.txt, which cannot be read\.$/,
    );
    expect(mistake("channels:\n  C1:\n    threadContext: { threads: yes please }\n")).toBe(
      "FILE:3: channels.C1.threadContext.threads must be true or false.",
    );
    expect(mistake("channels:\n  C1:\n    threadContext: { maxMessages: 0 }\n")).toBe(
      "FILE:3: channels.C1.threadContext.maxMessages must be a whole number from 1 to 200.",
    );
    expect(mistake("channels:\n  C1:\n    threadContext: { maxTokns: 500 }\n")).toBe(
      "FILE:3: channels.C1.threadContext.maxTokns is not a setting; did you mean maxTokens?",
    );
    expect(mistake("defaults: [1\n")).toMatch(/^FILE:\d+: /);
    expect(mistake('{"channels": {"C1": {"tools": ["calculator"], "temperature": 0.2}}}', "channels.json")).toBe(
      "FILE:1: channels.C1.temperature is not a setting; the settings are systemPrompt, systemPromptFile, model, tools, users, approvers, requesterMayApprove, toolApprovers, twoPersonRule, budget, notes, threadContext.",
    );
  });

  it("schedules: each read into a cron expression for its platform's channel; each mistake is one sentence", () => {
    const schedule = (lines: string[]) =>
      ["schedules:", ...lines.map((line) => (line.startsWith("- ") ? `  ${line}` : `    ${line}`))].join("\n");
    const good = [
      "- name: digest",
      "workspace: T0123ABC",
      "channel: C0456DEF",
      "every: weekday 09:00",
      "timezone: Europe/Berlin",
      "prompt: Summarise yesterday's incidents.",
      "as: U012AB3CD",
    ];
    const settings = readChannelSettings(fileWith(`${schedule(good)}\n`), TOOLS);
    expect(settings.schedules).toEqual([
      {
        name: "digest",
        platform: "slack",
        workspace: "T0123ABC",
        channel: "C0456DEF",
        cron: "0 9 * * 1-5",
        timezone: "Europe/Berlin",
        prompt: "Summarise yesterday's incidents.",
        as: "U012AB3CD",
        missed: "once",
      },
    ]);
    const discord = schedule([...good.slice(0, 1), "workspace: 123456789012345678", ...good.slice(2)]);
    expect(readChannelSettings(fileWith(discord), TOOLS).schedules[0]?.platform).toBe("discord");
    expect(mistake(schedule([...good.slice(0, 1), "workspace: acme", ...good.slice(2)]))).toBe(
      "FILE:3: schedules[0].workspace must be a Slack workspace id (T0123ABCD) or a Discord server id (a number of 17 to 20 digits).",
    );
    expect(mistake(schedule([...good.slice(0, 3), "every: 2 minutes", ...good.slice(4)]))).toBe(
      "FILE:5: schedules[0].every: Runs on a schedule must be at least 5 minutes apart.",
    );
    expect(mistake(schedule(good.filter((line) => !line.startsWith("as:"))))).toBe(
      "FILE:2: schedules[0] needs as (name, workspace, channel, every, timezone, prompt, as, missed).",
    );
    expect(mistake(schedule([...good, ...good]))).toBe(
      "FILE:2: schedules names digest twice; each schedule needs a name of its own.",
    );
  });

  it("approvers may name Slack user groups and Discord roles; each mistake in them is one sentence", () => {
    const path = fileWith(
      [
        "defaults:",
        '  approvers: [U1, "group:S0LEADS", "role:1300000000000000400"]',
        "  toolApprovers:",
        '    cancel_order: ["group:S0FINANCE"]',
        "",
      ].join("\n"),
    );
    expect(readChannelSettings(path, TOOLS).defaults).toMatchObject({
      approvers: ["U1", "group:S0LEADS", "role:1300000000000000400"],
      toolApprovers: { cancel_order: ["group:S0FINANCE"] },
    });
    expect(mistake('channels:\n  C1:\n    approvers:\n      - U1\n      - "<!subteam^S0LEADS|@leads>"\n')).toBe(
      "FILE:5: channels.C1.approvers names <!subteam^S0LEADS|@leads>, a Slack user group mention; write it as group:S0LEADS.",
    );
    expect(mistake('channels:\n  C1:\n    toolApprovers:\n      cancel_order: ["<@&1300000000000000400>"]\n')).toBe(
      "FILE:4: channels.C1.toolApprovers.cancel_order names <@&1300000000000000400>, a Discord role mention; write it as role:1300000000000000400.",
    );
    expect(mistake('channels:\n  C1:\n    approvers: ["group:finance-leads"]\n')).toBe(
      "FILE:3: channels.C1.approvers names group:finance-leads, which is no Slack user group id; write a group as group:S0123ABC, with its id (not its @handle).",
    );
    expect(mistake('channels:\n  C1:\n    approvers: ["role:Admins"]\n')).toBe(
      "FILE:3: channels.C1.approvers names role:Admins, which is no Discord role id; write a role as role:123456789012345678, with its id (not its name).",
    );
    expect(mistake('channels:\n  C1:\n    users: ["group:S0LEADS"]\n')).toBe(
      "FILE:3: channels.C1.users names group:S0LEADS; it lists people by user id (groups and roles name approvers).",
    );
  });

  it("is read again when the file changes; a file that became wrong leaves the settings as they were", async () => {
    const path = fileWith("channels:\n  C1:\n    tools: [calculator]\n");
    const warnings: string[] = [];
    const log = createLogger({ level: "warn" });
    log.warn = ((fields: { problem?: string }) => void warnings.push(fields.problem ?? "")) as typeof log.warn;
    const live = watchChannelSettings(path, log, TOOLS);
    try {
      expect(settingsFor(live.current(), "slack:T1:C1:1").tools).toEqual(["calculator"]);
      writeFileSync(path, "channels:\n  C1:\n    tools: [current_time]\n");
      await vi.waitFor(() => expect(settingsFor(live.current(), "slack:T1:C1:1").tools).toEqual(["current_time"]));

      const before = live.current();
      writeFileSync(path, "channels:\n  C1:\n    tool: [calculator]\n");
      expect(live.reload()).toBe(false);
      expect(live.current()).toBe(before);
      expect(warnings.at(-1)).toContain("channels.C1.tool is not a setting; did you mean tools?");
      expect(readFileSync(path, "utf8")).toContain("tool:");
    } finally {
      live.stop();
    }
  });
});
