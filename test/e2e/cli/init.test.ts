// glassbox init, the real command line: with flags (as a script runs it), and answering its questions
// on a real terminal (python3's pty, run-in-terminal.py); what it writes, and that it replaces no file
// without asking or --force.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { useCli } from "../helpers/cli.js";

const { glassbox } = useCli();
const CLI = fileURLToPath(new URL("../../../src/cli.ts", import.meta.url));
const TERMINAL = fileURLToPath(new URL("./run-in-terminal.py", import.meta.url));
const TSX = import.meta.resolve("tsx");
const TEMPLATE = readFileSync(fileURLToPath(new URL("../../../slack-app-manifest.yaml", import.meta.url)), "utf8");

const folder = () => mkdtempSync(join(tmpdir(), "glassbox-init-"));
const envOf = (dir: string) =>
  Object.fromEntries(
    readFileSync(join(dir, ".env"), "utf8")
      .split("\n")
      .filter((line) => /^[A-Z_]+=/.test(line))
      .map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)]),
  );

describe("glassbox init", () => {
  it("with flags: Slack over HTTP at scale writes .env (a new token, a database password) and the manifest with the request URLs", async () => {
    const dir = folder();
    const { code, stdout } = await glassbox([
      "init",
      "--dir",
      dir,
      "--platform",
      "slack",
      "--slack-mode",
      "http",
      "--public-url",
      "https://bot.example.com/",
      "--model-url",
      "http://10.0.0.5:11434/v1",
      "--model",
      "qwen2.5:7b",
      "--shape",
      "scale",
    ]);
    expect(code).toBe(0);
    const env = envOf(dir);
    expect(env).toMatchObject({
      OPENAI_BASE_URL: "http://10.0.0.5:11434/v1",
      LLM_MODEL: "qwen2.5:7b",
      OPENAI_API_KEY: "",
      SLACK_BOT_TOKEN: "",
      SLACK_SIGNING_SECRET: "",
      COMPOSE_PROFILES: "scale",
      PUBLISH_SLACK: "0.0.0.0:3000",
    });
    expect(env.GLASSBOX_API_TOKEN).toMatch(/^[0-9a-f]{64}$/);
    expect(env.POSTGRES_PASSWORD).toMatch(/^[0-9a-f]{48}$/);
    expect(env).not.toHaveProperty("SLACK_APP_TOKEN");
    expect(statSync(join(dir, ".env")).mode & 0o777).toBe(0o600); // secrets: the owner's alone

    const manifest = readFileSync(join(dir, "slack-manifest.yaml"), "utf8");
    expect(manifest).toContain("  event_subscriptions:\n    request_url: https://bot.example.com/slack/events\n");
    expect(manifest).toContain(
      "    is_enabled: true # Approve / Deny buttons\n    request_url: https://bot.example.com/slack/events\n",
    );
    expect(manifest).toContain("  socket_mode_enabled: false");
    expect(manifest).not.toContain("Socket Mode needs no public URL");
    // Every scope and event of the project's manifest is kept.
    for (const line of TEMPLATE.split("\n").filter((text) => /^ {6}- /.test(text))) expect(manifest).toContain(line);
    expect(stdout).toContain("docker compose up -d --build   (the scale profile");
  });

  it("without a terminal or --force it replaces no file, saying so in one sentence; with --force it does", async () => {
    const dir = folder();
    writeFileSync(join(dir, ".env"), "OPENAI_API_KEY=sk-keep-me\n");
    const refused = await glassbox(["init", "--dir", dir, "--platform", "web"]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(`${join(dir, ".env")} exists already; move it away, or run glassbox init --force`);
    expect(readFileSync(join(dir, ".env"), "utf8")).toBe("OPENAI_API_KEY=sk-keep-me\n");

    const forced = await glassbox(["init", "--dir", dir, "--platform", "web", "--force"]);
    expect(forced.code).toBe(0);
    expect(envOf(dir)).toMatchObject({ COMPOSE_PROFILES: "single", OPENAI_BASE_URL: "https://api.openai.com/v1" });
  });

  it("a wrong choice is one sentence naming the flag and its choices", async () => {
    const { code, stderr } = await glassbox(["init", "--dir", folder(), "--platform", "teams"]);
    expect(code).toBe(2);
    expect(stderr).toContain("--platform takes slack, discord, web; 'teams' is not one.");
  });

  it("on a terminal it asks each question, takes the defaults on Enter, and asks before replacing a file", async () => {
    const dir = folder();
    writeFileSync(join(dir, "slack-manifest.yaml"), "mine\n");
    // platform, Slack mode, model server, model name, shape; then: replace slack-manifest.yaml? no
    const typed = ["slack", "", "", "llama3.1", "single", "n"].map((line) => `${line}\r`).join("");
    const { code, shown } = await new Promise<{ code: number; shown: string }>((resolve, reject) => {
      const child = spawn("python3", [TERMINAL, process.execPath, "--import", TSX, CLI, "init", "--dir", dir], {
        env: { PATH: process.env.PATH ?? "", TERM: "xterm-256color" },
      });
      let output = "";
      child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
      child.on("error", reject);
      child.on("close", (exit) => resolve({ code: exit ?? 1, shown: output.replace(/\r+\n/g, "\n") }));
      child.stdin.end(typed);
    });
    expect(code).toBe(0);
    expect(shown).toContain("Chat platform: slack, discord or web (the page only)? [slack]");
    expect(shown).toContain("Slack: socket (no public URL) or http? [socket]");
    expect(shown).toContain("slack-manifest.yaml exists; replace it? (y/N) [n]");
    expect(shown).toContain("kept slack-manifest.yaml as it was");
    expect(envOf(dir)).toMatchObject({
      LLM_MODEL: "llama3.1",
      OPENAI_BASE_URL: "https://api.openai.com/v1",
      SLACK_APP_TOKEN: "",
      COMPOSE_PROFILES: "single",
    });
    expect(readFileSync(join(dir, "slack-manifest.yaml"), "utf8")).toBe("mine\n");
  });
});
