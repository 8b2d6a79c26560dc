import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import type { ScriptedModelServer } from "../../../src/testing/scripted-model-server.js";
import { useCli } from "../helpers/cli.js";
import { makeImmutable, writeDamagedDatabase, writeNotADatabase } from "../helpers/database-files.js";

// The real command line, in a child process, against the scripted model server.
const cli = useCli();
const { glassbox } = cli;
let server: ScriptedModelServer;
beforeAll(() => {
  server = cli.server();
});

describe("glassbox run --json", () => {
  it("prints exactly one JSON object with runId, sessionId, output, stopReason, steps, usage and toolCalls", async () => {
    server.setScript([
      {
        toolCalls: [{ name: "check_stock", arguments: "{fruit: 'apple'}" }],
        usage: { promptTokens: 100, completionTokens: 10 },
      },
      { content: "There are 12 apples.", usage: { promptTokens: 150, completionTokens: 8 } },
    ]);
    const { code, stdout } = await glassbox(["run", "How many apples?", "--tools", "examples/tools.mjs", "--json"]);
    expect(code).toBe(0);
    const lines = stdout.trim().split("\n");
    expect(lines).toHaveLength(1);
    const result = JSON.parse(lines[0] ?? "");
    expect(Object.keys(result).sort()).toEqual([
      "output",
      "runId",
      "sessionId",
      "steps",
      "stopReason",
      "toolCalls",
      "usage",
    ]);
    expect(result).toMatchObject({
      output: "There are 12 apples.",
      stopReason: "final",
      steps: 2,
      usage: { promptTokens: 250, completionTokens: 18, totalTokens: 268 },
      toolCalls: [{ name: "check_stock", arguments: { fruit: "apple" }, status: "success" }],
    });
    // The model saw the tool's real result.
    const toolMessage = server.requests.at(-1)?.body.messages.find((message) => message.role === "tool");
    expect(JSON.parse(String(toolMessage?.content))).toEqual({
      status: "success",
      data: { fruit: "apple", units: 12 },
    });
  });

  it("regression: the runId and sessionId it prints are what glassbox trace takes; each run without --session is a new session", async () => {
    server.setScript([{ content: "first" }, { content: "second" }]);
    const first = JSON.parse((await glassbox(["run", "one", "--json"])).stdout) as { runId: string; sessionId: string };
    const second = JSON.parse((await glassbox(["run", "two", "--json"])).stdout) as {
      runId: string;
      sessionId: string;
    };
    expect(first.sessionId).toMatch(/^cli:[0-9a-f-]{36}$/);
    expect(second.sessionId).not.toBe(first.sessionId);
    const traced = JSON.parse((await glassbox(["trace", first.runId, "--json"])).stdout) as Array<{
      run: { runId: string; sessionId: string; userId: string };
    }>;
    expect(traced.map(({ run }) => run)).toMatchObject([
      { runId: first.runId, sessionId: first.sessionId, userId: "cli" },
    ]);
    const session = JSON.parse((await glassbox(["trace", second.sessionId, "--json"])).stdout) as Array<{
      run: { runId: string };
    }>;
    expect(session.map(({ run }) => run.runId)).toEqual([second.runId]);
  });

  it("with GLASSBOX_PUBLIC_URL it prints the run's address in the trace viewer (traceUrl), naming that run", async () => {
    server.setScript([{ content: "linked" }]);
    const env = { GLASSBOX_PUBLIC_URL: "https://glassbox.example.com/" };
    const ran = JSON.parse((await glassbox(["run", "link me", "--session", "linked", "--json"], env)).stdout) as {
      runId: string;
      sessionId: string;
      traceUrl: string;
    };
    expect(ran.sessionId).toBe("cli:linked");
    expect(ran.traceUrl).toBe(`https://glassbox.example.com/trace#session=cli%3Alinked&run=${ran.runId}`);
    const traced = JSON.parse((await glassbox(["trace", ran.runId, "--json"])).stdout) as Array<{
      run: { output: string };
    }>;
    expect(traced.map(({ run }) => run.output)).toEqual(["linked"]);
  });

  it("regression: a configuration error is still one JSON object on stdout, with the error's code and sentence", async () => {
    const { code, stdout, stderr } = await glassbox(["run", "hello", "--json"], { OPENAI_BASE_URL: "" });
    expect(code).toBe(2);
    expect(stderr).toBe("");
    expect(stdout.trim().split("\n")).toHaveLength(1);
    expect(JSON.parse(stdout)).toEqual({
      error: {
        code: "configuration",
        message:
          "No model is configured: set OPENAI_API_KEY, or OPENAI_BASE_URL for a local server such as Ollama or vLLM.",
      },
    });
    const usage = await glassbox(["run", "--json"]);
    expect(JSON.parse(usage.stdout)).toEqual({
      error: { code: "usage", message: 'Give the task in quotes: npx glassbox run "what is 2+2?"' },
    });
  });

  it("a failed run's JSON carries the error's code", async () => {
    const { code, stdout } = await glassbox(["run", "hello", "--json"], {
      OPENAI_BASE_URL: "http://127.0.0.1:9/v1",
      GLASSBOX_MODEL_TIMEOUT_MS: "2000",
    });
    expect(code).toBe(1);
    expect(JSON.parse(stdout)).toMatchObject({
      stopReason: "error",
      error: { code: "model_unreachable" },
      sessionId: expect.stringMatching(/^cli:/),
    });
  });

  it("--approve no denies a dangerous call and reports the error in toolCalls", async () => {
    server.setScript([
      { toolCalls: [{ name: "restock", arguments: '{"fruit":"pear","units":5}' }] },
      { content: "I could not restock." },
    ]);
    const { code, stdout } = await glassbox([
      "run",
      "Restock pears",
      "--tools",
      "examples/tools.mjs",
      "--approve",
      "no",
      "--json",
    ]);
    expect(code).toBe(0);
    const result = JSON.parse(stdout);
    expect(result.toolCalls).toEqual([
      {
        name: "restock",
        arguments: { fruit: "pear", units: 5 },
        status: "error",
        error: { type: "denied", message: expect.stringContaining("denied by --approve no") },
      },
    ]);
  });

  it("--approve ask without a terminal denies instead of hanging", async () => {
    server.setScript([
      { toolCalls: [{ name: "cancel_order", arguments: '{"order_id":"20240410003","reason":"test"}' }] },
      { content: "Not cancelled." },
    ]);
    const { stdout } = await glassbox(["run", "Cancel my order", "--json"]);
    const result = JSON.parse(stdout);
    expect(result.toolCalls[0].error).toMatchObject({
      type: "denied",
      message: expect.stringContaining("no terminal"),
    });
  });

  it("--approve yes runs a dangerous built-in tool against the demo shop", async () => {
    server.setScript([
      { toolCalls: [{ name: "cancel_order", arguments: '{"order_id":"20240410003","reason":"changed my mind"}' }] },
      { content: "Cancelled." },
    ]);
    const { stdout } = await glassbox(["run", "Cancel order 20240410003", "--approve", "yes", "--json"]);
    const result = JSON.parse(stdout);
    expect(result.toolCalls[0]).toMatchObject({ name: "cancel_order", status: "success" });
    server.setScript([
      { toolCalls: [{ name: "get_order_status", arguments: '{"order_id":"20240410003"}' }] },
      { content: "done" },
    ]);
    await glassbox(["run", "status?", "--json"]);
    const status = server.requests.at(-1)?.body.messages.find((message) => message.role === "tool");
    expect(JSON.parse(String(status?.content)).data.status).toBe("cancelled");
  });

  it("--max-steps bounds the run and ends with a stage conclusion", async () => {
    let n = 0;
    server.setScript((request) =>
      request.tool_choice === "none"
        ? { content: "Stage conclusion: counted twice." }
        : { toolCalls: [{ name: "calculator", arguments: JSON.stringify({ expression: `${++n}+1` }) }] },
    );
    const { stdout } = await glassbox(["run", "count forever", "--max-steps", "2", "--json"]);
    const result = JSON.parse(stdout);
    expect(result).toMatchObject({ stopReason: "max_steps", output: "Stage conclusion: counted twice.", steps: 3 });
    expect(result.toolCalls).toHaveLength(2);
  });
});

describe("glassbox, for a person", () => {
  it("streams the answer to stdout and tool activity to stderr", async () => {
    server.setScript([
      { toolCalls: [{ name: "calculator", arguments: '{"expression":"6*7"}' }] },
      { content: "The answer is 42." },
    ]);
    const { code, stdout, stderr } = await glassbox(["run", "6 times 7?"]);
    expect(code).toBe(0);
    expect(stdout.trim()).toBe("The answer is 42.");
    expect(stderr).toContain("calling calculator(expression: 6*7)");
    // Piped: no colour, no status line, no session note (that is for a terminal).
    expect(stdout + stderr).not.toContain("\u001b");
    expect(stderr).not.toContain("thinking");
    expect(stderr).not.toContain("session cli:");
  });

  it("says in one sentence what to set when no model is configured, and makes no database", async () => {
    const path = join(mkdtempSync(join(tmpdir(), "glassbox-cli-no-model-")), "glassbox.db");
    const { code, stderr } = await glassbox(["run", "hello"], { OPENAI_BASE_URL: "", GLASSBOX_DB: path });
    expect(code).toBe(2);
    expect(stderr.trim()).toBe(
      "glassbox: No model is configured: set OPENAI_API_KEY, or OPENAI_BASE_URL for a local server such as Ollama or vLLM.",
    );
    expect(existsSync(path)).toBe(false);
  });

  it("says what is wrong with a bad option value", async () => {
    const { code, stderr } = await glassbox(["run", "hello", "--approve", "maybe"]);
    expect(code).toBe(2);
    expect(stderr).toContain("--approve takes yes, no or ask.");
  });

  it("reports a model that cannot be reached as an error with exit code 1", async () => {
    const { code, stderr } = await glassbox(["run", "hello"], {
      OPENAI_BASE_URL: "http://127.0.0.1:9/v1",
      GLASSBOX_MODEL_TIMEOUT_MS: "2000",
    });
    expect(code).toBe(1);
    expect(stderr).toContain("I can't reach the model server at http://127.0.0.1:9/v1; check OPENAI_BASE_URL");
  });

  it("rejects a tool module that does not export an array", async () => {
    const { code, stderr } = await glassbox(["tools", "--tools", "package.json"]);
    expect(code).toBe(2);
    expect(stderr).toContain("must default-export an array of tool definitions");
  });
});

describe("glassbox tools", () => {
  it("lists built-in and module tools with their schemas", async () => {
    const { code, stdout } = await glassbox(["tools", "--tools", "examples/tools.mjs", "--json"]);
    expect(code).toBe(0);
    const tools = JSON.parse(stdout) as Array<{
      name: string;
      from: string;
      dangerous: boolean;
      parameters: { type: string };
    }>;
    // The demo is on in this file (GLASSBOX_DEMO): built-ins, then the demo shop, then the module.
    expect(tools.map((tool) => [tool.name, tool.from])).toEqual([
      ["current_time", "built-in"],
      ["calculator", "built-in"],
      ["remember", "built-in"],
      ["forget", "built-in"],
      ["schedule_run", "built-in"],
      ["list_schedules", "built-in"],
      ["pause_schedule", "built-in"],
      ["delete_schedule", "built-in"],
      ["get_order_status", "demo shop"],
      ["cancel_order", "demo shop"],
      ["send_message", "demo shop"],
      ["check_stock", "module examples/tools.mjs"],
      ["restock", "module examples/tools.mjs"],
    ]);
    expect(tools.find((tool) => tool.name === "restock")?.dangerous).toBe(true);
    expect(tools.every((tool) => tool.parameters.type === "object")).toBe(true);
  });

  it("says who decides a tool's calls where the tool says it", async () => {
    const folder = mkdtempSync(join(tmpdir(), "glassbox-tools-policy-"));
    const module = join(folder, "refunds.mjs");
    writeFileSync(
      module,
      `export default [{
        name: "refund", description: "Refunds an order.", dangerous: true,
        approvers: ["U0FIN1", "U0FIN2"], approvalsNeeded: 2, requesterMayApprove: false,
        parameters: { type: "object", properties: { order: { type: "string" } }, required: ["order"] },
        handler: async () => "refunded",
      }];\n`,
    );
    const json = await glassbox(["tools", "--tools", module, "--json"], { GLASSBOX_DEMO: "false" });
    expect(JSON.parse(json.stdout).find((tool: { name: string }) => tool.name === "refund")).toMatchObject({
      approval: "always",
      approvers: ["U0FIN1", "U0FIN2"],
      approvalsNeeded: 2,
      requesterMayApprove: false,
    });
    const table = await glassbox(["tools", "--tools", module], { GLASSBOX_DEMO: "false", NO_COLOR: "1" });
    expect(table.stdout).toContain(
      "  needs 2 approvals from different people\n  the requester may not approve it\n  approvers: U0FIN1, U0FIN2\n",
    );
    expect(table.stdout).not.toContain("Channel settings");
    const withChannels = await glassbox(["tools", "--tools", module], {
      GLASSBOX_DEMO: "false",
      GLASSBOX_CHANNELS: "examples/channels.yaml",
    });
    expect(withChannels.stdout).toContain("Channel settings (GLASSBOX_CHANNELS) may allow fewer of these");
  });

  it("GLASSBOX_TOOLS adds modules too", async () => {
    const { stdout } = await glassbox(["tools", "--json"], { GLASSBOX_TOOLS: "examples/tools.mjs" });
    expect(JSON.parse(stdout).map((tool: { name: string }) => tool.name)).toContain("check_stock");
  });
});

describe("glassbox sessions and reset", () => {
  it("continues a --session across commands, lists it, and starts it afresh after reset", async () => {
    const seen: string[][] = [];
    server.setScript((request) => {
      seen.push(
        request.messages.filter((message) => message.role === "user").map((message) => String(message.content)),
      );
      return { content: `answer ${seen.length}` };
    });
    await glassbox(["run", "my name is Ada", "--session", "team-42", "--json"]);
    await glassbox(["run", "what is my name?", "--session", "team-42", "--json"]);
    expect(seen.at(-1)).toEqual(["my name is Ada", "what is my name?"]);

    const { stdout } = await glassbox(["sessions", "--json"]);
    const session = (JSON.parse(stdout) as Array<{ id: string; messageCount: number; runCount: number }>).find(
      (entry) => entry.id === "cli:team-42",
    );
    expect(session).toMatchObject({ messageCount: 4, runCount: 2 });

    const reset = await glassbox(["reset", "--session", "team-42"]);
    expect(reset.code).toBe(0);
    expect(reset.stdout).toContain("starts afresh");
    await glassbox(["run", "hello again", "--session", "team-42", "--json"]);
    expect(seen.at(-1)).toEqual(["hello again"]);
  });

  it("says when there is no such session to reset", async () => {
    const { code, stdout } = await glassbox(["reset", "--session", "never-used"]);
    expect(code).toBe(1);
    expect(stdout).toContain("There is no session cli:never-used");
  });
});

describe("glassbox erase", () => {
  it("erases a conversation and prints what it removed per table; the others stay, and nothing of it is left in the file", async () => {
    const env = { GLASSBOX_DB: join(mkdtempSync(join(tmpdir(), "glassbox-cli-erase-")), "glassbox.db") };
    server.setScript((request) => ({ content: `noted ${String(request.messages.at(-1)?.content).slice(0, 40)}` }));
    await glassbox(["run", "my card is QUOKKA-4242", "--session", "leaving", "--json"], env);
    await glassbox(["run", "my dog is called WOMBAT", "--session", "staying", "--json"], env);
    const erased = await glassbox(["erase", "--session", "leaving"], env);
    expect(erased.code).toBe(0);
    expect(erased.stdout).toMatch(/^Erased conversation cli:leaving:$/m);
    expect(erased.stdout).toMatch(/^ {2}messages +2$/m);
    expect(erased.stdout).toMatch(/^ {2}runs +1$/m);
    expect(erased.stdout).toMatch(/^ {2}sessions +1$/m);
    // On SQLite the queue is the memory of the process that runs the turns, out of this command's reach.
    expect(erased.stdout).toContain("Turns still waiting in a running glassbox's memory are dropped when they come up");
    const listed = JSON.parse((await glassbox(["sessions", "--json"], env)).stdout) as Array<{ id: string }>;
    expect(listed.map((session) => session.id)).toEqual(["cli:staying"]);
    const file = readFileSync(env.GLASSBOX_DB).toString("latin1");
    expect(file).not.toContain("QUOKKA-4242");
    expect(file).toContain("WOMBAT");
    const json = JSON.parse((await glassbox(["erase", "--session", "leaving", "--json"], env)).stdout) as {
      removed: Record<string, number>;
    };
    expect(Object.values(json.removed).every((count) => count === 0)).toBe(true); // nothing left to remove
    const twice = await glassbox(["erase", "--session", "a", "--user", "b"], env);
    expect(twice.code).toBe(2);
    expect(twice.stderr).toContain("Name one thing to erase");
  });
});

describe("glassbox trace and usage", () => {
  it("shows where a tool threw (file and line) and what the model layer got back and read, never the stack to the model", async () => {
    server.setScript([
      { toolCalls: [{ name: "check_stock", arguments: '{"fruit":"kiwi"}' }] },
      { content: '<tool_call>{"name": "check_stock", "arguments": {"fruit": "plum"}}</tool_call>' },
      { content: "No kiwis; 7 plums." },
    ]);
    const before = server.requests.length;
    await glassbox(["run", "Kiwis? Plums?", "--tools", "examples/tools.mjs", "--session", "thrown", "--json"]);
    // The model read the error envelope alone (in the run's second request; the server also served earlier tests).
    const toolMessage = server.requests[before + 1]?.body.messages.find((message) => message.role === "tool");
    expect(JSON.parse(String(toolMessage?.content))).toEqual({
      status: "error",
      error: { type: "execution_error", message: "Unknown fruit 'kiwi'; known: apple, pear, plum" },
    });
    expect(String(toolMessage?.content)).not.toContain("tools.mjs");

    const { code, stdout } = await glassbox(["trace", "thrown"]);
    expect(code).toBe(0);
    const lines = stdout.split("\n");
    const thrownAt = lines.findIndex((line) => line.trim() === "thrown at:");
    expect(lines[thrownAt - 1]).toContain("→ check_stock(fruit: kiwi)  execution_error: Unknown fruit 'kiwi'");
    expect(lines[thrownAt + 1]).toMatch(/^ {8}at .*examples\/tools\.mjs:22:\d+\)?$/);
    const recovered = lines.findIndex((line) => line.includes("model layer: recovered 1 tool call (check_stock)"));
    expect(lines.slice(recovered + 1, recovered + 3)).toEqual([
      '      came back: <tool_call>{"name": "check_stock", "arguments": {"fruit": "plum"}}</tool_call>',
      '      read as: [{"name":"check_stock","arguments":"{\\"fruit\\":\\"plum\\"}"}]',
    ]);

    const json = JSON.parse((await glassbox(["trace", "thrown", "--json"])).stdout) as Array<{
      steps: Array<{ toolCalls: Array<{ errorStack?: string }>; modelExchanges?: unknown[] }>;
    }>;
    expect(json[0]?.steps[0]?.toolCalls[0]?.errorStack).toMatch(/examples\/tools\.mjs:22:\d+/);
    expect(json[0]?.steps[1]?.modelExchanges).toHaveLength(1);
  });

  it("prints a run's timeline step by step, with tokens, tool calls and cost", async () => {
    server.setScript([
      {
        toolCalls: [{ name: "check_stock", arguments: "{fruit: 'apple'}" }],
        usage: { promptTokens: 1000, completionTokens: 20 },
      },
      { content: "There are 12 apples.", usage: { promptTokens: 1200, completionTokens: 10 } },
    ]);
    await glassbox(["run", "How many apples?", "--tools", "examples/tools.mjs", "--session", "traced", "--json"], {
      LLM_MODEL: "gpt-4o-mini",
    });
    const { code, stdout } = await glassbox(["trace", "traced"]);
    expect(code).toBe(0);
    expect(stdout).toContain("(final) by cli");
    expect(stdout).toMatch(
      /step 1 {2}gpt-4o-mini {2}sent \d+ messages \(~[\d,]+ tokens\) {2}prompt 1,000 \/ completion 20 tokens/,
    );
    expect(stdout).toContain("→ check_stock(fruit: apple)  success");
    expect(stdout).toContain("repaired: repaired malformed JSON");
    expect(stdout).toMatch(/step 2 .*prompt 1,200 \/ completion 10 tokens/);
    // gpt-4o-mini: $0.15 per million prompt tokens, $0.60 per million completion tokens.
    expect(stdout).toContain(
      `total: 2 steps, prompt 2,200 / completion 30 tokens, $${((2200 * 0.15 + 30 * 0.6) / 1e6).toFixed(4)}`,
    );

    const json = JSON.parse((await glassbox(["trace", "traced", "--json"])).stdout) as Array<{
      steps: Array<{ cost: number | null }>;
    }>;
    expect(json[0]?.steps.map((step) => step.cost)).toEqual([
      (1000 * 0.15 + 20 * 0.6) / 1e6,
      (1200 * 0.15 + 10 * 0.6) / 1e6,
    ]);
  });

  it("shows an unknown model's cost as unknown, never as zero", async () => {
    server.setScript([{ content: "hi", usage: { promptTokens: 10, completionTokens: 2 } }]);
    await glassbox(["run", "hello", "--session", "unpriced", "--json"], { LLM_MODEL: "my-local-model" });
    const { stdout } = await glassbox(["trace", "unpriced"]);
    expect(stdout).toContain("cost unknown");
    expect(stdout).not.toContain("$0.0000");
    const usage = JSON.parse((await glassbox(["usage", "--json"])).stdout) as {
      bySession: Array<{ key: string; cost: number | null; runs: number }>;
    };
    expect(usage.bySession.find((total) => total.key === "cli:unpriced")).toMatchObject({ runs: 1, cost: null });
  });

  it("says when there is nothing to trace", async () => {
    const { code, stdout } = await glassbox(["trace", "run_missing"]);
    expect(code).toBe(1);
    expect(stdout).toContain("There is no run or session run_missing");
  });
});

describe("glassbox and its database file (GLASSBOX_DB)", () => {
  const undo: Array<() => void> = [];
  afterEach(() => {
    for (const step of undo.splice(0)) step();
  });
  const fresh = () => join(mkdtempSync(join(tmpdir(), "glassbox-cli-db-")), "glassbox.db");

  it("regression: sessions, usage, trace and reset never create a database; where there is none they say nothing is recorded there yet", async () => {
    const path = fresh();
    const env = { GLASSBOX_DB: path };
    expect(await glassbox(["sessions"], env)).toEqual({
      code: 0,
      stdout: `No conversations are recorded yet in ${path} (GLASSBOX_DB).\n`,
      stderr: "",
    });
    expect(await glassbox(["sessions", "--json"], env)).toMatchObject({ code: 0, stdout: "[]\n" });
    expect(await glassbox(["usage"], env)).toMatchObject({
      code: 0,
      stdout: `No conversations are recorded yet in ${path} (GLASSBOX_DB).\n`,
    });
    expect(JSON.parse((await glassbox(["usage", "--json"], env)).stdout)).toEqual({
      byDay: [],
      byUser: [],
      bySession: [],
    });
    expect(await glassbox(["trace", "run_x"], env)).toMatchObject({
      code: 1,
      stdout: `There is no run or session run_x: no conversations are recorded yet in ${path} (GLASSBOX_DB).\n`,
    });
    expect(await glassbox(["reset", "--session", "x"], env)).toMatchObject({
      code: 1,
      stdout: expect.stringContaining("There is no session cli:x"),
    });
    expect(existsSync(path)).toBe(false);
  });

  // /sys takes no new file from anyone, root included: permission bits would say it does.
  it.skipIf(!existsSync("/sys"))(
    "regression: on a path that can never be written (/sys/x.db) the reading commands say so as well as that nothing is recorded",
    async () => {
      const env = { GLASSBOX_DB: "/sys/x.db" };
      const nothing =
        "No conversations are recorded in /sys/x.db (GLASSBOX_DB), and none can be: the folder /sys may not be written";
      const sessions = await glassbox(["sessions"], env);
      expect(sessions.code).toBe(0);
      expect(sessions.stdout).toMatch(
        /^No conversations are recorded in \/sys\/x\.db \(GLASSBOX_DB\), and none can be: the folder \/sys may not be written \(E[A-Z]+\); set GLASSBOX_DB to a file in a folder glassbox may write\.\n$/,
      );
      expect((await glassbox(["usage"], env)).stdout).toContain(nothing);
      expect(await glassbox(["trace", "run_x"], env)).toMatchObject({
        code: 1,
        stdout: expect.stringContaining(`There is no run or session run_x: no conversations are recorded in /sys/x.db`),
      });
      // A path that can be written keeps the plain sentence (the other tests), and the check leaves nothing behind.
      const folder = mkdtempSync(join(tmpdir(), "glassbox-cli-writable-"));
      expect((await glassbox(["sessions"], { GLASSBOX_DB: join(folder, "new/glassbox.db") })).stdout).toBe(
        `No conversations are recorded yet in ${join(folder, "new/glassbox.db")} (GLASSBOX_DB).\n`,
      );
      expect(readdirSync(folder)).toEqual([]);
    },
  );

  it("regression: in an empty folder, the reading commands and tools create nothing (no ./data/glassbox.db) and say there is nothing yet", async () => {
    const folder = mkdtempSync(join(tmpdir(), "glassbox-cli-empty-"));
    const env = { GLASSBOX_DB: "" }; // the default, data/glassbox.db in the folder
    const nothing = "No conversations are recorded yet in data/glassbox.db (GLASSBOX_DB).\n";
    expect(await glassbox(["sessions"], env, folder)).toEqual({ code: 0, stdout: nothing, stderr: "" });
    expect(await glassbox(["usage"], env, folder)).toEqual({ code: 0, stdout: nothing, stderr: "" });
    expect(await glassbox(["trace", "run_x"], env, folder)).toMatchObject({
      code: 1,
      stdout: expect.stringContaining("no conversations are recorded yet in data/glassbox.db"),
    });
    expect(await glassbox(["reset", "--session", "x"], env, folder)).toMatchObject({ code: 1 });
    expect((await glassbox(["tools", "--json"], { ...env, GLASSBOX_DEMO: "false" }, folder)).code).toBe(0);
    // Listing the demo shop's tools opens no shop (regression: data/shop.db appeared).
    const demo = await glassbox(["tools", "--json"], { ...env, GLASSBOX_DEMO: "true", GLASSBOX_SHOP_DB: "" }, folder);
    expect(demo.code).toBe(0);
    expect(demo.stdout).toContain("cancel_order");
    expect(readdirSync(folder)).toEqual([]);
  });

  it("regression: a damaged database, or a file that is not one, is refused in one sentence naming it and GLASSBOX_DB (exit 2)", async () => {
    const damaged = fresh();
    writeDamagedDatabase(damaged);
    const sentence = new RegExp(
      `^The database ${damaged} is damaged \\(SQLite's quick_check: [^\\n]+GLASSBOX_DB[^\\n]+$`,
    );
    for (const args of [["sessions"], ["run", "hello"]]) {
      const outcome = await glassbox(args, { GLASSBOX_DB: damaged });
      expect(outcome.code, args.join(" ")).toBe(2);
      expect(outcome.stdout, args.join(" ")).toBe("");
      expect(outcome.stderr.replace(/^glassbox: /, "").replace(/\n$/, ""), args.join(" ")).toMatch(sentence);
    }
    // With --json the sentence is the one JSON object on stdout.
    for (const args of [
      ["usage", "--json"],
      ["run", "hello", "--json"],
    ]) {
      const outcome = await glassbox(args, { GLASSBOX_DB: damaged });
      expect(outcome.code, args.join(" ")).toBe(2);
      expect(outcome.stderr, args.join(" ")).toBe("");
      const { error } = JSON.parse(outcome.stdout) as { error: { code: string; message: string } };
      expect(error.code, args.join(" ")).toBe("configuration");
      expect(error.message, args.join(" ")).toMatch(sentence);
    }
    const notes = fresh();
    writeNotADatabase(notes);
    expect(await glassbox(["trace", "anything"], { GLASSBOX_DB: notes })).toEqual({
      code: 2,
      stdout: "",
      stderr: `glassbox: ${notes} is not a SQLite database; set GLASSBOX_DB to glassbox's database file, or move this one aside and glassbox starts a new one there.\n`,
    });
  });

  it("regression: a database that cannot be opened, or not written, says so naming GLASSBOX_DB; the reading commands still read one they may not write", async () => {
    const directory = join(fresh(), "..");
    writeFileSync(join(directory, "a-file"), "x");
    const underFile = join(directory, "a-file", "glassbox.db");
    const cannotOpen = `glassbox: The database ${underFile} cannot be opened: a part of its path is a file, not a folder; set GLASSBOX_DB to a file in a folder glassbox may write.\n`;
    expect(await glassbox(["sessions"], { GLASSBOX_DB: underFile })).toEqual({
      code: 2,
      stdout: "",
      stderr: cannotOpen,
    });
    expect(await glassbox(["run", "hello"], { GLASSBOX_DB: underFile })).toMatchObject({ code: 2, stderr: cannotOpen });

    const readOnly = fresh();
    server.setScript([{ content: "hi" }]);
    expect((await glassbox(["run", "hello", "--session", "kept", "--json"], { GLASSBOX_DB: readOnly })).code).toBe(0);
    undo.push(makeImmutable(readOnly));
    expect(await glassbox(["run", "hello again", "--session", "kept"], { GLASSBOX_DB: readOnly })).toEqual({
      code: 2,
      stdout: "",
      stderr: `glassbox: The database ${readOnly} cannot be written (the file or its folder is read-only); make it writable, or set GLASSBOX_DB to a file in a folder glassbox may write.\n`,
    });
    const listed = await glassbox(["sessions", "--json"], { GLASSBOX_DB: readOnly });
    expect(listed.code).toBe(0);
    expect(
      (JSON.parse(listed.stdout) as Array<{ id: string; runCount: number }>).map(({ id, runCount }) => ({
        id,
        runCount,
      })),
    ).toEqual([{ id: "cli:kept", runCount: 1 }]);
    expect((await glassbox(["trace", "kept"], { GLASSBOX_DB: readOnly })).code).toBe(0);
  });
});
