// A release's marks agree: package.json's version has its dated section in the CHANGELOG (with what
// upgrading from the release before needs), below the Unreleased one; docs/upgrading.md explains them.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), "utf8");

describe("the release", () => {
  it("package.json's version has a dated CHANGELOG section, under Unreleased, that says how to upgrade to it", () => {
    const { version } = JSON.parse(read("package.json")) as { version: string };
    const changelog = read("CHANGELOG.md");
    const sections = [...changelog.matchAll(/^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$/gm)];
    expect(sections[0]?.[1]).toBe("Unreleased");
    expect(sections[1]?.[1]).toBe(version);
    expect(sections[1]?.[2]).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    const body = changelog.slice(sections[1]?.index, sections[2]?.index);
    expect(body).toContain(`### Upgrading from ${sections[2]?.[1]}`);
  });
});
