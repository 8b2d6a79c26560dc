/**
 * The import rule of `npm run check`: dependencies point one way (roles -> adapters -> conversations
 * -> store, queue -> the engine), and an import that runs back up fails the check.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../..");
const CRUISE = join(ROOT, "node_modules/dependency-cruiser/bin/dependency-cruise.mjs");
const CONFIG = join(ROOT, ".dependency-cruiser.cjs");
const trees: string[] = [];

afterAll(() => {
  for (const tree of trees) rmSync(tree, { recursive: true, force: true });
});

/** A small source tree in a folder of its own, checked with glassbox's rule (no known violations). */
function checkTree(files: Record<string, string>): { code: number | null; output: string } {
  const tree = mkdtempSync(join(tmpdir(), "glassbox-import-rule-"));
  trees.push(tree);
  writeFileSync(join(tree, "tsconfig.json"), JSON.stringify({ compilerOptions: { module: "NodeNext" } }));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(tree, path)), { recursive: true });
    writeFileSync(join(tree, path), text);
  }
  const ran = spawnSync(process.execPath, [CRUISE, "src", "--config", CONFIG, "--output-type", "err"], {
    cwd: tree,
    encoding: "utf8",
  });
  return { code: ran.status, output: `${ran.stdout}${ran.stderr}` };
}

describe("the import rule", () => {
  it("passes imports that point down the layers", () => {
    const checked = checkTree({
      "src/agent/loop.ts": 'import { limit } from "../tools/limit.js";\nexport const loop = limit;\n',
      "src/tools/limit.ts": "export const limit = 1;\n",
      "src/store/sqlite.ts": 'import type { loop } from "../agent/loop.js";\nexport type Loop = typeof loop;\n',
      "src/conversations/turns.ts": 'import type { Loop } from "../store/sqlite.js";\nexport type Turn = Loop;\n',
      "src/adapters/slack/inbound.ts":
        'import type { Turn } from "../../conversations/turns.js";\nexport type T = Turn;\n',
      "src/roles/one-process.ts": 'import type { T } from "../adapters/slack/inbound.js";\nexport type R = T;\n',
    });
    expect(checked.output).toContain("no dependency violations");
    expect(checked.code).toBe(0);
  });

  it("fails on an engine module that imports a platform adapter", () => {
    const checked = checkTree({
      "src/agent/loop.ts": 'import { post } from "../adapters/slack/surface.js";\nexport const loop = post;\n',
      "src/adapters/slack/surface.ts": "export const post = 1;\n",
    });
    expect(checked.code).not.toBe(0);
    expect(checked.output).toMatch(/engine-imports-upward: src\/agent\/loop\.ts → src\/adapters\/slack\/surface\.ts/);
  });

  it("fails on a type-only import from the store into the engine, and on the store importing a conversation", () => {
    const checked = checkTree({
      "src/agent/memory.ts": 'import type { Port } from "../store/port.js";\nexport type M = Port;\n',
      "src/store/port.ts": 'import type { Turn } from "../conversations/turns.js";\nexport type Port = Turn;\n',
      "src/conversations/turns.ts": "export type Turn = number;\n",
    });
    expect(checked.code).not.toBe(0);
    expect(checked.output).toMatch(/engine-imports-upward: src\/agent\/memory\.ts → src\/store\/port\.ts/);
    expect(checked.output).toMatch(
      /store-or-queue-imports-upward: src\/store\/port\.ts → src\/conversations\/turns\.ts/,
    );
  });

  it("fails on the test fakes importing glassbox's own code", () => {
    const checked = checkTree({
      "src/testing/fake-slack.ts": 'import { loop } from "../agent/loop.js";\nexport const fake = loop;\n',
      "src/agent/loop.ts": "export const loop = 1;\n",
    });
    expect(checked.code).not.toBe(0);
    expect(checked.output).toMatch(/testing-imports-glassbox: src\/testing\/fake-slack\.ts → src\/agent\/loop\.ts/);
  });
});
