/**
 * `npm start` as a person runs it from a folder with a .env: it reads the file (and says which),
 * the environment's own value wins over the file's, and a setting glassbox does not know is named
 * with the one it likely means; the start lines name the addresses the web server really answers on.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { networkInterfaces, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import * as discord from "../../helpers/discord.js";

const MAIN = fileURLToPath(new URL("../../../src/main.ts", import.meta.url));
const TSX = import.meta.resolve("tsx");
const folders: string[] = [];

afterEach(async () => {
  await discord.cleanUp();
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

/** The machine's own IPv4 addresses besides loopback. */
const otherIpv4 = () =>
  Object.values(networkInterfaces())
    .flat()
    .filter((entry) => entry && !entry.internal && entry.family === "IPv4")
    .map((entry) => entry?.address ?? "");

/** The addresses a start line lists after "It listens on every address", each a page that must answer. */
async function expectElsewhere(stdout: string, port: string | undefined): Promise<void> {
  const others = otherIpv4();
  if (others.length === 0) return void expect(stdout).not.toContain("It listens on every address");
  const line = stdout.split("\n").find((text) => text.startsWith("It listens on every address")) ?? "";
  const listed = [...line.matchAll(/http:\/\/[^ ,]+\//g)].map((match) => match[0]);
  expect(listed).toEqual(others.map((address) => `http://${address}:${port}/`));
  for (const address of listed) expect((await fetch(address)).status).toBe(200);
}

describe("settings at start", () => {
  it("reads .env from the current folder, lets the environment win, and names a mistyped setting", {
    timeout: 60_000,
  }, async () => {
    const folder = mkdtempSync(join(tmpdir(), "glassbox-env-"));
    folders.push(folder);
    writeFileSync(
      join(folder, ".env"),
      ["GLASSBOX_WEB_PORT=0", "GLASSBOX_DB=from-file.db", "GLASSBOX_MAX_STEP=20 # a typo", ""].join("\n"),
    );
    const bot = spawn(process.execPath, ["--import", TSX, MAIN], {
      cwd: folder,
      env: { PATH: process.env.PATH ?? "", GLASSBOX_DB: join(folder, "from-environment.db") },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    bot.stdout.on("data", (chunk: Buffer) => void (stdout += chunk.toString()));
    bot.stderr.on("data", (chunk: Buffer) => void (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => bot.on("exit", resolve));
    try {
      await expect.poll(() => stdout, { timeout: 45_000, interval: 50 }).toMatch(/glassbox playground: chat at /);
    } finally {
      bot.kill("SIGTERM");
      await exited;
    }
    expect(stdout).toContain(`glassbox: read settings from ${join(folder, ".env")}`);
    // GLASSBOX_WEB_PORT=0 came from the file: a free port, not the default 8787.
    const url = /chat at (http:\/\/127\.0\.0\.1:(\d+))\//.exec(stdout);
    expect(url?.[2]).not.toBe("8787");
    expect(stderr).toContain(
      "glassbox: warning: GLASSBOX_MAX_STEP is not a glassbox setting; did you mean GLASSBOX_MAX_STEPS?",
    );
    expect(existsSync(join(folder, "from-environment.db"))).toBe(true);
    expect(existsSync(join(folder, "from-file.db"))).toBe(false);
  });

  it("a per-channel settings file with a mistake stops the start with one sentence naming its line", {
    timeout: 60_000,
  }, async () => {
    const folder = mkdtempSync(join(tmpdir(), "glassbox-env-"));
    folders.push(folder);
    const file = join(folder, "channels.yaml");
    writeFileSync(file, "defaults:\n  tools: [calculator]\nchannels:\n  C1:\n    tols: [current_time]\n");
    const bot = spawn(process.execPath, ["--import", TSX, MAIN], {
      cwd: folder,
      env: {
        PATH: process.env.PATH ?? "",
        GLASSBOX_DB: join(folder, "glassbox.db"),
        GLASSBOX_WEB_PORT: "0",
        OPENAI_BASE_URL: "http://127.0.0.1:9/v1",
        GLASSBOX_CHANNELS: file,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    bot.stderr.on("data", (chunk: Buffer) => void (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => bot.on("exit", resolve));
    expect(code).toBe(1);
    expect(stderr).toBe(`glassbox: ${file}:5: channels.C1.tols is not a setting; did you mean tools?\n`);
  });

  it("the start line shows the address it really listens on: on every address, the machine's others too, each answering", {
    timeout: 60_000,
  }, async () => {
    const folder = mkdtempSync(join(tmpdir(), "glassbox-host-"));
    folders.push(folder);
    const bot = spawn(process.execPath, ["--import", TSX, MAIN], {
      cwd: folder,
      env: {
        PATH: process.env.PATH ?? "",
        GLASSBOX_DB: join(folder, "glassbox.db"),
        GLASSBOX_WEB_PORT: "0",
        GLASSBOX_WEB_HOST: "0.0.0.0",
        GLASSBOX_API_TOKEN: "a-token-for-the-lan",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    bot.stdout.on("data", (chunk: Buffer) => void (stdout += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => bot.on("exit", resolve));
    try {
      await expect.poll(() => stdout, { timeout: 45_000, interval: 50 }).toMatch(/glassbox playground: chat at /);
      await expectElsewhere(stdout, /chat at http:\/\/127\.0\.0\.1:(\d+)\//.exec(stdout)?.[1]);
    } finally {
      bot.kill("SIGTERM");
      await exited;
    }
  });

  it("regression: the start line of npm start with a platform (not only the playground's) names every address it listens on (finding 8)", {
    timeout: 60_000,
  }, async () => {
    const folder = mkdtempSync(join(tmpdir(), "glassbox-host-"));
    folders.push(folder);
    const fake = await discord.startFake();
    const bot = spawn(process.execPath, ["--import", TSX, MAIN], {
      cwd: folder,
      env: {
        PATH: process.env.PATH ?? "",
        GLASSBOX_DB: join(folder, "glassbox.db"),
        GLASSBOX_WEB_PORT: "0",
        GLASSBOX_WEB_HOST: "0.0.0.0",
        GLASSBOX_API_TOKEN: "a-token-for-the-lan",
        OPENAI_BASE_URL: "http://127.0.0.1:9/v1",
        DISCORD_TOKEN: fake.token,
        DISCORD_API_URL: fake.apiUrl,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    bot.stdout.on("data", (chunk: Buffer) => void (stdout += chunk.toString()));
    bot.stderr.on("data", (chunk: Buffer) => void (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => bot.on("exit", resolve));
    try {
      await expect
        .poll(() => stdout, { timeout: 45_000, interval: 50 })
        .toMatch(/^glassbox on SQLite at .*, everything in one process: chat at /m);
      const port = /chat at http:\/\/127\.0\.0\.1:(\d+)\//.exec(stdout)?.[1];
      expect(port).toBeDefined();
      await expectElsewhere(stdout, port);
      // The log line says the same.
      const logged = JSON.parse(stderr.split("\n").find((text) => text.includes('"msg":"glassbox on SQLite')) ?? "{}");
      expect(logged.alsoAt ?? []).toEqual(otherIpv4().map((address) => `http://${address}:${port}/`));
    } finally {
      bot.kill("SIGTERM");
      await exited;
    }
  });
});
