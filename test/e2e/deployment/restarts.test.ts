// What a bot finds when it starts again after being killed (SIGKILL), with real processes and real
// SQLite files: a bot that runs as PID 1 (a container's) marks its killed runs interrupted as one on
// a laptop does, and a run the HTTP API accepted but never started is reported interrupted, not
// unknown. The PID-1 test needs `unshare` (util-linux) and root, as CI has; without them it fails
// and says so, rather than passing without having run.
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { startScriptedModelServer, type ScriptedModelServer } from "../../../src/testing/scripted-model-server.js";
import { getJson, postJson, WAIT } from "../../helpers/web.js";
import { databasePath, removeDatabases } from "../../helpers/memory.js";

const ROOT = fileURLToPath(new URL("../../..", import.meta.url));
const STORE_MODULE = fileURLToPath(new URL("../../../src/store/sqlite-store.ts", import.meta.url));

interface Child {
  process: ChildProcessWithoutNullStreams;
  /** The first line the child prints that matches, or a rejection with its stderr if it ends first. */
  line(pattern: RegExp): Promise<string>;
  closed: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const children = new Set<ChildProcessWithoutNullStreams>();

function start(command: string, args: string[], env: Record<string, string> = {}): Child {
  const child = spawn(command, args, {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", ...env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  children.add(child);
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  const lines: string[] = [];
  const waiting = new Set<{ pattern: RegExp; resolve: (line: string) => void }>();
  createInterface({ input: child.stdout }).on("line", (line) => {
    lines.push(line);
    for (const waiter of waiting) if (waiter.pattern.test(line)) waiting.delete(waiter), waiter.resolve(line);
  });
  const failed = new Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }>((resolve) => {
    child.on("error", (error) => resolve({ code: null, signal: null, error }));
    child.on("close", (code, signal) => resolve({ code, signal }));
  });
  const closed = failed.then((outcome) => {
    children.delete(child);
    if (outcome.error)
      throw new Error(`${command} could not be started (${outcome.error.message}); this test needs it installed.`);
    return outcome;
  });
  return {
    process: child,
    closed,
    line(pattern) {
      const seen = lines.find((line) => pattern.test(line));
      if (seen) return Promise.resolve(seen);
      return Promise.race([
        new Promise<string>((resolve) => void waiting.add({ pattern, resolve })),
        closed.then(({ code, signal }) =>
          Promise.reject(
            new Error(
              `${command} ended (code ${code}, signal ${signal}) before printing ${pattern}; stderr:\n${stderr}`,
            ),
          ),
        ),
      ]);
    },
  };
}

afterEach(() => {
  for (const child of children) child.kill("SIGKILL"); // only the processes this file started
  children.clear();
  removeDatabases();
});

/** A node process that is PID 1 of a PID namespace of its own, as a container's main process is. */
function startAsPid1(code: string, args: string[]): Child {
  return start("unshare", [
    "--pid",
    "--fork",
    "--mount-proc",
    process.execPath,
    "--import",
    "tsx",
    "--input-type=module",
    "-e",
    code,
    ...args,
  ]);
}

/** SIGKILLs the PID-1 child inside the namespace, from outside (as `docker kill` does), and waits until it is gone. */
async function killPid1(unshare: Child): Promise<void> {
  const pid = unshare.process.pid as number;
  const inner = Number(readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/)[0]);
  expect(inner).toBeGreaterThan(0);
  process.kill(inner, "SIGKILL");
  await unshare.closed; // unshare waits for its child (its own exit status varies by version)
  expect(() => process.kill(inner, 0)).toThrow(/ESRCH/);
}

describe("a bot that runs as PID 1 and is killed", () => {
  it("regression: its restart, PID 1 again, marks the killed run interrupted (runs were owned by host:pid, which the restart shares)", {
    timeout: 60_000,
  }, async () => {
    const path = databasePath();
    const program = `
      import { openSqliteStore } from ${JSON.stringify(STORE_MODULE)};
      const [mode, path] = process.argv.slice(1);
      const store = openSqliteStore(path);
      if (mode === "run") {
        store.startRun({ runId: "run_in_container", sessionId: "cli:container", userId: "U1", input: "hi" });
        process.stdout.write(JSON.stringify({ pid: process.pid, running: true }) + "\\n");
        setInterval(() => {}, 60_000); // busy with the run until killed
      } else {
        process.stdout.write(JSON.stringify({ pid: process.pid, interrupted: store.interruptOrphanedRuns() }) + "\\n");
        store.close();
      }`;
    const first = startAsPid1(program, ["run", path]);
    expect(JSON.parse(await first.line(/"running"/))).toEqual({ pid: 1, running: true });
    await killPid1(first);

    const second = startAsPid1(program, ["recover", path]);
    expect(JSON.parse(await second.line(/"interrupted"/))).toEqual({ pid: 1, interrupted: 1 });
    expect((await second.closed).code).toBe(0);
    const db = new Database(path, { readonly: true });
    try {
      expect(
        db.prepare("SELECT status, ended_at IS NOT NULL AS ended FROM runs WHERE id = 'run_in_container'").get(),
      ).toEqual({ status: "interrupted", ended: 1 });
    } finally {
      db.close();
    }
  });
});

describe("the playground killed with runs accepted", () => {
  let model: ScriptedModelServer | undefined;
  afterAll(async () => {
    await model?.close();
  });

  it("regression: after a restart, a run that was accepted (202) but had not started reads as interrupted, not 404", {
    timeout: 90_000,
  }, async () => {
    // The first message holds the model until the bot is killed, so the second waits its turn.
    model = await startScriptedModelServer({ script: () => ({ hang: true }) });
    const path = databasePath();
    const env = { OPENAI_BASE_URL: model.url, LLM_MODEL: "scripted-model", GLASSBOX_DB: path, GLASSBOX_WEB_PORT: "0" };
    const playground = () => {
      const child = start(process.execPath, ["--import", "tsx", "src/main.ts"], env);
      const url = child
        .line(/^glassbox playground: chat at /)
        .then((line) => `${/chat at (\S+)/.exec(line)?.[1] ?? ""}api`);
      return { child, url };
    };

    const before = playground();
    const api = await before.url;
    const holding = await postJson(`${api}/runs`, { session: "killed", input: "hold the model" });
    await expect.poll(() => model?.requests.length, WAIT).toBe(1);
    const waiting = await postJson(`${api}/runs`, { session: "killed", input: "and then this" });
    expect(waiting.status).toBe(202);
    before.child.process.kill("SIGKILL");
    expect((await before.child.closed).signal).toBe("SIGKILL");

    const after = playground();
    const restarted = await after.url;
    for (const runId of [String(holding.body.runId), String(waiting.body.runId)]) {
      expect((await getJson(`${restarted}/runs/${runId}`)).body, runId).toMatchObject({
        runId,
        status: "interrupted",
        done: true,
        input: expect.any(String),
      });
    }
    after.child.process.kill("SIGTERM");
    expect((await after.child.closed).code).toBe(0);
  });
});
