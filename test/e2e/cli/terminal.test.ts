import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startScriptedModelServer, type ScriptedModelServer } from "../../../src/testing/scripted-model-server.js";

// The real command line in a real pseudo-terminal (python3's pty module, test/e2e/cli/run-in-terminal.py),
// as a person sees it, against the scripted model server.
let server: ScriptedModelServer;
const dataDir = mkdtempSync(join(tmpdir(), "glassbox-cli-terminal-"));
const CLI = fileURLToPath(new URL("../../../src/cli.ts", import.meta.url));
const TERMINAL = fileURLToPath(new URL("./run-in-terminal.py", import.meta.url));
const TSX = import.meta.resolve("tsx");

beforeAll(async () => {
  server = await startScriptedModelServer();
});
afterAll(async () => {
  await server.close();
});

const MARKDOWN = "# Apples\n\nThere are **12** apples and `3` pears:\n\n- red\n- green";
const SGR = /\u001b\[[0-9;]*m/;

/**
 * What stays on the screen once the status line is gone: its drawings (each ends erasing the line)
 * taken out, and readline's cursor moves.
 */
const screen = (shown: string) =>
  shown
    .replace(/\r[^\r\n]*?\u001b\[K/g, "")
    .replace(/\u001b\[\d*[GJ]/g, "")
    .replace(/\r+\n/g, "\n");

/** What the terminal showed (the pty's CR LF read as LF) and the exit code. `typed` is typed in. */
function inTerminal(
  args: string[],
  env: Record<string, string> = {},
  typed = "",
  typeAfter?: string,
): Promise<{ code: number; shown: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      "python3",
      [TERMINAL, ...(typeAfter ? ["--type-after", typeAfter] : []), process.execPath, "--import", TSX, CLI, ...args],
      {
        env: {
          PATH: process.env.PATH ?? "",
          TERM: "xterm-256color",
          OPENAI_BASE_URL: server.url,
          LLM_MODEL: "scripted-model",
          GLASSBOX_DB: join(dataDir, "glassbox.db"),
          ...env,
        },
      },
    );
    let shown = "";
    child.stdout.on("data", (chunk: Buffer) => (shown += chunk.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code: code ?? 1, shown: shown.replace(/\r+\n/g, "\n") }));
    child.stdin.end(typed);
  });
}

describe("glassbox run on a terminal", () => {
  it("shows a status line while the model works, tool activity in colour, and the Markdown answer rendered", async () => {
    server.setScript([
      { toolCalls: [{ name: "calculator", arguments: '{"expression":"6*2"}' }], delayMs: 300 },
      { content: MARKDOWN, delayMs: 300 },
    ]);
    const { code, shown } = await inTerminal(["run", "how many apples?"]);
    expect(code).toBe(0);
    expect(shown).toContain("\r\u001b[36m⠋\u001b[39m \u001b[2mthinking…");
    expect(shown).toContain("running calculator…");
    expect(screen(shown)).toContain(
      "\u001b[2m· calling calculator(expression: 6*2)\u001b[22m\n  calculator \u001b[32mok\u001b[39m",
    );
    // The answer: a heading, bold, code and a list, with no Markdown marks left.
    expect(screen(shown)).toContain(" ms)\u001b[22m\n\u001b[1m\u001b[4mApples\u001b[24m\u001b[22m\n\n");
    expect(shown).toContain("There are \u001b[1m12\u001b[22m apples and \u001b[36m3\u001b[39m pears:");
    expect(shown).toContain("• red\n• green\n");
    expect(shown).not.toContain("**");
    expect(shown).not.toContain("# Apples");
    // After it: the session, how to continue it, and how to see its steps, as whole commands (npx: the
    // command line runs from the clone, not from a global install).
    expect(shown).toMatch(
      /\u001b\[2mcontinue this conversation: npx glassbox run --session [0-9a-f-]{36} "\.\.\."\u001b\[22m\n\u001b\[2msee its steps: npx glassbox trace run_[0-9a-f-]{36}\u001b\[22m\n/,
    );
    // They name this run and its session.
    const session = /--session ([0-9a-f-]{36})/.exec(shown)?.[1];
    const runId = /npx glassbox trace (run_[0-9a-f-]{36})/.exec(shown)?.[1] ?? "";
    const traced = JSON.parse((await inTerminal(["trace", runId, "--json"])).shown) as Array<{
      run: { sessionId: string; input: string };
    }>;
    expect(traced[0]?.run).toMatchObject({ sessionId: `cli:${session}`, input: "how many apples?" });
  });

  it("regression: NO_COLOR keeps every colour and style code out, and the Markdown still reads as text", async () => {
    server.setScript([
      { toolCalls: [{ name: "calculator", arguments: '{"expression":"6*2"}' }], delayMs: 300 },
      { content: MARKDOWN },
    ]);
    const { code, shown } = await inTerminal(["run", "how many apples?"], { NO_COLOR: "1" });
    expect(code).toBe(0);
    expect(shown).not.toMatch(SGR);
    expect(shown).toContain("thinking…"); // a status line is not colour
    expect(shown).toContain("· calling calculator(expression: 6*2)");
    expect(screen(shown)).toContain(" ms)\nApples\n\n");
    expect(shown).toContain("There are 12 apples and `3` pears:");
    expect(shown).toContain("• red\n• green\n");
  });

  it("regression: escape codes in the model's answer are not passed to the terminal", async () => {
    server.setScript([{ content: "safe \u001b]0;owned\u0007text \u001b[31mred\u001b[0m done" }]);
    const { shown } = await inTerminal(["run", "hi"], { NO_COLOR: "1" });
    expect(screen(shown)).toContain("safe text red done\n");
    expect(shown).not.toContain("owned");
    expect(shown).not.toMatch(SGR);
  });

  it("--json on a terminal is still exactly the one JSON object, with no status line", async () => {
    server.setScript([{ content: MARKDOWN, delayMs: 200 }]);
    const { code, shown } = await inTerminal(["run", "apples?", "--json"]);
    expect(code).toBe(0);
    expect(JSON.parse(shown)).toMatchObject({
      output: MARKDOWN,
      stopReason: "final",
      sessionId: expect.stringMatching(/^cli:/),
    });
  });
});

describe("approvals at the terminal", () => {
  const shop = () => ({
    GLASSBOX_DEMO: "true",
    GLASSBOX_SHOP_DB: join(mkdtempSync(join(tmpdir(), "glassbox-cli-terminal-shop-")), "shop.db"),
  });
  const CANCEL = {
    toolCalls: [{ name: "cancel_order", arguments: '{"order_id":"20240410003","reason":"changed my mind"}' }],
  };

  it("asks before a dangerous call, with no status line over the question; y runs it", async () => {
    server.setScript([CANCEL, { content: "Cancelled." }]);
    const { code, shown } = await inTerminal(["run", "cancel order 20240410003"], shop(), "y\r", "[y/N] ");
    expect(code).toBe(0);
    expect(screen(shown)).toContain("Allow cancel_order(order_id: 20240410003, reason: changed my mind)? [y/N] y\n");
    expect(screen(shown)).toMatch(/cancel_order \u001b\[32mok\u001b\[39m/);
    // Nothing is drawn after the question until it is answered.
    const question = screen(shown);
    expect(question.slice(question.indexOf("[y/N] "), question.indexOf("[y/N] y"))).toBe("");
  });

  it("regression: Ctrl-C at the question cancels the run (exit 130), not only the question (the model went on)", async () => {
    server.setScript([CANCEL, { content: "never asked" }]);
    const { code, shown } = await inTerminal(["run", "cancel order 20240410003"], shop(), "\u0003", "[y/N] ");
    expect(code).toBe(130);
    expect(screen(shown)).toContain("? [y/N] \nThe run was cancelled.\n");
    expect(shown).not.toContain("calling cancel_order");
    expect(shown).not.toContain("never asked");
  });
});

describe("glassbox chat on a terminal", () => {
  it("renders each answer's Markdown with colour, under a coloured prompt", async () => {
    server.setScript([{ content: "**hi** there", delayMs: 200 }]);
    const { code, shown } = await inTerminal(["chat", "--session", "pty-chat"], {}, "hello\r/exit\r");
    expect(code).toBe(0);
    expect(shown).toContain("(session cli:pty-chat)");
    expect(shown).toContain("\u001b[1m\u001b[36m> \u001b[39m\u001b[22m");
    expect(shown).toContain("\u001b[1mhi\u001b[22m there");
    expect(shown).toContain("thinking…");
  });
});

describe("glassbox sessions and usage on a terminal", () => {
  it("bold headers on a terminal, and none with NO_COLOR", async () => {
    const env = { GLASSBOX_DB: join(mkdtempSync(join(tmpdir(), "glassbox-cli-terminal-tables-")), "glassbox.db") };
    server.setScript([{ content: "ok" }]);
    await inTerminal(["run", "hello", "--session", "tables", "--json"], env);
    const coloured = await inTerminal(["sessions"], env);
    expect(coloured.shown).toMatch(/^\u001b\[1mSESSION +MESSAGES/);
    const plain = await inTerminal(["usage"], { ...env, NO_COLOR: "1" });
    expect(plain.shown).toMatch(/^By day\n {2}DAY +RUNS/);
    expect(plain.shown).not.toMatch(SGR);
  });
});
