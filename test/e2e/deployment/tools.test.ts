// The tools a deployment has: the built-ins and what its owner configured; the demo shop only in the
// demo. A user's own module with ordinary names for a team bot's tools (send_message, cancel_order,
// get_order_status) starts and is used on Slack, Discord, the playground and the CLI.
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { askSomething, exampleRequests } from "../../../src/adapters/example-requests.js";
import { loadConfig } from "../../../src/config.js";
import { createAgentConfig, loadTools } from "../../../src/setup.js";
import { startScriptedModelServer } from "../../../src/testing/scripted-model-server.js";
import * as discord from "../../helpers/discord.js";
import * as slack from "../../helpers/slack.js";
import * as web from "../../helpers/web.js";

const directories: string[] = [];
afterEach(async () => {
  await Promise.all([slack.cleanUp(), discord.cleanUp(), web.cleanUp()]);
  for (const directory of directories.splice(0)) rmSync(directory, { recursive: true, force: true });
});

function tempDir(): string {
  const directory = mkdtempSync(join(tmpdir(), "glassbox-deployment-"));
  directories.push(directory);
  return directory;
}

/** A team's own tools module, with the names the demo shop also uses. */
function ownToolsModule(directory: string, name = "team-tools.mjs"): string {
  const path = join(directory, name);
  writeFileSync(
    path,
    `const object = (properties, required) => ({ type: "object", properties, required, additionalProperties: false });
export default [
  { name: "get_order_status", description: "Looks up an order in the team's own order system.", parameters: object({ order_id: { type: "string" } }, ["order_id"]),
    handler: async ({ order_id }) => ({ order_id, status: "packed", system: "team-erp" }) },
  { name: "cancel_order", description: "Cancels an order in the team's own order system.", dangerous: true, parameters: object({ order_id: { type: "string" } }, ["order_id"]),
    handler: async ({ order_id }) => ({ order_id, cancelled: true, system: "team-erp" }) },
  { name: "send_message", description: "Posts to the team's own pager.", dangerous: true, parameters: object({ text: { type: "string" } }, ["text"]),
    handler: async ({ text }) => ({ sent: text, system: "team-pager" }) },
];
`,
  );
  return path;
}

const ownLookup = [
  { toolCalls: [slack.toolCall("get_order_status", { order_id: "A-77" })] },
  { content: "Order A-77 is packed." },
];
const SCHEDULE_TOOLS = ["schedule_run", "list_schedules", "pause_schedule", "delete_schedule"];
const TEAM_TOOLS = [
  "current_time",
  "calculator",
  "remember",
  "forget",
  ...SCHEDULE_TOOLS,
  "get_order_status",
  "cancel_order",
  "send_message",
];
const toolNamesSent = (body: { tools?: unknown[] } | undefined) =>
  (body?.tools ?? []).map((tool) => (tool as { function: { name: string } }).function.name);

describe("the tools a deployment has", () => {
  it("a plain start has current_time, calculator and the memory tools, and no demo shop (its database is never created)", async () => {
    const directory = tempDir();
    const config = loadConfig({ GLASSBOX_SHOP_DB: join(directory, "shop.db") });
    const { registry, sources } = await loadTools(config, {
      facts: (await import("../../../src/store/sqlite.js")).openSqlitePort(":memory:"),
    });
    expect(registry.names()).toEqual(["current_time", "calculator", "remember", "forget"]);
    expect([...sources.values()].every((source) => source.kind === "builtin")).toBe(true);
    expect(existsSync(join(directory, "shop.db"))).toBe(false);
  });

  it("GLASSBOX_DEMO=true brings the demo shop; GLASSBOX_BUILTIN_TOOLS chooses the built-ins", async () => {
    const directory = tempDir();
    const demo = await loadTools(
      loadConfig({
        GLASSBOX_DEMO: "true",
        GLASSBOX_SHOP_DB: join(directory, "shop.db"),
        GLASSBOX_BUILTIN_TOOLS: "calculator",
      }),
    );
    expect(demo.registry.names()).toEqual(["calculator", "get_order_status", "cancel_order", "send_message"]);
    expect(demo.sources.get("cancel_order")).toEqual({ kind: "demo" });
    const none = await loadTools(
      loadConfig({ GLASSBOX_BUILTIN_TOOLS: "none", GLASSBOX_TOOLS: ownToolsModule(directory) }),
    );
    expect(none.registry.names()).toEqual(["get_order_status", "cancel_order", "send_message"]);
    expect(() => loadConfig({ GLASSBOX_BUILTIN_TOOLS: "calculator,shop" })).toThrow(
      "GLASSBOX_BUILTIN_TOOLS names 'shop'; list some of current_time, calculator, memory, schedules (comma-separated), or none.",
    );
  });

  it("a configured tool named like a built-in or a demo tool replaces it, and start logs that once", async () => {
    const directory = tempDir();
    const module = join(directory, "calc.mjs");
    writeFileSync(
      module,
      `export default [{ name: "calculator", description: "The team's own calculator.", parameters: { type: "object", properties: {} }, handler: async () => 42 }];`,
    );
    const model = await startScriptedModelServer();
    const { log, lines } = slack.memoryLogger();
    const config = loadConfig({
      OPENAI_BASE_URL: model.url,
      GLASSBOX_DB: join(directory, "glassbox.db"),
      GLASSBOX_SHOP_DB: join(directory, "shop.db"),
      GLASSBOX_DEMO: "true",
      GLASSBOX_TOOLS: `${module},${ownToolsModule(directory)}`,
    });
    const agent = await createAgentConfig(config, log);
    try {
      expect(agent.tools.names()).toEqual([
        "current_time",
        "calculator",
        "remember",
        "forget",
        ...SCHEDULE_TOOLS,
        "get_order_status",
        "cancel_order",
        "send_message",
      ]);
      expect(agent.tools.get("calculator")?.definition.description).toBe("The team's own calculator.");
      expect(agent.tools.get("cancel_order")?.definition.description).toBe(
        "Cancels an order in the team's own order system.",
      );
      expect(agent.toolSources.get("cancel_order")).toEqual({ kind: "module", module: ownToolsModule(directory) });
      const replaced = lines
        .filter((line) => line.msg === "a configured tool replaces the built-in of the same name")
        .map((line) => [line.tool, line.source]);
      expect(replaced).toEqual([
        ["calculator", `module ${module}`],
        ["get_order_status", `module ${ownToolsModule(directory)}`],
        ["cancel_order", `module ${ownToolsModule(directory)}`],
        ["send_message", `module ${ownToolsModule(directory)}`],
      ]);
    } finally {
      await agent.close();
      await model.close();
    }
  });

  it("the chats' suggestions follow the tools: no order numbers without the demo shop", async () => {
    const plain = await loadTools(loadConfig({}), {
      facts: (await import("../../../src/store/sqlite.js")).openSqlitePort(":memory:"),
    });
    expect(askSomething("Ask me something", exampleRequests(plain.sources))).toBe(
      "Ask me something, for example: What time is it in Tokyo?",
    );
    const own = await loadTools(loadConfig({ GLASSBOX_TOOLS: ownToolsModule(tempDir()) }));
    expect(exampleRequests(own.sources)[0]).toBe(
      "Ask for something your tools do (get_order_status, cancel_order, send_message).",
    );
    const demo = await loadTools(loadConfig({ GLASSBOX_DEMO: "true", GLASSBOX_SHOP_DB: join(tempDir(), "shop.db") }));
    expect(exampleRequests(demo.sources)[0]).toBe("What is the status of order 20240410003?");
    expect(askSomething("Ask me something", [])).toBe("Ask me something.");
  });

  it("two configured modules defining one name fail at start with one sentence naming both modules", async () => {
    const directory = tempDir();
    const first = ownToolsModule(directory, "first.mjs");
    const second = ownToolsModule(directory, "second.mjs");
    await expect(loadTools(loadConfig({ GLASSBOX_TOOLS: `${first},${second}` }))).rejects.toThrow(
      `Tool 'get_order_status' is defined by both module ${first} and module ${second}; rename one of them.`,
    );
  });
});

describe("a team's own send_message, cancel_order and get_order_status", () => {
  it("work on Slack", async () => {
    const h = await slack.startHarness({
      script: ownLookup,
      env: { GLASSBOX_DEMO: "false", GLASSBOX_TOOLS: ownToolsModule(tempDir()) },
    });
    const { ts } = await h.mention(`<@${slack.BOT}> where is order A-77?`);
    await slack.waitForBotMessage(h.fake, slack.CHANNEL, ts, "Order A-77 is packed.");
    expect(toolNamesSent(h.model.requests[0]?.body)).toEqual(TEAM_TOOLS);
    expect(slack.toolResults(h.model, 1)).toEqual([
      { status: "success", data: { order_id: "A-77", status: "packed", system: "team-erp" } },
    ]);
    expect(existsSync(h.paths.shopDb)).toBe(false);
  });

  it("work on Discord", async () => {
    const h = await discord.startHarness({
      script: ownLookup,
      env: { GLASSBOX_DEMO: "false", GLASSBOX_TOOLS: ownToolsModule(tempDir()) },
    });
    await h.dm("where is order A-77?");
    await discord.waitForBotMessage(h.fake, discord.DM, "Order A-77 is packed.");
    expect(toolNamesSent(h.model.requests[0]?.body)).toEqual(TEAM_TOOLS);
    expect(discord.toolResults(h.model, 1)).toEqual([
      { status: "success", data: { order_id: "A-77", status: "packed", system: "team-erp" } },
    ]);
  });

  it("work in the playground, whose empty-chat hints follow the tools registered", async () => {
    const playground = await web.startPlayground({
      script: ownLookup,
      env: { GLASSBOX_DEMO: "false", GLASSBOX_TOOLS: ownToolsModule(tempDir()) },
    });
    const info = await web.getJson<{ hints: string[] }>(`${playground.url}api/info`);
    expect(info.body.hints.join(" ")).not.toMatch(/20240410003|demo shop/);
    expect(info.body.hints.join(" ")).toMatch(/get_order_status/);
    const accepted = await web.postJson(`${playground.url}api/runs`, {
      session: "own-tools",
      input: "where is order A-77?",
    });
    expect(accepted.status).toBe(202);
    await expect.poll(() => playground.model.requests.length, web.WAIT).toBe(2);
    expect(toolNamesSent(playground.model.requests[0]?.body)).toEqual(TEAM_TOOLS);
    expect(slack.toolResults(playground.model, 1)).toEqual([
      { status: "success", data: { order_id: "A-77", status: "packed", system: "team-erp" } },
    ]);
  });

  it("work in the CLI, and `glassbox tools` says where each tool comes from", async () => {
    const directory = tempDir();
    const module = ownToolsModule(directory);
    const model = await startScriptedModelServer({ script: ownLookup });
    try {
      const env = {
        PATH: process.env.PATH ?? "",
        OPENAI_BASE_URL: model.url,
        GLASSBOX_DB: join(directory, "glassbox.db"),
        GLASSBOX_SHOP_DB: join(directory, "shop.db"),
      };
      const run = await cli(["run", "where is order A-77?", "--tools", module, "--json"], env);
      expect(run.code).toBe(0);
      expect(JSON.parse(run.stdout)).toMatchObject({
        output: "Order A-77 is packed.",
        toolCalls: [{ name: "get_order_status", status: "success" }],
      });
      const listed = await cli(["tools", "--tools", module, "--json"], env);
      expect(listed.code).toBe(0);
      expect(
        (JSON.parse(listed.stdout) as Array<{ name: string; from: string }>).map((tool) => [tool.name, tool.from]),
      ).toEqual([
        ["current_time", "built-in"],
        ["calculator", "built-in"],
        ["remember", "built-in"],
        ["forget", "built-in"],
        ...SCHEDULE_TOOLS.map((name) => [name, "built-in"]),
        ["get_order_status", `module ${module}`],
        ["cancel_order", `module ${module}`],
        ["send_message", `module ${module}`],
      ]);
      expect(existsSync(join(directory, "shop.db"))).toBe(false);
    } finally {
      await model.close();
    }
  });
});

function cli(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ["--import", "tsx", "src/cli.ts", ...args], { env }, (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}
