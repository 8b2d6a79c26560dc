import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import type { ScriptedModelServer } from "../../../src/testing/scripted-model-server.js";
import { useCli } from "../helpers/cli.js";

// What the command line shows a person when its output is piped or read by a script: warnings,
// help, tool listings and tables (test/e2e/cli/terminal.test.ts has the terminal's side).
const cli = useCli();
const { glassbox, dataDir } = cli;
let server: ScriptedModelServer;
beforeAll(() => {
  server = cli.server();
});

describe("glassbox run, piped", () => {
  it("regression: a piped answer is the model's Markdown exactly as it came", async () => {
    const markdown = "# Apples\n\nThere are **12** apples and `3` pears:\n\n- red\n- green";
    server.setScript([{ content: markdown }]);
    const { stdout } = await glassbox(["run", "apples?"]);
    expect(stdout).toBe(`${markdown}\n`);
  });

  it("regression: an MCP server that cannot start is one readable warning line on stderr, not hidden and not JSON", async () => {
    server.setScript([{ content: "fine without it" }]);
    const mcp = JSON.stringify({ broken: { command: "glassbox-no-such-command-42" } });
    const { code, stdout, stderr } = await glassbox(["run", "hello"], { GLASSBOX_MCP_SERVERS: mcp });
    expect(code).toBe(0);
    expect(stdout.trim()).toBe("fine without it");
    const lines = stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^glassbox: warning: MCP server 'broken' could not be reached at startup \(.+\); its tools are left out until glassbox restarts$/,
    );
    const listed = await glassbox(["tools", "--json"], { GLASSBOX_MCP_SERVERS: mcp });
    expect(listed.stderr).toMatch(/^glassbox: warning: MCP server 'broken' could not be reached/);
    expect(() => JSON.parse(listed.stdout)).not.toThrow();
  });

  it("a failed tool call is shown once, by the command, not again as a log line", async () => {
    server.setScript([
      { toolCalls: [{ name: "calculator", arguments: '{"expression":"1/"}' }] },
      { content: "That did not work." },
    ]);
    const { stderr } = await glassbox(["run", "1/?"]);
    expect(stderr).toContain("calculator execution_error");
    expect(stderr).not.toContain("warning");
  });

  it("--help says that each run is a new session unless --session is given, and that runs are recorded as user cli", async () => {
    for (const args of [["--help"], ["run", "--help"], []]) {
      const { code, stdout } = await glassbox(args);
      expect(code, args.join(" ")).toBe(0);
      expect(stdout).toContain("without --session starts a new conversation");
      expect(stdout).toContain('recorded\nas user "cli"');
    }
    const command = await glassbox(["runn", "x"]);
    expect(command).toMatchObject({ code: 2, stdout: "" });
    expect(command.stderr.split("\n")[0]).toBe("glassbox: There is no command 'runn'; the commands are below.");
    expect(command.stderr).toContain('glassbox run "<task>"');
    const unknown = await glassbox(["run", "x", "--colour"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr.split("\n")[0]).toBe("glassbox: There is no option --colour; the options are below.");
  });
});

describe("glassbox tools", () => {
  it("lists the specialists of GLASSBOX_AGENTS, which run gives the model too", async () => {
    const agents = join(dataDir, "agents.json");
    writeFileSync(
      agents,
      JSON.stringify({ agents: { researcher: { description: "Finds facts.", systemPrompt: "You research." } } }),
    );
    const { stdout } = await glassbox(["tools", "--json"], { GLASSBOX_AGENTS: agents });
    const listed = JSON.parse(stdout) as Array<{ name: string; from: string }>;
    expect(listed.at(-1)).toMatchObject({ name: "agent_researcher", from: "specialist" });
    server.setScript([{ content: "ok" }]);
    await glassbox(["run", "hello", "--json"], { GLASSBOX_AGENTS: agents });
    const offered = (server.requests.at(-1)?.body.tools as Array<{ function: { name: string } }>).map(
      (tool) => tool.function.name,
    );
    expect(listed.map((tool) => tool.name)).toEqual(offered);
  });

  it("regression: past the selection threshold it lists list_tools too, as every call is sent it", async () => {
    const env = { GLASSBOX_TOOL_SELECTION_THRESHOLD: "3" };
    const listed = JSON.parse((await glassbox(["tools", "--json"], env)).stdout) as Array<{
      name: string;
      from: string;
    }>;
    expect(listed.at(-1)).toMatchObject({ name: "list_tools", from: "tool selection" });
    server.setScript([{ content: "ok" }]);
    await glassbox(["run", "what time is it?", "--json"], env);
    const offered = (server.requests.at(-1)?.body.tools as Array<{ function: { name: string } }>).map(
      (tool) => tool.function.name,
    );
    expect(offered).toContain("list_tools");
    for (const name of offered) expect(listed.map((tool) => tool.name)).toContain(name);
    const { stdout } = await glassbox(["tools"], env);
    expect(stdout).toContain("More than 3 tools (GLASSBOX_TOOL_SELECTION_THRESHOLD)");
  });

  it("lists each tool for a person: where it is from, whether it asks for approval, what it takes", async () => {
    const { stdout } = await glassbox(["tools", "--tools", "examples/tools.mjs"]);
    expect(stdout.split("\n")[0]).toBe("13 tools the model can call:");
    expect(stdout).toMatch(/^schedule_run +built-in {2}asks for approval\n {2}the requester confirms it/m);
    expect(stdout).toMatch(/^restock +module examples\/tools\.mjs {2}asks for approval$/m);
    expect(stdout).toMatch(/^ {2}takes expression: string$/m);
    expect(stdout).not.toContain("\u001b");
  });

  it("says which tools ask by their arguments, and refuses a module whose tool has a typo that would remove a gate", async () => {
    const folder = mkdtempSync(join(tmpdir(), "glassbox-rule-tools-"));
    const tool = (extra: string) =>
      `{ name: "refund", description: "Refunds an amount.", parameters: { type: "object", properties: { amount: { type: "number" } } }, handler: () => "ok", ${extra} }`;
    writeFileSync(join(folder, "rule.mjs"), `export default [${tool("dangerous: ({ amount }) => amount > 100")}];`);
    writeFileSync(join(folder, "typo.mjs"), `export default [${tool("dangrous: true")}];`);
    const listed = await glassbox(["tools", "--tools", join(folder, "rule.mjs")]);
    expect(listed.stdout).toMatch(/^refund +module .*rule\.mjs {2}asks for approval for some arguments$/m);
    const json = await glassbox(["tools", "--tools", join(folder, "rule.mjs"), "--json"]);
    const refund = (JSON.parse(json.stdout) as Array<{ name: string; approval: string; dangerous: boolean }>).find(
      (entry) => entry.name === "refund",
    );
    expect(refund).toMatchObject({ approval: "by arguments", dangerous: true });
    const refused = await glassbox(["tools", "--tools", join(folder, "typo.mjs")]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain(`an unknown key "dangrous" (did you mean "dangerous"?)`);
    expect(refused.stderr).not.toMatch(/\n\s+at /); // one sentence, no stack
  });
});

describe("glassbox sessions and usage", () => {
  it("regression: sessions and usage are tables whose columns line up, numbers with separators, no '1 runs'", async () => {
    const env = {
      GLASSBOX_DB: join(mkdtempSync(join(tmpdir(), "glassbox-cli-tables-")), "glassbox.db"),
      LLM_MODEL: "gpt-4o-mini",
    };
    server.setScript([
      { content: "a", usage: { promptTokens: 1_234, completionTokens: 5 } },
      { content: "b", usage: { promptTokens: 20, completionTokens: 2 } },
      { content: "c", usage: { promptTokens: 30, completionTokens: 3 } },
    ]);
    await glassbox(["run", "one", "--session", "a-long-session-name", "--json"], env);
    await glassbox(["run", "two", "--session", "s", "--json"], env);
    await glassbox(["run", "three", "--session", "s", "--json"], env);

    const sessions = (await glassbox(["sessions"], env)).stdout.trimEnd().split("\n");
    expect(sessions).toHaveLength(3);
    expect(sessions[0]).toMatch(/^SESSION +MESSAGES +TOKENS +RUNS +STARTED BY +LAST ACTIVITY \(UTC\)$/);
    expect(sessions[1]).toMatch(/^cli:s +4 +55 +2 +cli +\d{4}-\d{2}-\d{2} \d{2}:\d{2}$/);
    expect(sessions[2]).toMatch(/^cli:a-long-session-name +2 +1,239 +1 +cli +\d{4}-\d{2}-\d{2} \d{2}:\d{2}$/);
    expectAligned(sessions, ["MESSAGES", "TOKENS", "RUNS"], "right");
    expectAligned(sessions, ["STARTED BY", "LAST ACTIVITY"], "left");

    const usage = (await glassbox(["usage"], env)).stdout;
    expect(usage).not.toMatch(/\b1 runs\b/);
    const bySession = usage.slice(usage.indexOf("By session")).trimEnd().split("\n");
    expect(bySession[1]).toMatch(/^ {2}SESSION +RUNS +PROMPT TOKENS +COMPLETION TOKENS +COST$/);
    const long = bySession.find((line) => line.includes("cli:a-long-session-name")) ?? "";
    expect(long).toMatch(/^ {2}cli:a-long-session-name +1 +1,234 +5 +\$0\.0002$/);
    expectAligned(bySession.slice(1), ["RUNS", "PROMPT TOKENS", "COMPLETION TOKENS", "COST"], "right");
    expect(usage.slice(0, usage.indexOf("By user"))).toMatch(/^By day\n {2}DAY +RUNS/);

    const trace = (await glassbox(["trace", "a-long-session-name"], env)).stdout;
    expect(trace).toContain("total: 1 step, prompt 1,234 / completion 5 tokens");
    expect(trace).toMatch(/sent 2 messages/);
  });

  it("regression: chat and run record their runs under one user id, cli; chat says its session", async () => {
    const env = { GLASSBOX_DB: join(mkdtempSync(join(tmpdir(), "glassbox-cli-users-")), "glassbox.db") };
    server.setScript([{ content: "from run" }, { content: "from chat" }]);
    await glassbox(["run", "hello", "--session", "by-run", "--json"], env);
    const chat = await glassbox(["chat", "--session", "by-chat"], env, undefined, "hello\n/exit\n");
    expect(chat.code).toBe(0);
    expect(chat.stdout).toContain("from chat");
    expect(chat.stdout).toContain("(session cli:by-chat)");
    const listed = JSON.parse((await glassbox(["sessions", "--json"], env)).stdout) as Array<{
      id: string;
      startedBy: string;
    }>;
    expect(listed.map(({ id, startedBy }) => [id, startedBy]).sort()).toEqual([
      ["cli:by-chat", "cli"],
      ["cli:by-run", "cli"],
    ]);
  });
});

/** Each header's column holds its cells: their right (or left) edges are where the header's are. */
function expectAligned(lines: string[], headers: string[], edge: "left" | "right") {
  const [header = "", ...rows] = lines;
  for (const name of headers) {
    const start = header.indexOf(name);
    expect(start, name).toBeGreaterThanOrEqual(0);
    const end = start + name.length;
    for (const row of rows) {
      if (edge === "right") {
        expect(row[end - 1], `${name} in ${row}`).not.toBe(" ");
        expect(row[end] ?? " ", `${name} in ${row}`).toBe(" ");
      } else {
        expect(row[start], `${name} in ${row}`).not.toBe(" ");
        expect(row[start - 1], `${name} in ${row}`).toBe(" ");
      }
    }
  }
}
