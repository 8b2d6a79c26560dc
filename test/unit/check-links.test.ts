/** The link check of npm run check: a link to a missing page or heading is named, one that resolves is not. */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { brokenLinks, headingId } from "../../scripts/check-links.js";

const folders: string[] = [];
afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

function site(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), "glassbox-links-"));
  folders.push(root);
  mkdirSync(join(root, "docs"));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(root, name), text);
  return root;
}

describe("the link check", () => {
  it("names a link to a missing file and to a missing heading, with its line", () => {
    const root = site({
      "README.md": "# Title\n\nSee [setup](docs/setup.md#first-steps), [gone](docs/gone.md) and [here](#nowhere).\n",
      "docs/setup.md": "# Setup\n\n## First steps\n",
    });
    expect(brokenLinks(join(root, "README.md"), root)).toEqual([
      { file: "README.md", line: 3, target: "docs/gone.md", reason: "no such file" },
      { file: "README.md", line: 3, target: "#nowhere", reason: "no heading #nowhere there" },
    ]);
  });

  it("accepts links that resolve, web links, and links inside code", () => {
    const root = site({
      "README.md":
        "# T\n[a](docs/setup.md#whats-new-in-01) [b](https://x.invalid/y) `[c](nope.md)`\n```\n[d](nope.md)\n```\n",
      "docs/setup.md": "# What's new in 0.1\n",
    });
    expect(brokenLinks(join(root, "README.md"), root)).toEqual([]);
  });

  it("makes heading ids as GitHub does", () => {
    expect(headingId("Running at scale: ingress and workers")).toBe("running-at-scale-ingress-and-workers");
    expect(headingId("`GLASSBOX_DB` and you")).toBe("glassbox_db-and-you");
  });
});
