// Feedback in the command line, as a real child process over a real SQLite file: `glassbox trace`
// shows each person's latest 👍 / 👎 with its reason under the run, and `glassbox usage` counts them.
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createFeedbackBook } from "../../../src/store/sqlite-feedback.js";
import { openSqliteStore } from "../../../src/store/sqlite-store.js";
import { useCli } from "../helpers/cli.js";

const { server, glassbox, dataDir } = useCli();

/** Rates a recorded run as the platforms do, through the store's own file. */
function rate(
  runId: string,
  ratings: Array<{ userId: string; rating: "up" | "down"; reason?: string; source: "slack" | "discord" | "web" }>,
) {
  const store = openSqliteStore(join(dataDir, "glassbox.db"));
  try {
    const book = createFeedbackBook(store);
    for (const one of ratings) expect(book.record({ runId, ...one })).toBe("recorded");
  } finally {
    store.close();
  }
}

describe("glassbox trace and usage with feedback", () => {
  it("trace shows who rated the run, how and why; usage counts the 👍 and 👎", async () => {
    server().setScript([{ content: "There are 12 apples." }, { content: "Hello." }]);
    const first = JSON.parse((await glassbox(["run", "How many apples?", "--session", "rated", "--json"])).stdout) as {
      runId: string;
    };
    const second = JSON.parse((await glassbox(["run", "Hi", "--session", "rated-too", "--json"])).stdout) as {
      runId: string;
    };
    rate(first.runId, [
      { userId: "U1", rating: "up", source: "slack" },
      { userId: "U2", rating: "down", reason: "It counted the pears too", source: "slack" },
    ]);
    rate(second.runId, [{ userId: "web:ann", rating: "down", source: "web" }]);

    const traced = await glassbox(["trace", first.runId]);
    expect(traced.code).toBe(0);
    expect(traced.stdout).toContain("  feedback: 1 👍, 1 👎");
    expect(traced.stdout).toMatch(/ {4}👍 U1 \(slack, \d{4}-\d{2}-\d{2}T/);
    expect(traced.stdout).toContain("👎 U2: It counted the pears too (slack,");
    const json = JSON.parse((await glassbox(["trace", first.runId, "--json"])).stdout) as Array<{
      feedback: Array<{ userId: string; rating: string }>;
    }>;
    expect(json[0]?.feedback.map((one) => [one.userId, one.rating])).toEqual([
      ["U1", "up"],
      ["U2", "down"],
    ]);

    const usage = await glassbox(["usage"]);
    expect(usage.stdout).toContain("Feedback: 1 👍 · 2 👎");
    expect(JSON.parse((await glassbox(["usage", "--json"])).stdout)).toMatchObject({ feedback: { up: 1, down: 2 } });
  });
});
