// `glassbox usage` with channel settings (GLASSBOX_CHANNELS), as a real child process over a real
// SQLite file: after runs, it shows how each budget that was spent against stands this month, in
// the table and in --json; a settings file with a mistake is one sentence naming its line.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { useCli } from "../helpers/cli.js";

const { server, glassbox } = useCli();

function settingsFile(lines: string[]): string {
  const file = join(mkdtempSync(join(tmpdir(), "glassbox-usage-budgets-")), "channels.yaml");
  writeFileSync(file, `${lines.join("\n")}\n`);
  return file;
}

describe("glassbox usage with channel budgets", () => {
  it("shows the budgets' standing in the table and in --json", async () => {
    const channels = settingsFile([
      "defaults:",
      "  budget:",
      "    user: { daily: { tokens: 1000 }, monthly: { tokens: 50000 } }",
    ]);
    server().setScript([{ content: "Hello.", usage: { promptTokens: 280, completionTokens: 20 } }]);
    expect((await glassbox(["run", "hi", "--session", "budgeted"], { GLASSBOX_CHANNELS: channels })).code).toBe(0);

    const json = await glassbox(["usage", "--json"], { GLASSBOX_CHANNELS: channels });
    expect(json.code).toBe(0);
    const { budgets } = JSON.parse(json.stdout) as { budgets: Array<Record<string, unknown>> };
    expect(budgets).toEqual([
      expect.objectContaining({ scope: "user", period: "daily", unit: "tokens", of: "cli", used: 300, limit: 1000 }),
      expect.objectContaining({ scope: "user", period: "monthly", unit: "tokens", of: "cli", used: 300, limit: 50000 }),
    ]);

    const table = await glassbox(["usage"], { GLASSBOX_CHANNELS: channels, NO_COLOR: "1" });
    expect(table.stdout).toContain("Budgets this month (UTC), from GLASSBOX_CHANNELS");
    expect(table.stdout).toMatch(/user daily\s+cli\s+300 tokens\s+1,000 tokens\s+30%/);
    expect(table.stdout).toMatch(/user monthly\s+cli\s+300 tokens\s+50,000 tokens\s+0%/);
    // Without channel settings there are no budgets to show.
    expect((await glassbox(["usage"])).stdout).not.toContain("Budgets");
  });

  it("a settings file with a mistake is one sentence naming the line", async () => {
    const channels = settingsFile(["defaults:", "  budjet:", "    user: { daily: { tokens: 1000 } }"]);
    const { code, stdout, stderr } = await glassbox(["usage"], { GLASSBOX_CHANNELS: channels });
    expect(code).toBe(2);
    expect(`${stdout}${stderr}`.trim()).toMatch(/^.*channels\.yaml:2: .*budget/);
    expect(`${stdout}${stderr}`).not.toMatch(/\n\s+at /);
  });
});
