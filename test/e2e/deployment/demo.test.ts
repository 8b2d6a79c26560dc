// `npm run demo` as a real child process (src/demo.ts through tsx), driven over its HTTP API, with
// the command line as another child process pointed at the model address the demo prints. Each
// demo gets a TMPDIR of its own, so what it leaves behind can be seen.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { demoReply } from "../../../src/demo-script.js";
import type { ChatCompletionRequestBody } from "../../../src/testing/scripted-model-server.js";

const WAIT = { timeout: 20_000, interval: 50 };
const folder = mkdtempSync(join(tmpdir(), "glassbox-demo-test-"));
const running = new Set<ChildProcess>();
afterEach(() => {
  for (const child of running) child.kill("SIGKILL");
  running.clear();
});
afterAll(() => rmSync(folder, { recursive: true, force: true }));

// A tool of the person's own, with a result no built-in rule could make up.
const OWN_TOOLS = `export default [
  {
    name: "check_stock",
    description: "Units of a fruit in stock.",
    parameters: { type: "object", properties: { fruit: { type: "string" } }, required: ["fruit"], additionalProperties: false },
    handler: async ({ fruit }) => ({ fruit, units: 41, counted: "by my own tool" }),
  },
  {
    name: "restock",
    description: "Orders more of a fruit.",
    dangerous: true,
    parameters: { type: "object", properties: { fruit: { type: "string" }, units: { type: "integer", minimum: 1 } }, required: ["fruit", "units"] },
    handler: async ({ fruit, units }) => ({ fruit, ordered: units }),
  },
];
`;

interface Demo {
  child: ChildProcess;
  webUrl: string;
  modelUrl: string;
  /** The variables the demo prints for the command line, read from its `export` line. */
  cliEnv: Record<string, string>;
  stdout: () => string;
  exited: Promise<number | null>;
}

function environment(extra: Record<string, string>): Record<string, string> {
  return { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? folder, GLASSBOX_WEB_PORT: "0", ...extra };
}

/** A fresh TMPDIR for one demo, to see whether it leaves a folder there. */
function freshTmp(): string {
  return mkdtempSync(join(folder, "tmp-"));
}

const demoFolders = (tmp: string) => readdirSync(tmp).filter((name) => name.startsWith("glassbox-demo-"));

async function startDemo(args: string[], env: Record<string, string>): Promise<Demo> {
  const child = spawn(process.execPath, ["--import", "tsx", "src/demo.ts", ...args], {
    env: environment(env),
    stdio: ["ignore", "pipe", "pipe"],
  });
  running.add(child);
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  await expect.poll(() => stdout.includes("\n  npx glassbox") || child.exitCode !== null, WAIT).toBe(true);
  if (child.exitCode !== null) throw new Error(`the demo stopped: ${stderr}`);
  const webUrl = /chat at (\S+) /.exec(stdout)?.[1] ?? "";
  const modelUrl = /The scripted model answers at (\S+)\. /.exec(stdout)?.[1] ?? "";
  const exportLine = /^ {2}export (.+)$/m.exec(stdout)?.[1] ?? "";
  const cliEnv = Object.fromEntries(
    exportLine.split(" ").map((pair) => [pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1)]),
  );
  return { child, webUrl, modelUrl, cliEnv, stdout: () => stdout, exited };
}

/** Starts a run through the demo's HTTP API and waits for its end. */
async function runThroughApi(demo: Demo, session: string, input: string): Promise<{ status: string; output: string }> {
  const started = await fetch(`${demo.webUrl}api/runs`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ session, input, userId: "visitor" }),
  });
  expect(started.status).toBe(202);
  const { runId } = (await started.json()) as { runId: string };
  let run = { status: "", output: "", done: false };
  await expect
    .poll(async () => {
      run = (await (await fetch(`${demo.webUrl}api/runs/${runId}`)).json()) as typeof run;
      return run.done;
    }, WAIT)
    .toBe(true);
  return run;
}

/** The quick start's cancel through the demo's HTTP API, approved by the one who asked; the answer. */
async function cancelThroughApi(demo: Demo, session: string): Promise<string> {
  const started = await fetch(`${demo.webUrl}api/runs`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ session, input: "cancel order 20240410003", userId: "visitor" }),
  });
  const { runId } = (await started.json()) as { runId: string };
  const read = async () =>
    (await (await fetch(`${demo.webUrl}api/runs/${runId}`)).json()) as {
      done: boolean;
      output: string;
      approvals: Array<{ id: string; status: string }>;
    };
  let approval = "";
  await expect
    .poll(async () => {
      approval = (await read()).approvals.find((one) => one.status === "pending")?.id ?? "";
      return approval;
    }, WAIT)
    .not.toBe("");
  const decided = await fetch(`${demo.webUrl}api/approvals/${approval}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ approved: true, userId: "visitor" }),
  });
  expect(decided.status).toBe(200);
  let output = "";
  await expect
    .poll(async () => {
      const run = await read();
      output = run.output;
      return run.done;
    }, WAIT)
    .toBe(true);
  return output;
}

function glassbox(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ["--import", "tsx", "src/cli.ts", ...args],
      { env: environment(env) },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

function listenOnSomePort(): Promise<{ server: Server; port: number }> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      resolve({ server, port: typeof address === "object" && address ? address.port : 0 });
    });
  });
}

describe("npm run demo, when it cannot start", () => {
  it("regression: with its port taken it says so, exits non-zero instead of hanging, and leaves no temporary folder", async () => {
    const { server, port } = await listenOnSomePort();
    const tmp = freshTmp();
    try {
      const outcome = await new Promise<{ code: number | null; stderr: string; signal: NodeJS.Signals | null }>(
        (resolve) => {
          // The time limit only keeps a hanging demo from hanging the suite; it is not what is tested.
          const child = execFile(
            process.execPath,
            ["--import", "tsx", "src/demo.ts"],
            { env: environment({ TMPDIR: tmp, GLASSBOX_WEB_PORT: String(port) }), timeout: 25_000 },
            (error, _stdout, stderr) => resolve({ code: child.exitCode, signal: error?.signal ?? null, stderr }),
          );
        },
      );
      expect(outcome.signal).toBeNull();
      expect(outcome.code).toBe(1);
      expect(outcome.stderr.trim()).toBe(
        `glassbox demo: Port ${port} on 127.0.0.1 is in use; set GLASSBOX_WEB_PORT to another port.`,
      );
      expect(demoFolders(tmp)).toEqual([]);
    } finally {
      server.close();
    }
  });

  it("a tools module that does not load stops it the same way, with the module's sentence", async () => {
    const tmp = freshTmp();
    const outcome = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = execFile(
        process.execPath,
        ["--import", "tsx", "src/demo.ts", "--tools", join(folder, "missing.mjs")],
        { env: environment({ TMPDIR: tmp }), timeout: 25_000 },
        (_error, _stdout, stderr) => resolve({ code: child.exitCode, stderr }),
      );
    });
    expect(outcome.code).toBe(1);
    expect(outcome.stderr).toContain(
      `glassbox demo: Could not load the tool module '${join(folder, "missing.mjs")}': there is no file`,
    );
    expect(demoFolders(tmp)).toEqual([]);
  });
});

describe("npm run demo, with the person's own tools", () => {
  it("the scripted model calls a tool of GLASSBOX_TOOLS that the message names, with arguments from the words and the schema", async () => {
    const tools = join(folder, "own-tools.mjs");
    writeFileSync(tools, OWN_TOOLS);
    const tmp = freshTmp();
    const demo = await startDemo([], { TMPDIR: tmp, GLASSBOX_TOOLS: tools });
    const run = await runThroughApi(demo, "own", "check_stock apple");
    expect(run).toMatchObject({
      status: "final",
      output: 'check_stock answered: {"fruit":"apple","units":41,"counted":"by my own tool"}',
    });
    const hello = await runThroughApi(demo, "hello", "hello");
    expect(hello.output).toContain("Name one of your tools (check_stock, restock)");
  });

  it("prints the model's address and the command line's settings; the command line then runs a tool through it, and the data goes at exit", async () => {
    const tools = join(folder, "own-tools-cli.mjs");
    writeFileSync(tools, OWN_TOOLS);
    const tmp = freshTmp();
    const demo = await startDemo(["--tools", tools], { TMPDIR: tmp });
    expect(demo.modelUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
    expect(demo.cliEnv).toMatchObject({
      OPENAI_BASE_URL: demo.modelUrl,
      LLM_MODEL: "scripted-model",
      GLASSBOX_DEMO: "true",
      GLASSBOX_TOOLS: tools,
    });
    const database = demo.cliEnv.GLASSBOX_DB ?? "";
    expect(database.startsWith(join(tmp, "glassbox-demo-"))).toBe(true);

    const cli = await glassbox(["run", "restock pear 5", "--approve", "yes", "--json"], demo.cliEnv);
    expect(cli.code).toBe(0);
    expect(JSON.parse(cli.stdout)).toMatchObject({
      stopReason: "final",
      toolCalls: [{ name: "restock", arguments: { fruit: "pear", units: 5 }, status: "success" }],
    });
    // The shop's tools too, over the demo's own shop file.
    const shop = JSON.parse(
      (await glassbox(["run", "What is the status of order 20240410003?", "--json"], demo.cliEnv)).stdout,
    ) as { toolCalls: unknown[] };
    expect(shop.toolCalls).toMatchObject([{ name: "get_order_status", status: "success" }]);

    demo.child.kill("SIGTERM");
    expect(await demo.exited).toBe(0);
    expect(existsSync(database)).toBe(false);
    expect(demoFolders(tmp)).toEqual([]);
  });
});

describe("npm run demo --db", () => {
  it("keeps the conversations in that file, where glassbox sessions and trace read them after the demo stopped", async () => {
    const tmp = freshTmp();
    const database = join(folder, "kept.db");
    const demo = await startDemo(["--db", database], { TMPDIR: tmp });
    expect(demo.stdout()).toContain(`Conversations are kept in ${database};`);
    const run = await runThroughApi(demo, "kept", "What is the status of order 20240410003?");
    expect(run.status).toBe("final");
    demo.child.kill("SIGTERM");
    expect(await demo.exited).toBe(0);
    expect(demoFolders(tmp)).toEqual([]);

    const sessions = await glassbox(["sessions", "--json"], { GLASSBOX_DB: database });
    expect(JSON.parse(sessions.stdout)).toContainEqual(expect.objectContaining({ id: "web:kept" }));
    const trace = await glassbox(["trace", "web:kept"], { GLASSBOX_DB: database });
    expect(trace.code).toBe(0);
    expect(trace.stdout).toContain("get_order_status");
    expect(existsSync(join(folder, "kept-shop.db"))).toBe(true);
  });

  it("GLASSBOX_DB keeps them the same way", async () => {
    const database = join(folder, "from-env.db");
    const demo = await startDemo([], { TMPDIR: freshTmp(), GLASSBOX_DB: database });
    await runThroughApi(demo, "env", "What time is it?");
    demo.child.kill("SIGTERM");
    expect(await demo.exited).toBe(0);
    const sessions = await glassbox(["sessions", "--json"], { GLASSBOX_DB: database });
    expect(JSON.parse(sessions.stdout)).toContainEqual(expect.objectContaining({ id: "web:env" }));
  });
});

describe("the demo's shop", () => {
  const cancelled = "Done: order 20240410003 is now **cancelled**";

  it("regression: starts from its seed at every demo run, so the quick start's cancel works the second time too (--db keeps the conversations, not the shop's changes)", async () => {
    const database = join(folder, "twice.db");
    for (const time of [1, 2]) {
      const demo = await startDemo(["--db", database], { TMPDIR: freshTmp() });
      expect(await cancelThroughApi(demo, `twice-${time}`)).toContain(cancelled);
      demo.child.kill("SIGTERM");
      expect(await demo.exited).toBe(0);
    }
    expect(existsSync(join(folder, "twice-shop.db"))).toBe(true);
  });

  it("an earlier demo's export line pasted into this terminal is that demo's: a fresh shop and folder again, gone at exit", async () => {
    const tmp = freshTmp();
    const first = await startDemo([], { TMPDIR: tmp });
    expect(await cancelThroughApi(first, "first")).toContain(cancelled);
    first.child.kill("SIGTERM");
    expect(await first.exited).toBe(0);
    const { GLASSBOX_DB = "", GLASSBOX_SHOP_DB = "" } = first.cliEnv;
    for (const round of ["second", "third"]) {
      const again = await startDemo([], { TMPDIR: tmp, GLASSBOX_DB, GLASSBOX_SHOP_DB });
      expect(again.cliEnv.GLASSBOX_SHOP_DB).not.toBe(GLASSBOX_SHOP_DB);
      expect(await cancelThroughApi(again, round)).toContain(cancelled);
      again.child.kill("SIGTERM");
      expect(await again.exited).toBe(0);
      expect(demoFolders(tmp)).toEqual([]);
    }
  });

  it("a GLASSBOX_SHOP_DB of the person's own is kept as it is: an order cancelled stays cancelled", async () => {
    const shop = join(folder, "my-shop.db");
    const first = await startDemo([], { TMPDIR: freshTmp(), GLASSBOX_SHOP_DB: shop });
    expect(await cancelThroughApi(first, "mine-1")).toContain(cancelled);
    first.child.kill("SIGTERM");
    expect(await first.exited).toBe(0);
    const second = await startDemo([], { TMPDIR: freshTmp(), GLASSBOX_SHOP_DB: shop });
    expect(await cancelThroughApi(second, "mine-2")).toContain("cancel_order did not work");
    second.child.kill("SIGTERM");
    expect(await second.exited).toBe(0);
  });
});

describe("the demo's scripted model", () => {
  const request = (input: string, tools: string[]): ChatCompletionRequestBody => ({
    model: "scripted-model",
    messages: [
      { role: "system", content: "You are glassbox." },
      { role: "user", content: input },
    ],
    tools: tools.map((name) => ({
      type: "function",
      function: { name, description: name, parameters: { type: "object", properties: {} } },
    })),
  });

  it("regression: calls only tools the request offers (the command line without the demo shop gets no get_order_status)", () => {
    expect(
      demoReply(request("What is the status of order 20240410003?", ["get_order_status", "current_time"])),
    ).toEqual({
      toolCalls: [{ name: "get_order_status", arguments: '{"order_id":"20240410003"}' }],
    });
    const withoutShop = demoReply(request("What is the status of order 20240410003?", ["current_time", "calculator"]));
    expect(withoutShop).not.toHaveProperty("toolCalls");
    expect(withoutShop).toEqual({ content: expect.stringContaining("What time is it?") });
  });

  it("regression: a call a person did not approve is told in one plain sentence, with their reason", () => {
    const denied = (message: string): ChatCompletionRequestBody => ({
      model: "scripted-model",
      messages: [
        { role: "user", content: "cancel order 20240410003" },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "call_1", type: "function", function: { name: "cancel_order", arguments: "{}" } }],
        },
        {
          role: "tool",
          tool_call_id: "call_1",
          content: JSON.stringify({ status: "error", error: { type: "denied", message } }),
        },
      ],
    });
    const tail = "; it was not run. Do not retry it; tell the user.";
    expect(demoReply(denied(`A person did not approve this call (not today)${tail}`))).toEqual({
      content: "I did not run cancel_order, because a person did not approve it (not today).",
    });
    expect(demoReply(denied(`A person did not approve this call${tail}`))).toEqual({
      content: "I did not run cancel_order, because a person did not approve it.",
    });
  });
});
