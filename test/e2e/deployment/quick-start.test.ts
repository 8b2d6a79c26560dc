/**
 * The README's quick start without a model, run as written: its shell blocks are read from README.md
 * and each command runs in a shell from the clone (`git clone`, `cd` and `npm install` are what CI
 * has just done on a fresh clone). `npm run demo` listens on a free port instead of 8787, as test
 * files run side by side; the command-line lines get the `export` line the demo printed, and
 * `<run-id>` the id of the run before (a terminal shows it after the answer; here, with no terminal,
 * it is read from the demo's database).
 */
import { exec, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import Database from "better-sqlite3";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../../..", import.meta.url));
const DONE_BY_CI = /^(git clone |cd |npm install|npm ci)/;
const stops: Array<() => void> = [];
afterEach(() => {
  for (const stop of stops.splice(0)) stop();
});

/** The commands of the shell blocks under "Without a model", comments dropped. */
function quickStartCommands(): string[] {
  const readme = readFileSync(`${ROOT}/README.md`, "utf8");
  const section = readme.slice(readme.indexOf("**Without a model**"), readme.indexOf("**With a model**"));
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)]
    .flatMap((block) => (block[1] ?? "").split("\n"))
    .map((line) => line.replace(/\s+#.*$/, "").trim())
    .filter(Boolean);
}

function shell(command: string, env: Record<string, string>): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    exec(command, { cwd: ROOT, env: { ...process.env, ...env }, timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, output: `${stdout}${stderr}` }),
    );
  });
}

/** Starts a long-running command and resolves with its output once the demo printed its `export` line. */
async function startDemo(command: string): Promise<{ output: () => string }> {
  const child = spawn("sh", ["-c", `exec ${command}`], {
    cwd: ROOT,
    env: { ...process.env, GLASSBOX_WEB_PORT: "0" },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  stops.push(() => {
    if (child.pid) process.kill(-child.pid, "SIGTERM");
  });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
  await expect.poll(() => /^ {2}export .+$/m.test(output) || child.exitCode !== null, { timeout: 45_000 }).toBe(true);
  if (child.exitCode !== null) throw new Error(`${command} stopped: ${output}`);
  return { output: () => output };
}

function latestRun(databasePath: string): string | undefined {
  const db = new Database(databasePath, { readonly: true });
  try {
    const row = db.prepare("SELECT id FROM runs ORDER BY started_at DESC, rowid DESC LIMIT 1").get() as
      | { id: string }
      | undefined;
    return row?.id;
  } finally {
    db.close();
  }
}

describe("the README's quick start without a model", () => {
  it("runs as written: the demo starts, the command line answers through it and shows the run's trace", {
    timeout: 120_000,
  }, async () => {
    const commands = quickStartCommands();
    expect(commands).toContain("npm run demo");
    let cliEnv: Record<string, string> = {};
    let runId: string | undefined;
    const ran: string[] = [];
    for (const command of commands) {
      if (DONE_BY_CI.test(command)) continue;
      if (command === "npm run demo") {
        const demo = await startDemo(command);
        const exportLine = /^ {2}export (.+)$/m.exec(demo.output())?.[1] ?? "";
        cliEnv = Object.fromEntries(exportLine.split(" ").map((pair) => pair.split(/=(.*)/s).slice(0, 2)));
        expect(cliEnv.OPENAI_BASE_URL).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
        ran.push(command);
        continue;
      }
      if (command.includes("<run-id>")) expect(runId, `${command} needs the run before it`).toBeDefined();
      const result = await shell(command.replace("<run-id>", runId ?? ""), cliEnv);
      expect(result.code, `${command}\n${result.output}`).toBe(0);
      if (command.includes("glassbox run")) runId = latestRun(cliEnv.GLASSBOX_DB ?? "");
      if (command.includes("glassbox run")) expect(result.output).toMatch(/20240410003/);
      if (command.includes("glassbox trace")) expect(result.output).toMatch(/get_order_status/);
      ran.push(command);
    }
    expect(ran.some((command) => command.startsWith("npx glassbox run"))).toBe(true);
    expect(ran.some((command) => command.startsWith("npx glassbox trace"))).toBe(true);
  });
});
