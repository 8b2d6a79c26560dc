/**
 * The code's list of settings (src/settings.ts) is the one truth: every name the code reads from the
 * environment is in it, docs/configuration.md's table and .env.example are what it generates, and a
 * name that looks meant for glassbox but is none of its settings is named with a did-you-mean.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import {
  CONFIGURATION_PAGE,
  configurationPage,
  ENV_EXAMPLE,
  envExample,
  settingsTable,
} from "../../scripts/settings-docs.js";
import { SETTINGS, unknownSettings } from "../../src/settings.js";

const SOURCE = fileURLToPath(new URL("../../src", import.meta.url));
/** Names in the code that have a setting's shape but are constants or set by glassbox itself. */
const NOT_SETTINGS = new Set([
  "DISCORD_EPOCH",
  "DISCORD_MESSAGE_LIMIT",
  "SLACK_MESSAGE_LIMIT",
  "SLACK_HOSTS",
  "SLACK_ID",
  "SLACK_TS",
  "GLASSBOX_ROLES",
  "GLASSBOX_INSTANCE",
]);
/** The platform's own variables glassbox looks at: the terminal, the shell and npm, not settings a person makes. */
const PLATFORM = new Set(["TERM", "PATH", "INIT_CWD", "npm_lifecycle_event"]);

function sourceFiles(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) return entry.name === "testing" || entry.name === "public" ? [] : sourceFiles(path);
    // src/settings.ts is the list itself, whose comments show a typo and .env.example.
    return entry.name.endsWith(".ts") && entry.name !== "settings.ts" ? [path] : [];
  });
}

/** Every environment name the code mentions: prefixed names anywhere, and any name read as env.X, env["X"] or (env, "X"). */
function namesTheCodeReads(): Set<string> {
  const names = new Set<string>();
  const patterns = [
    /\b(?:GLASSBOX|SLACK|DISCORD|OPENAI|LLM|OTEL)_[A-Z0-9_]+\b/g,
    /\benv\.([A-Za-z_][A-Za-z0-9_]*)/g,
    /\benv\["([A-Za-z_][A-Za-z0-9_]*)"\]/g,
    /\(env, "([A-Z_][A-Z0-9_]*)"/g,
  ];
  for (const file of sourceFiles(SOURCE)) {
    const text = readFileSync(file, "utf8");
    for (const pattern of patterns) for (const match of text.matchAll(pattern)) names.add(match[1] ?? match[0]);
  }
  return names;
}

describe("the settings list", () => {
  it("holds every name the code reads from the environment, once", () => {
    const listed = SETTINGS.map((setting) => setting.name);
    expect(new Set(listed).size).toBe(listed.length);
    const missing = [...namesTheCodeReads()].filter(
      (name) => !listed.includes(name) && !NOT_SETTINGS.has(name) && !PLATFORM.has(name),
    );
    expect(missing).toEqual([]);
  });

  it("regression: the scan sees settings read through the config's helpers, such as PORT and GLASSBOX_MAX_STEPS", () => {
    const read = namesTheCodeReads();
    for (const name of ["PORT", "GLASSBOX_MAX_STEPS", "LOG_LEVEL", "NO_COLOR", "OTEL_SERVICE_NAME"])
      expect(read.has(name), name).toBe(true);
  });

  it("is what docs/configuration.md's table and .env.example say (npm run docs:settings writes them)", () => {
    const page = readFileSync(CONFIGURATION_PAGE, "utf8");
    expect(page).toContain(settingsTable());
    expect(configurationPage(page)).toBe(page);
    expect(readFileSync(ENV_EXAMPLE, "utf8")).toBe(envExample());
    for (const setting of SETTINGS) expect(page).toContain(`| \`${setting.name}\` |`);
  });

  it("gives every setting a group, a default, and a meaning in sentences", () => {
    for (const setting of SETTINGS) {
      expect(setting.default, setting.name).not.toBe("");
      expect(setting.meaning, setting.name).toMatch(/[.)]$/);
    }
  });
});

describe("unknownSettings", () => {
  it("names a typo of a setting with the setting it likely means", () => {
    expect(unknownSettings({ GLASSBOX_MAX_STEP: "20" })).toEqual([
      "GLASSBOX_MAX_STEP is not a glassbox setting; did you mean GLASSBOX_MAX_STEPS?",
    ]);
    expect(unknownSettings({ SLACK_BOT_TOKN: "xoxb-1" })).toEqual([
      "SLACK_BOT_TOKN is not a glassbox setting; did you mean SLACK_BOT_TOKEN?",
    ]);
  });

  it("names any other GLASSBOX_ name as ignored, and leaves other programs' variables alone", () => {
    expect(unknownSettings({ GLASSBOX_COLOUR_SCHEME: "dark" })).toEqual([
      "GLASSBOX_COLOUR_SCHEME is not a glassbox setting and is ignored; docs/configuration.md lists them all.",
    ]);
    expect(
      unknownSettings({ OPENAI_ORG_ID: "org-1", HOME: "/root", PATH: "/bin", SLACK_WEBHOOK_URL: "https://x" }),
    ).toEqual([]);
  });

  it("says nothing of the settings it knows, nor of the names glassbox, its tests and CI set for themselves", () => {
    const env = Object.fromEntries(SETTINGS.map((setting) => [setting.name, "x"]));
    expect(
      unknownSettings({
        ...env,
        GLASSBOX_INSTANCE: "i-1",
        GLASSBOX_TEST_DATABASE_URL: "postgres://x",
        GLASSBOX_CHROMIUM: "c",
      }),
    ).toEqual([]);
  });
});
