// glassbox replay and glassbox eval: runs recorded by `glassbox run` re-run by the real command line
// against the scripted model with another script (another "model"), and compared.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createFeedbackBook } from "../../../src/store/sqlite-feedback.js";
import { openSqliteStore } from "../../../src/store/sqlite-store.js";
import type { ChatCompletionRequestBody } from "../../../src/testing/scripted-model-server.js";
import { useCli } from "../helpers/cli.js";

const { server, glassbox, dataDir } = useCli();
const sawTool = (body: ChatCompletionRequestBody) => body.messages.some((message) => message.role === "tool");

/** A model that looks an order up, then answers with what it read. */
const lookUp =
  (orderId: string, prefix = "Status") =>
  (body: ChatCompletionRequestBody) =>
    sawTool(body)
      ? {
          content: `${prefix}: ${JSON.parse(String(body.messages.findLast((message) => message.role === "tool")?.content)).data?.status ?? "unknown"}`,
        }
      : { toolCalls: [{ name: "get_order_status", arguments: JSON.stringify({ order_id: orderId }) }] };

async function recordRun(): Promise<string> {
  server().setScript(lookUp("20240315001"));
  const run = await glassbox(["run", "Where is order 20240315001?", "--json"]);
  expect(run.code).toBe(0);
  return (JSON.parse(run.stdout) as { runId: string }).runId;
}

describe("glassbox replay", () => {
  it("replays a recorded run on another model with the recorded results, side by side, and as JSON", async () => {
    const runId = await recordRun();
    server().setScript(lookUp("20240315001", "Replayed status"));
    const shown = await glassbox(["replay", runId, "--model", "other-model"]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain(`recorded (${runId})`);
    expect(shown.stdout).toContain("Replayed status: delivered");
    expect(shown.stdout).toContain("The replay called the same tools with the same arguments.");
    // The replay went to the model named, with the recorded context.
    const replayed = server().requests.at(-2)?.body;
    expect(replayed?.model).toBe("other-model");
    expect(replayed?.messages.find((message) => message.role === "user")?.content).toBe("Where is order 20240315001?");

    const prompt = join(dataDir, "prompt.txt");
    writeFileSync(prompt, "You answer in one word.\n");
    server().setScript(lookUp("20240410003"));
    const json = await glassbox(["replay", runId, "--system-prompt", prompt, "--json"]);
    expect(json.code).toBe(0);
    const comparison = JSON.parse(json.stdout) as {
      sameToolCalls: boolean;
      divergesAtCall: number;
      notRecorded: number;
      replay: { toolCalls: Array<{ recorded: boolean }> };
    };
    expect(comparison).toMatchObject({ sameToolCalls: false, divergesAtCall: 1, notRecorded: 1 });
    expect(comparison.replay.toolCalls[0]?.recorded).toBe(false);
    expect(server().requests.at(-2)?.body.messages[0]).toEqual({ role: "system", content: "You answer in one word." });
  });

  it("eval tabulates replayed runs and exits 1 when one now calls different tools, 0 when none does", async () => {
    const first = await recordRun();
    const second = await recordRun();
    server().setScript(lookUp("20240315001"));
    const same = await glassbox(["eval", first, second]);
    expect(same.code).toBe(0);
    expect(same.stdout).toContain("All 2 replayed runs call the same tools.");
    expect(same.stdout.split("\n")[0]).toMatch(/^run\s+tool calls\s+answer\s+tokens\s+model time\s+compare$/);
    // Each replay is kept, and its row links to it beside the recorded run (the local web address by default).
    expect(same.stdout).toContain(`http://127.0.0.1:8787/trace#compare=${first},`);

    server().setScript(lookUp("20240410003"));
    const changed = await glassbox(["eval", first, "--json"]);
    expect(changed.code).toBe(1);
    expect(JSON.parse(changed.stdout)).toMatchObject({ changedToolCalls: 1 });
  });

  it("eval --feedback down|up replays the runs people rated so; another value is one sentence", async () => {
    const good = await recordRun();
    const bad = await recordRun();
    const store = openSqliteStore(join(dataDir, "glassbox.db"));
    try {
      const feedback = createFeedbackBook(store);
      feedback.record({ runId: good, userId: "U1", rating: "up", source: "web" });
      feedback.record({ runId: bad, userId: "U1", rating: "up", source: "web" });
      feedback.record({ runId: bad, userId: "U2", rating: "down", reason: "wrong order", source: "web" });
    } finally {
      store.close();
    }
    server().setScript(lookUp("20240315001"));
    const down = await glassbox(["eval", "--feedback", "down", "--json"]);
    expect(down.code).toBe(0);
    expect((JSON.parse(down.stdout) as { runs: Array<{ runId: string }> }).runs.map((run) => run.runId)).toEqual([bad]);
    const up = await glassbox(["eval", "--feedback", "up", "--json"]);
    expect((JSON.parse(up.stdout) as { runs: Array<{ runId: string }> }).runs.map((run) => run.runId)).toContain(good);
    expect((JSON.parse(up.stdout) as { runs: Array<{ runId: string }> }).runs.map((run) => run.runId)).not.toContain(
      bad,
    );
    const wrong = await glassbox(["eval", "--feedback", "sideways"]);
    expect(wrong.code).toBe(2);
    expect(wrong.stderr.split("\n")[0]).toBe("glassbox: --feedback takes down, up or all.");
  });

  it("says in one sentence what is wrong: no run named, an unknown run, an unreadable prompt file", async () => {
    const none = await glassbox(["replay"]);
    expect(none.code).toBe(2);
    expect(none.stderr.split("\n")[0]).toBe(
      "glassbox: Name one recorded run: npx glassbox replay <run-id> (npx glassbox trace <session> shows its runs).",
    );
    await recordRun();
    const unknown = await glassbox(["replay", "run_nope"]);
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toContain("There is no run run_nope in the trace");
    expect(unknown.stderr).not.toMatch(/\n\s+at /);
    const missing = await glassbox(["replay", "run_nope", "--system-prompt", "nope.txt"]);
    expect(missing.stderr).toContain("--system-prompt: the file");
  });
});
