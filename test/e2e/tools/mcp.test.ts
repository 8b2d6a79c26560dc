/**
 * MCP servers as tools, against real MCP server processes: the stdio and Streamable HTTP fixture
 * (test/e2e/fixtures/mcp-server.ts) and @modelcontextprotocol/server-everything. Calls go through the
 * real registry and executor, and once through runAgent with the scripted model. No timing
 * assertions: waits poll the status until it says what the test needs.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { createOpenAIModel } from "../../../src/agent/llm/index.js";
import { runAgent } from "../../../src/agent/loop.js";
import { loadConfig } from "../../../src/config.js";
import { createMemory } from "../../../src/agent/memory.js";
import { createTokenCounter } from "../../../src/agent/tokens.js";
import { createTraceRecorder } from "../../../src/agent/trace.js";
import { createAgentConfig } from "../../../src/setup.js";
import { openStorePort } from "../../../src/store/index.js";
import { STORED_RESULT_CHARS } from "../../../src/tools/call-outcome.js";
import { TARGETS } from "../helpers/store-targets.js";
import { startScriptedModelServer } from "../../../src/testing/scripted-model-server.js";
import { executeToolCalls, newToolRunState, type ExecutorOptions } from "../../../src/tools/executor.js";
import {
  connectMcpServers,
  type McpConnectOptions,
  type McpLogger,
  type McpServers,
  type McpServerStatus,
} from "../../../src/tools/mcp.js";
import { parseMcpServers, type McpServerConfig } from "../../../src/tools/mcp-config.js";
import { createToolRegistry } from "../../../src/tools/registry.js";
import type { AnyTool, ApprovalRequest, ToolCallRecord } from "../../../src/tools/types.js";

const ROOT = fileURLToPath(new URL("../../..", import.meta.url));
const FIXTURE = join(ROOT, "test/e2e/fixtures/mcp-server.ts");

// ---- helpers ---------------------------------------------------------------------------------

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function tempDir(): string {
  const directory = mkdtempSync(join(tmpdir(), "glassbox-mcp-"));
  cleanups.push(() => rmSync(directory, { recursive: true, force: true }));
  return directory;
}

/** The fixture over stdio, with a call log and a hold file the test can create to keep it down. */
function fixture(extra: Partial<McpServerConfig> = {}) {
  const directory = tempDir();
  const logPath = join(directory, "calls.jsonl");
  const holdPath = join(directory, "hold");
  const config: McpServerConfig = {
    command: process.execPath,
    args: ["--import", "tsx", FIXTURE],
    env: { MCP_FIXTURE_LOG: logPath, MCP_FIXTURE_HOLD: holdPath },
    cwd: ROOT,
    ...extra,
  };
  return { config, logPath, holdPath, entries: () => logEntries(logPath) };
}

type LogEntry = {
  pid: number;
  event: "start" | "call" | "request";
  tool?: string;
  arguments?: Record<string, unknown>;
  team?: string;
};

function logEntries(path: string): LogEntry[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, "utf8")
    .trim()
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as LogEntry);
}

const calledTools = (entries: LogEntry[]) =>
  entries.filter((entry) => entry.event === "call").map((entry) => entry.tool);

function recordingLog() {
  const lines: Array<{ level: string; message: string; fields: Record<string, unknown> }> = [];
  const at = (level: string) => (fields: Record<string, unknown>, message: string) =>
    void lines.push({ level, message, fields });
  const log: McpLogger = { debug: () => {}, info: at("info"), warn: at("warn") };
  return { log, lines, warnings: () => lines.filter((line) => line.level === "warn").map((line) => line.message) };
}

async function connect(servers: Record<string, McpServerConfig>, options: Partial<McpConnectOptions> = {}) {
  const recorded = recordingLog();
  const mcp = await connectMcpServers(servers, {
    log: recorded.log,
    reconnectInitialDelayMs: 50,
    reconnectMaxDelayMs: 400,
    ...options,
  });
  cleanups.push(() => mcp.close());
  return { mcp, ...recorded };
}

function toolNamed(mcp: McpServers, name: string): AnyTool {
  const tool = mcp.tools.find((candidate) => candidate.name === name);
  if (!tool) throw new Error(`no tool ${name}; have ${mcp.tools.map((candidate) => candidate.name).join(", ")}`);
  return tool;
}

/** Runs calls of one model response through the real registry and executor. */
async function execute(
  tools: AnyTool[],
  calls: Array<[name: string, args: string | Record<string, unknown>]>,
  options: Partial<ExecutorOptions> = {},
) {
  const registry = createToolRegistry(tools);
  const toolCalls = calls.map(([name, args], index) => ({
    id: `call_${index}`,
    type: "function" as const,
    function: { name, arguments: typeof args === "string" ? args : JSON.stringify(args) },
  }));
  const outcome = await executeToolCalls(
    toolCalls,
    { registry, ...options },
    { runId: "run_1", sessionId: "session_1", userId: "user_1", state: newToolRunState() },
  );
  return outcome.records;
}

async function executeOne(
  tools: AnyTool[],
  name: string,
  args: string | Record<string, unknown>,
  options: Partial<ExecutorOptions> = {},
): Promise<ToolCallRecord> {
  const [record] = await execute(tools, [[name, args]], options);
  if (!record) throw new Error("no record");
  return record;
}

function errorOf(record: ToolCallRecord): { type: string; message: string } {
  if (record.envelope.status !== "error") throw new Error(`expected an error, got ${record.content}`);
  return record.envelope.error;
}

function dataOf(record: ToolCallRecord): unknown {
  if (record.envelope.status !== "success") throw new Error(`expected success, got ${record.content}`);
  return record.envelope.data;
}

/** Polls until the server's status satisfies `ready` (the test timeout bounds the wait). */
async function until(
  mcp: McpServers,
  server: string,
  ready: (status: McpServerStatus) => boolean,
): Promise<McpServerStatus> {
  for (;;) {
    const status = mcp.status().find((candidate) => candidate.server === server);
    if (status && ready(status)) return status;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

async function untilDead(pid: number): Promise<void> {
  for (;;) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** The fixture over Streamable HTTP as a child process; resolves with its URL once it listens. */
async function startHttpFixture(logPath: string, port = 0): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, ["--import", "tsx", FIXTURE, "--http", String(port)], {
    cwd: ROOT,
    env: { ...process.env, MCP_FIXTURE_LOG: logPath },
    stdio: ["ignore", "pipe", "inherit"],
  });
  cleanups.push(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });
  const url = await new Promise<string>((resolve, reject) => {
    let output = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      const match = /listening (\S+)/.exec(output);
      if (match?.[1]) resolve(match[1]);
    });
    child.once("exit", (code) => reject(new Error(`the HTTP fixture exited with ${code}: ${output}`)));
  });
  return { url, child };
}

// ---- configuration -----------------------------------------------------------------------------

describe("GLASSBOX_MCP_SERVERS", () => {
  it("reads stdio and Streamable HTTP servers", () => {
    const servers = parseMcpServers(
      JSON.stringify({
        files: {
          command: "node",
          args: ["server.js"],
          env: { ROOT: "/srv" },
          dangerous: ["delete_file"],
          timeoutMs: 5000,
        },
        search: { url: "http://127.0.0.1:9000/mcp", headers: { Authorization: "Bearer abc" } },
      }),
    );
    expect(servers).toEqual({
      files: {
        command: "node",
        args: ["server.js"],
        env: { ROOT: "/srv" },
        dangerous: ["delete_file"],
        timeoutMs: 5000,
      },
      search: { url: "http://127.0.0.1:9000/mcp", headers: { Authorization: "Bearer abc" } },
    });
    expect(parseMcpServers(undefined)).toEqual({});
    expect(parseMcpServers("  ")).toEqual({});
  });

  it.each([
    ["{not json", /GLASSBOX_MCP_SERVERS is not valid JSON/],
    ["[1]", /must be a JSON object of servers by name/],
    [`{"my files": {"command": "node"}}`, /server 'my files' has a name that is not 1-32 letters/],
    [`{"files": "node server.js"}`, /server 'files' must be an object with "command"/],
    [`{"files": {}}`, /server 'files' needs exactly one of "command" \(stdio\) or "url"/],
    [`{"files": {"command": "node", "url": "http://x"}}`, /server 'files' needs exactly one of/],
    [`{"files": {"command": ""}}`, /server 'files' has "command" that is not a non-empty string/],
    [`{"files": {"command": "node", "args": "server.js"}}`, /server 'files' has "args" that is not a list of strings/],
    [`{"files": {"command": "node", "env": {"A": 1}}}`, /server 'files' has "env" that is not an object of strings/],
    [`{"files": {"command": "node", "headers": {}}}`, /server 'files' has "headers", which only an HTTP server/],
    [`{"search": {"url": "ftp://example.com"}}`, /server 'search' has "url" that is not an http\(s\) URL/],
    [`{"search": {"url": "http://x", "args": []}}`, /server 'search' has "args", which only a stdio server/],
    [`{"files": {"command": "node", "dangerus": ["x"]}}`, /server 'files' has an unknown setting 'dangerus'/],
    [
      `{"files": {"command": "node", "dangerous": "x"}}`,
      /server 'files' has "dangerous" that is not a list of tool names/,
    ],
    [`{"files": {"command": "node", "timeoutMs": -1}}`, /server 'files' has "timeoutMs" that is not a positive number/],
  ])("rejects %s in one sentence naming what is wrong", (json, message) => {
    expect(() => parseMcpServers(json)).toThrow(message);
    try {
      loadConfig({ GLASSBOX_MCP_SERVERS: json });
      expect.unreachable();
    } catch (error) {
      expect(error).toMatchObject({ code: "configuration", message: expect.stringMatching(message) as unknown });
    }
  });

  it("is part of the configuration", () => {
    expect(loadConfig({}).mcpServers).toEqual({});
    expect(loadConfig({ GLASSBOX_MCP_SERVERS: `{"a": {"url": "http://127.0.0.1:1/mcp"}}` }).mcpServers).toEqual({
      a: { url: "http://127.0.0.1:1/mcp" },
    });
  });
});

// ---- a stdio server ------------------------------------------------------------------------------

describe("an MCP server over stdio", () => {
  it("becomes glassbox tools: every page listed, names prefixed and sanitised, schemas ajv-strict, dangerous ones marked", async () => {
    const server = fixture({ dangerous: ["add", "no_such_tool"] });
    const { mcp, warnings } = await connect({ fixture: server.config });

    const names = mcp.tools.map((tool) => tool.name);
    // The fixture pages its list four at a time: tools from the last page are here too.
    expect(names).toEqual([
      "fixture__echo",
      "fixture__add",
      "fixture__delete_everything",
      "fixture__fail",
      "fixture__slow",
      "fixture__crash",
      "fixture__hide",
      "fixture__lookup",
      "fixture__stats_get",
      expect.stringMatching(/^fixture__summarise_quarterly_[a-z_]+_[0-9a-f]{8}$/),
      "fixture__bulk",
    ]);
    for (const name of names) expect(name).toMatch(/^[a-zA-Z0-9_-]{1,64}$/);
    expect(toolNamed(mcp, "fixture__echo").description).toBe("fixture: Echoes the text back.");
    // "$schema" (a 2020-12 URI), the unknown keyword "x-ui" and the unknown format "ulid" are dropped; the rest is kept.
    expect(toolNamed(mcp, "fixture__echo").parameters).toEqual({
      type: "object",
      properties: { text: { type: "string" } },
      required: ["text"],
      additionalProperties: false,
    });
    expect(toolNamed(mcp, "fixture__lookup").parameters).toEqual({
      type: "object",
      properties: { id: { type: "string" } },
      required: ["id"],
    });
    expect(toolNamed(mcp, "fixture__add").parameters).toEqual({
      type: "object",
      properties: { a: { type: "number" }, b: { type: "number" } },
      required: ["a", "b"],
    });

    const dangerous = mcp.tools.filter((tool) => tool.dangerous).map((tool) => tool.name);
    expect(dangerous).toEqual(["fixture__add", "fixture__delete_everything"]); // add: listed in the configuration

    expect(warnings()).toEqual(
      expect.arrayContaining([
        expect.stringMatching(
          /MCP tool 'broken' of server 'fixture' is left out: its input schema does not compile \(Invalid regular expression/,
        ),
        expect.stringMatching(/MCP tool 'background_job' of server 'fixture' is left out: it only runs as a task/),
        expect.stringMatching(/MCP server 'fixture' has no tool 'no_such_tool' \(listed in "dangerous"\)/),
      ]),
    );
    expect(() => createToolRegistry(mcp.tools)).not.toThrow();
    expect(mcp.status()).toEqual([
      expect.objectContaining({
        server: "fixture",
        transport: "stdio",
        state: "connected",
        tools: names,
        reconnects: 0,
        offered: expect.arrayContaining(["broken", "background_job", "stats.get"]) as unknown,
      }),
    ]);
  });

  it("runs through the real executor: arguments validated and coerced before the server sees them, results as envelopes", async () => {
    const server = fixture();
    const { mcp } = await connect({ fixture: server.config });

    const added = await executeOne(mcp.tools, "fixture__add", { a: "3", b: 4 });
    expect(dataOf(added)).toEqual({ sum: 7 }); // structured content
    expect(added.repairs).toEqual(['coerced a from "3" to 3']);
    expect(added.content).toBe('{"status":"success","data":{"sum":7}}');

    expect(dataOf(await executeOne(mcp.tools, "fixture__echo", { text: "hello" }))).toBe("hello");
    expect(dataOf(await executeOne(mcp.tools, "fixture__lookup", { id: "01J" }))).toBe("found 01J\n[image: image/png]");
    expect(dataOf(await executeOne(mcp.tools, "fixture__stats_get", {}))).toBe("called stats.get");

    const missing = await executeOne(mcp.tools, "fixture__add", { a: 1 });
    expect(errorOf(missing)).toEqual({
      type: "invalid_arguments",
      message: expect.stringContaining("missing required property 'b'") as unknown,
    });
    const extra = await executeOne(mcp.tools, "fixture__echo", { text: "hi", loud: true });
    expect(errorOf(extra).type).toBe("invalid_arguments");

    // The server received exactly the valid calls, with the coerced arguments.
    const calls = server.entries().filter((entry) => entry.event === "call");
    expect(calls.map(({ tool, arguments: args }) => ({ tool, args }))).toEqual([
      { tool: "add", args: { a: 3, b: 4 } },
      { tool: "echo", args: { text: "hello" } },
      { tool: "lookup", args: { id: "01J" } },
      { tool: "stats.get", args: {} },
    ]);
  });

  it("reports a tool's own error as execution_error and a slow call as timeout, and stays usable", async () => {
    const server = fixture();
    const { mcp } = await connect({ fixture: server.config });

    expect(errorOf(await executeOne(mcp.tools, "fixture__fail", {}))).toEqual({
      type: "execution_error",
      message: "the disk is on fire",
    });
    const slow = await executeOne(mcp.tools, "fixture__slow", { ms: 60_000 }, { defaultTimeoutMs: 300 });
    expect(errorOf(slow)).toEqual({
      type: "timeout",
      message: expect.stringContaining("'fixture__slow' did not finish within 0.3 s") as unknown,
    });
    expect(dataOf(await executeOne(mcp.tools, "fixture__add", { a: 1, b: 1 }))).toEqual({ sum: 2 });
  });

  it("takes a server's timeoutMs as its tools' time limit", async () => {
    const server = fixture({ timeoutMs: 250 });
    const { mcp } = await connect({ fixture: server.config });
    expect(toolNamed(mcp, "fixture__slow").timeoutMs).toBe(250);
    expect(errorOf(await executeOne(mcp.tools, "fixture__slow", { ms: 60_000 }))).toMatchObject({ type: "timeout" });
  });

  it("never sends a destructive call without a person's approval", async () => {
    const server = fixture();
    const { mcp } = await connect({ fixture: server.config });

    const denied = await executeOne(mcp.tools, "fixture__delete_everything", { confirm: true });
    expect(errorOf(denied).type).toBe("denied");
    expect(denied.dangerous).toBe(true);
    expect(calledTools(server.entries())).toEqual([]);

    const asked: ApprovalRequest[] = [];
    const approved = await executeOne(
      mcp.tools,
      "fixture__delete_everything",
      { confirm: true },
      {
        approve: async (request) => {
          asked.push(request);
          return { approved: true, by: "tester", argumentsHash: request.argumentsHash };
        },
      },
    );
    expect(dataOf(approved)).toBe("deleted everything");
    expect(asked.map((request) => [request.toolName, request.arguments])).toEqual([
      ["fixture__delete_everything", { confirm: true }],
    ]);
    expect(calledTools(server.entries())).toEqual(["delete_everything"]);
  });

  it("reconnects a server that died; meanwhile its tools report execution_error, then the same names work again", async () => {
    const server = fixture();
    const { mcp, lines } = await connect({ fixture: server.config });
    const [firstStart] = server.entries();

    // Keep the server down once it dies, so "meanwhile" lasts until the test says so.
    writeFileSync(server.holdPath, "");
    const crashed = await executeOne(mcp.tools, "fixture__crash", {});
    expect(errorOf(crashed)).toEqual({
      type: "execution_error",
      message: expect.stringMatching(
        /^MCP server 'fixture' disconnected before 'crash' answered .* may or may not have taken effect/,
      ) as unknown,
    });

    const meanwhile = await executeOne(mcp.tools, "fixture__echo", { text: "anyone?" });
    expect(errorOf(meanwhile)).toEqual({
      type: "execution_error",
      message: "MCP server 'fixture' is not connected (reconnecting); try again later or use another way.",
    });
    // Attempts to restart it fail while it is held down, with its own last words in the status.
    const down = await until(mcp, "fixture", (status) => status.lastError?.includes("held down by the test") === true);
    expect(down.state).toBe("reconnecting");

    rmSync(server.holdPath);
    const back = await until(mcp, "fixture", (status) => status.state === "connected");
    expect(back).toMatchObject({ reconnects: 1, tools: expect.arrayContaining(["fixture__echo"]) as unknown });
    expect(dataOf(await executeOne(mcp.tools, "fixture__echo", { text: "back" }))).toBe("back");

    const starts = server.entries().filter((entry) => entry.event === "start");
    expect(starts).toHaveLength(2);
    expect(starts[1]?.pid).not.toBe(firstStart?.pid);
    expect(lines.map((line) => line.message)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^MCP server 'fixture' disconnected/),
        "MCP server 'fixture' reconnected",
      ]),
    );
  });

  it("re-reads the tool list when the server says it changed; a tool it no longer offers reports execution_error", async () => {
    const server = fixture();
    const { mcp } = await connect({ fixture: server.config });

    expect(dataOf(await executeOne(mcp.tools, "fixture__hide", { tool: "echo" }))).toBe("hid echo");
    await until(mcp, "fixture", (status) => !status.offered.includes("echo"));
    expect(errorOf(await executeOne(mcp.tools, "fixture__echo", { text: "hi" }))).toEqual({
      type: "execution_error",
      message: "MCP server 'fixture' no longer offers the tool 'echo'; use another way.",
    });
    expect(dataOf(await executeOne(mcp.tools, "fixture__add", { a: 2, b: 2 }))).toEqual({ sum: 4 });
  });

  it("leaves out a server it cannot reach at startup, without failing the others", async () => {
    const held = fixture();
    writeFileSync(held.holdPath, "");
    const healthy = fixture();
    const { mcp, warnings } = await connect({
      missing: { command: join(tempDir(), "no-such-server") },
      held: held.config,
      fixture: healthy.config,
    });

    expect(mcp.tools.every((tool) => tool.name.startsWith("fixture__"))).toBe(true);
    expect(mcp.tools).toHaveLength(11);
    const status = Object.fromEntries(mcp.status().map((entry) => [entry.server, entry]));
    expect(status.missing).toMatchObject({
      state: "failed",
      tools: [],
      lastError: expect.stringContaining("ENOENT") as unknown,
    });
    expect(status.held).toMatchObject({
      state: "failed",
      tools: [],
      lastError: expect.stringContaining("held down by the test") as unknown,
    });
    expect(status.fixture?.state).toBe("connected");
    expect(warnings()).toEqual(
      expect.arrayContaining([
        expect.stringMatching(
          /^MCP server 'missing' could not be reached at startup .*its tools are left out until glassbox restarts$/,
        ),
        expect.stringMatching(/^MCP server 'held' could not be reached at startup/),
      ]),
    );
  });

  it("close() ends the server process and stops its tools", async () => {
    const server = fixture();
    const { mcp } = await connect({ fixture: server.config });
    const [start] = server.entries();
    await mcp.close();

    if (start) await untilDead(start.pid);
    expect(mcp.status()[0]?.state).toBe("closed");
    expect(errorOf(await executeOne(mcp.tools, "fixture__echo", { text: "hi" })).message).toBe(
      "MCP server 'fixture' is not connected (closed); try again later or use another way.",
    );
  });
});

// ---- Streamable HTTP ------------------------------------------------------------------------------

describe("an MCP server over Streamable HTTP", () => {
  it("connects by URL, and reconnects after the server restarts", async () => {
    const logPath = join(tempDir(), "calls.jsonl");
    const first = await startHttpFixture(logPath);
    const { mcp } = await connect({ remote: { url: first.url, headers: { "x-team": "glassbox" } } });
    expect(mcp.status()[0]).toMatchObject({ transport: "http", state: "connected" });
    expect(dataOf(await executeOne(mcp.tools, "remote__add", { a: 20, b: 22 }))).toEqual({ sum: 42 });
    const requests = logEntries(logPath).filter((entry) => entry.event === "request");
    expect(requests.length).toBeGreaterThan(0);
    expect(requests.every((entry) => entry.team === "glassbox")).toBe(true); // the configured headers go with every request

    first.child.kill("SIGKILL");
    await new Promise((resolve) => first.child.once("exit", resolve));
    expect(errorOf(await executeOne(mcp.tools, "remote__echo", { text: "hi" }))).toMatchObject({
      type: "execution_error",
      message: expect.stringMatching(
        /^MCP server 'remote' (disconnected before 'echo' answered|is not connected)/,
      ) as unknown,
    });
    await until(mcp, "remote", (status) => status.state === "reconnecting");

    await startHttpFixture(logPath, Number(new URL(first.url).port));
    await until(mcp, "remote", (status) => status.state === "connected");
    expect(dataOf(await executeOne(mcp.tools, "remote__echo", { text: "again" }))).toBe("again");
  });
});

// ---- the whole agent -------------------------------------------------------------------------------

describe("MCP tools in a run", () => {
  it("runAgent calls an MCP tool the scripted model asks for and answers with its result", async () => {
    const server = fixture();
    const { mcp } = await connect({ fixture: server.config });
    const model = await startScriptedModelServer({
      script: [{ toolCalls: [{ name: "fixture__add", arguments: '{"a": 2, "b": "3"}' }] }, { content: "2 + 3 = 5." }],
    });
    cleanups.push(() => model.close());

    const result = await runAgent(
      {
        model: createOpenAIModel({ baseURL: model.url, model: "gpt-4o-mini", apiKey: "test-key", maxRetries: 0 }),
        tools: createToolRegistry(mcp.tools),
      },
      { input: "What is 2 + 3?" },
    );
    expect(result).toMatchObject({
      stopReason: "final",
      output: "2 + 3 = 5.",
      toolCalls: [{ name: "fixture__add", arguments: { a: 2, b: 3 }, status: "success" }],
    });
    const toolMessage = model.requests[1]?.body.messages.find((message) => message.role === "tool");
    expect(toolMessage?.content).toBe('{"status":"success","data":{"sum":5}}');
    const advertised = (model.requests[0]?.body.tools ?? []) as Array<{ function: { name: string } }>;
    expect(advertised.map((tool) => tool.function.name)).toContain("fixture__add");
    expect(calledTools(server.entries())).toEqual(["add"]);
  });

  it("createAgentConfig registers the tools of GLASSBOX_MCP_SERVERS beside the built-in ones", async () => {
    const server = fixture();
    const directory = tempDir();
    const config = loadConfig({
      OPENAI_BASE_URL: "http://127.0.0.1:9/v1",
      OPENAI_API_KEY: "test-key",
      GLASSBOX_DB: join(directory, "glassbox.db"),
      GLASSBOX_SHOP_DB: join(directory, "shop.db"),
      GLASSBOX_DEMO: "true",
      GLASSBOX_MCP_SERVERS: JSON.stringify({ fixture: server.config }),
    });
    const { pino } = await import("pino");
    const agent = await createAgentConfig(config, pino({ level: "silent" }));
    cleanups.push(() => agent.port.close());
    cleanups.push(() => agent.mcp.close());

    expect(agent.tools.names()).toEqual(
      expect.arrayContaining(["calculator", "fixture__echo", "fixture__delete_everything"]),
    );
    expect(agent.tools.get("fixture__delete_everything")?.definition.dangerous).toBe(true);
    expect(agent.mcp.status()[0]?.state).toBe("connected");
  });
});

// ---- a huge result, kept bounded --------------------------------------------------------------------

for (const target of TARGETS) {
  describe(`an MCP tool's huge result, kept bounded: ${target.name}`, () => {
    it("stored and streamed MCP results are bounded to 64 KB with their size, text and structured alike (finding 5)", async () => {
      const HUGE = 2_000_000;
      const ROWS = 50_000;
      const server = fixture({ timeoutMs: 30_000 }); // a slow machine still moves 2 MB through stdio in time
      const { mcp } = await connect({ fixture: server.config });
      const model = await startScriptedModelServer({
        script: (body) => {
          const last = body.messages.at(-1);
          if (last?.role === "tool") return { content: "read both" };
          return {
            toolCalls: [
              { id: "call_text", name: "fixture__bulk", arguments: JSON.stringify({ chars: HUGE }) },
              { id: "call_rows", name: "fixture__bulk", arguments: JSON.stringify({ rows: ROWS }) },
            ],
          };
        },
      });
      cleanups.push(() => model.close());
      const database = await target.fresh();
      const port = await openStorePort(database.options);
      cleanups.push(async () => {
        await port.close();
        await database.drop();
      });
      const chat = createOpenAIModel({ baseURL: model.url, model: "gpt-4o-mini", apiKey: "test-key", maxRetries: 0 });
      const memory = createMemory({
        store: port,
        model: chat,
        counter: await createTokenCounter("o200k_base"),
        budgetTokens: 4_000,
      });
      const heard: ToolCallRecord[] = [];
      const result = await runAgent(
        {
          model: chat,
          tools: createToolRegistry(mcp.tools),
          memory,
          trace: createTraceRecorder(port, { estimateTokens: memory.estimate }),
        },
        {
          input: "dump it",
          runId: "run_mcp_huge",
          sessionId: "web:mcp-huge",
          userId: "U1",
          onEvent: (event) => {
            if (event.type === "tool_end") heard.push(event.record);
          },
        },
      );
      expect(result).toMatchObject({ stopReason: "final", output: "read both" });
      expect(calledTools(server.entries())).toEqual(["bulk", "bulk"]);

      const [step] = await port.steps("run_mcp_huge");
      const stored = step?.toolCalls ?? [];
      expect(stored.map((record) => record.id).sort()).toEqual(["call_rows", "call_text"]);
      for (const record of [...stored, ...heard]) {
        expect(JSON.stringify(record.envelope).length).toBeLessThanOrEqual(STORED_RESULT_CHARS);
        expect(record.storedCutChars).toBeGreaterThan(0);
        expect(record.content.length).toBeLessThanOrEqual(4_000); // the model's view
      }
      const text = stored.find((record) => record.id === "call_text");
      // The kept text is the result's start and a marker with the original size (matched, not diffed: it is 64 KB).
      const kept = text?.envelope.status === "success" ? String(text.envelope.data) : "";
      expect(/^y+ …\[cut \d+ of 2000000 characters\]$/.test(kept)).toBe(true);
      expect(text?.storedCutChars).toBeGreaterThan(HUGE - STORED_RESULT_CHARS);
      const rows = stored.find((record) => record.id === "call_rows");
      expect(rows?.storedCutChars).toBeGreaterThan(ROWS * 20 - STORED_RESULT_CHARS); // each row is 20+ characters of JSON
      // The conversation keeps the model's view, not the result.
      const history = await port.sessionHistory("web:mcp-huge");
      expect(Math.max(...history.messages.map((kept) => JSON.stringify(kept.message).length))).toBeLessThan(10_000);
    });
  });
}

// ---- the reference server ----------------------------------------------------------------------------

describe("@modelcontextprotocol/server-everything", () => {
  it("connects over stdio (its bin from node_modules, no npx) and its tools run", async () => {
    const require = createRequire(import.meta.url);
    const manifestPath = require.resolve("@modelcontextprotocol/server-everything/package.json");
    const manifest = JSON.parse(readFileSync(manifestPath, "utf8")) as { bin: Record<string, string> };
    const bin = join(dirname(manifestPath), manifest.bin["mcp-server-everything"] ?? "dist/index.js");
    const { mcp, warnings } = await connect({ everything: { command: process.execPath, args: [bin, "stdio"] } });

    expect(mcp.status()[0]?.state).toBe("connected");
    const names = mcp.tools.map((tool) => tool.name);
    expect(names).toEqual(
      expect.arrayContaining(["everything__echo", "everything__get-sum", "everything__get-tiny-image"]),
    );
    // Its task-only tool cannot be called with tools/call, so it is left out with a warning.
    expect(names).not.toContain("everything__simulate-research-query");
    expect(warnings()).toEqual(
      expect.arrayContaining([expect.stringMatching(/'simulate-research-query' of server 'everything' is left out/)]),
    );

    expect(dataOf(await executeOne(mcp.tools, "everything__echo", { message: "hi" }))).toBe("Echo: hi");
    expect(dataOf(await executeOne(mcp.tools, "everything__get-sum", { a: 2, b: "3" }))).toBe(
      "The sum of 2 and 3 is 5.",
    );
    expect(dataOf(await executeOne(mcp.tools, "everything__get-tiny-image", {}))).toMatch(/\[image: image\/png\]/);
    expect(errorOf(await executeOne(mcp.tools, "everything__get-sum", { a: 2 })).type).toBe("invalid_arguments");
  });
});
