// The SQLite store on a real file: migrations, pragmas, exact message round trips, transactions,
// session epochs, listings, event claims across connections, and facts with FTS5.
import { spawn } from "node:child_process";
import { statSync } from "node:fs";
import { hostname } from "node:os";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { channelOf } from "../../../src/agent/memory.js";
import { INSTANCE, STALE_AFTER_MS } from "../../../src/store/instances.js";
import type { Message } from "../../../src/agent/types.js";
import { databasePath, openTestStore, removeDatabases } from "../../helpers/memory.js";

afterEach(removeDatabases);

const entries = (messages: Message[]) => messages.map((message, index) => ({ message, tokens: 10 + index }));

describe("schema and connection", () => {
  it("migrates a new file to the latest user_version, and reopening keeps data without migrating again", () => {
    const path = databasePath();
    const first = openTestStore(path);
    const version = first.db.pragma("user_version", { simple: true }) as number;
    expect(version).toBeGreaterThanOrEqual(1);
    const tables = first.db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").pluck().all();
    expect(tables).toEqual(
      expect.arrayContaining(["approvals", "claims", "facts", "messages", "runs", "sessions", "steps", "summaries"]),
    );
    first.appendMessages("cli:one", null, entries([{ role: "user", content: "kept across reopening" }]));
    first.close();

    // Re-running a migration would fail on CREATE TABLE or wipe nothing silently; either way we would notice.
    const second = openTestStore(path);
    expect(second.db.pragma("user_version", { simple: true })).toBe(version);
    expect(second.messagesAfter("cli:one", 0, 0).map((stored) => stored.message)).toEqual([
      { role: "user", content: "kept across reopening" },
    ]);
  });

  it("migrates once when several processes open a new file at the same moment (regression: 'table sessions already exists')", async () => {
    const path = databasePath();
    expect(await openFromProcesses(path, 6)).toEqual(Array(6).fill("opened"));
    expect(openTestStore(path).db.pragma("user_version", { simple: true })).toBeGreaterThanOrEqual(1);
  });

  it("runs in WAL mode with foreign keys enforced and a busy timeout", () => {
    const store = openTestStore();
    expect(store.db.pragma("journal_mode", { simple: true })).toBe("wal");
    expect(store.db.pragma("foreign_keys", { simple: true })).toBe(1);
    expect(store.db.pragma("busy_timeout", { simple: true })).toBeGreaterThan(0);
    // A message of a run that does not exist violates runs(id).
    expect(() => store.appendMessages("cli:fk", "run_missing", entries([{ role: "user", content: "x" }]))).toThrow(
      /FOREIGN KEY/,
    );
  });
});

/**
 * Opens the store at `path` from `count` separate processes at once: each child loads the store, says
 * "ready", and opens the file when the parent says "go" to all of them. Resolves with what each printed.
 */
async function openFromProcesses(path: string, count: number): Promise<string[]> {
  const storeModule = fileURLToPath(new URL("../../../src/store/sqlite-store.ts", import.meta.url));
  const code = `
    import { openSqliteStore } from ${JSON.stringify(storeModule)};
    process.stdout.write("ready\\n");
    process.stdin.once("data", () => {
      try { openSqliteStore(process.argv[1]).close(); process.stdout.write("opened\\n"); }
      catch (error) { process.stdout.write("failed: " + error.message + "\\n"); }
      process.exit(0);
    });`;
  const children = Array.from({ length: count }, () =>
    spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", code, path], {
      stdio: ["pipe", "pipe", "inherit"],
    }),
  );
  const outputs = children.map((child) => {
    let text = "";
    const ready = new Promise<void>((resolve) =>
      child.stdout.on("data", (chunk: Buffer) => {
        text += chunk.toString();
        if (text.includes("ready")) resolve();
      }),
    );
    const exited = new Promise<string>((resolve) =>
      child.on("close", () => resolve(text.replace("ready\n", "").trim())),
    );
    return { child, ready, exited };
  });
  await Promise.all(outputs.map((output) => output.ready));
  for (const { child } of outputs) child.stdin.write("go\n");
  return Promise.all(outputs.map((output) => output.exited));
}

describe("checkpoints", () => {
  it("with checkpointInBackground, a thread of its own copies the WAL into the database file; the store's commits do not", async () => {
    const path = databasePath();
    const store = openTestStore(path, { checkpointInBackground: true });
    // Its own commits would checkpoint only past 10,000 pages: what reaches the file, the thread copied.
    expect(store.db.pragma("wal_autocheckpoint", { simple: true })).toBe(10_000);
    const before = statSync(path).size;
    for (let index = 0; index < 300; index++)
      store.appendMessages("cli:big", null, entries([{ role: "user", content: `${index} ${"x".repeat(20_000)}` }]));
    const deadline = Date.now() + 10_000;
    while (statSync(path).size < before + 5_000_000 && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 50));
    expect(statSync(path).size).toBeGreaterThan(before + 5_000_000);
    expect(store.messagesAfter("cli:big", 0, 0)).toHaveLength(300);
    store.close();
  });
});

describe("units", () => {
  it("atomically() runs the units of one turn together at its end: each whole or not at all, each resolved once committed", async () => {
    const path = databasePath();
    const store = openTestStore(path);
    const other = openTestStore(path);
    const roles = () => other.messagesAfter("cli:unit", 0, 0).map((stored) => stored.message.content);
    store.startRun({ runId: "run_unit", sessionId: "cli:unit", userId: "U1", input: "hi" });

    const first = store.atomically(() => {
      store.appendMessages("cli:unit", "run_unit", entries([{ role: "user", content: "hi" }]));
      store.appendMessages("cli:unit", "run_unit", entries([{ role: "assistant", content: "hello" }]));
      return "first";
    });
    const failing = store.atomically(() => {
      store.appendMessages("cli:unit", "run_unit", entries([{ role: "user", content: "lost with the unit" }]));
      store.endRun({
        runId: "run_unit",
        status: "final",
        output: "lost too",
        steps: 1,
        promptTokens: 0,
        completionTokens: 0,
        paused: null,
        error: null,
      });
      throw new Error("the unit fails");
    });
    const third = store.atomically(() =>
      store.appendMessages("cli:unit", "run_unit", entries([{ role: "assistant", content: "after it" }])),
    );
    expect(roles()).toEqual([]); // nothing runs before the turn ends
    expect(store.db.inTransaction).toBe(false); // and no transaction waits open meanwhile

    await expect(first).resolves.toBe("first");
    await expect(failing).rejects.toThrow("the unit fails");
    await expect(third).resolves.toHaveLength(1);
    expect(roles()).toEqual(["hi", "hello", "after it"]);
    expect(other.db.prepare("SELECT status FROM runs WHERE id = 'run_unit'").pluck().get()).toBe("running");
    expect(() => store.db.transaction(() => store.atomically(() => 1))()).toThrow("units do not nest");
  });

  it("a unit alone in its turn (no savepoint) is still whole or not at all, its messages too", async () => {
    const path = databasePath();
    const store = openTestStore(path);
    const other = openTestStore(path);
    store.startRun({ runId: "run_alone", sessionId: "cli:alone", userId: "U1", input: "hi" });
    const failing = store.atomically(() => {
      store.appendMessages(
        "cli:alone",
        "run_alone",
        entries([
          { role: "user", content: "lost" },
          { role: "assistant", content: "lost too" },
        ]),
      );
      throw new Error("the unit fails");
    });
    await expect(failing).rejects.toThrow("the unit fails");
    expect(other.messagesAfter("cli:alone", 0, 0)).toEqual([]);
    expect(store.db.inTransaction).toBe(false);
    await expect(
      store.atomically(() =>
        store.appendMessages("cli:alone", "run_alone", entries([{ role: "user", content: "kept" }])),
      ),
    ).resolves.toHaveLength(1);
    expect(other.messagesAfter("cli:alone", 0, 0).map((stored) => stored.message.content)).toEqual(["kept"]);
  });

  it("close() commits the units still waiting for the end of the turn", async () => {
    const path = databasePath();
    const store = openTestStore(path);
    const waiting = store.atomically(() =>
      store.appendMessages("cli:closing", null, entries([{ role: "user", content: "kept" }])),
    );
    store.close();
    await expect(waiting).resolves.toHaveLength(1);
    expect(
      openTestStore(path)
        .messagesAfter("cli:closing", 0, 0)
        .map((stored) => stored.message.content),
    ).toEqual(["kept"]);
  });
});

describe("messages", () => {
  it("round-trip exactly: assistant tool_calls, tool results, null content, system notes", () => {
    const store = openTestStore();
    store.startRun({ runId: "run_1", sessionId: "slack:T1:C1:1.1", userId: "U1", input: "weather?" });
    const messages: Message[] = [
      { role: "user", content: "What's the weather in Paris and in Oslo?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "call_a", type: "function", function: { name: "weather", arguments: '{"city":"Paris"}' } },
          { id: "call_b", type: "function", function: { name: "weather", arguments: '{"city":"Oslo","unit":"C"}' } },
        ],
      },
      { role: "tool", tool_call_id: "call_a", content: '{"status":"success","data":{"c":21}}' },
      {
        role: "tool",
        tool_call_id: "call_b",
        content: '{"status":"error","error":{"type":"timeout","message":"slow"}}',
      },
      { role: "system", content: "A guard's note." },
      {
        role: "assistant",
        content: "Let me check once more.",
        tool_calls: [{ id: "call_c", type: "function", function: { name: "weather", arguments: "{}" } }],
      },
      { role: "tool", tool_call_id: "call_c", content: "" },
      { role: "assistant", content: "Paris 21 °C; Oslo did not answer. 🌦️" },
      { role: "assistant", content: null },
    ];
    const ids = store.appendMessages("slack:T1:C1:1.1", "run_1", entries(messages));
    expect(ids).toHaveLength(messages.length);
    expect([...ids].sort((a, b) => a - b)).toEqual(ids);

    const stored = store.messagesAfter("slack:T1:C1:1.1", 0, 0);
    expect(stored.map((row) => row.message)).toEqual(messages);
    expect(stored.map((row) => row.id)).toEqual(ids);
    expect(stored.map((row) => row.tokens)).toEqual(messages.map((_, index) => 10 + index));
    expect(stored.every((row) => row.runId === "run_1")).toBe(true);
    expect(store.messagesAfter("slack:T1:C1:1.1", 0, ids[3] as number).map((row) => row.message)).toEqual(
      messages.slice(4),
    );
  });

  it("appends in one transaction: a failing insert in the middle leaves none of the batch", () => {
    const store = openTestStore();
    store.appendMessages("cli:tx", null, entries([{ role: "user", content: "before" }]));
    const batch = [
      { message: { role: "user", content: "first of batch" } as Message, tokens: 5 },
      { message: { role: "assistant", content: "second of batch" } as Message, tokens: null as unknown as number }, // NOT NULL fails
      { message: { role: "user", content: "third of batch" } as Message, tokens: 5 },
    ];
    expect(() => store.appendMessages("cli:tx", null, batch)).toThrow(/NOT NULL/);
    expect(store.messagesAfter("cli:tx", 0, 0).map((row) => row.message.content)).toEqual(["before"]);
    // Nor does a failed first batch leave its session behind.
    expect(() => store.appendMessages("cli:never", null, batch)).toThrow();
    expect(store.listSessions().map((session) => session.id)).toEqual(["cli:tx"]);
  });

  it("resetSession starts a new epoch: old messages stay in the table but are not read for the new one", () => {
    const store = openTestStore();
    store.appendMessages(
      "web:r",
      null,
      entries([
        { role: "user", content: "old question" },
        { role: "assistant", content: "old answer" },
      ]),
    );
    expect(store.epoch("web:r")).toBe(0);
    expect(store.resetSession("web:r")).toBe(true);
    expect(store.epoch("web:r")).toBe(1);
    expect(store.messagesAfter("web:r", 1, 0)).toEqual([]);
    store.appendMessages("web:r", null, entries([{ role: "user", content: "new question" }]));
    expect(store.messagesAfter("web:r", 1, 0).map((row) => row.message.content)).toEqual(["new question"]);
    expect(store.messagesAfter("web:r", 0, 0).map((row) => row.message.content)).toEqual([
      "old question",
      "old answer",
    ]);
    expect(store.db.prepare("SELECT count(*) FROM messages WHERE session_id = 'web:r'").pluck().get()).toBe(3);
    expect(store.resetSession("web:unknown")).toBe(false);
  });

  it("keeps summaries per epoch, the latest first", () => {
    const store = openTestStore();
    const ids = store.appendMessages(
      "web:s",
      null,
      entries([
        { role: "user", content: "a" },
        { role: "assistant", content: "b" },
        { role: "user", content: "c" },
      ]),
    );
    store.saveSummary("web:s", 0, {
      content: "first",
      tokens: 1,
      firstMessageId: ids[0] as number,
      lastMessageId: ids[0] as number,
    });
    store.saveSummary("web:s", 0, {
      content: "second",
      tokens: 2,
      firstMessageId: ids[1] as number,
      lastMessageId: ids[1] as number,
    });
    expect(store.latestSummary("web:s", 0)).toEqual({ content: "second", tokens: 2, lastMessageId: ids[1] });
    store.resetSession("web:s");
    expect(store.latestSummary("web:s", 1)).toBeUndefined();
  });
});

describe("sessions and runs", () => {
  it("leaves a session's row alone while its run appends messages (one page less a commit), and touches it when the run ends", async () => {
    const store = openTestStore();
    const touched = () =>
      store.db.prepare("SELECT updated_at FROM sessions WHERE id = 'web:t'").pluck().get() as string;
    store.startRun({ runId: "run_t1", sessionId: "web:t", userId: "U1", input: "one" });
    const started = touched();
    await new Promise((resolve) => setTimeout(resolve, 5)); // a later millisecond, so a touch would show
    store.appendMessages(
      "web:t",
      "run_t1",
      entries([
        { role: "user", content: "one" },
        { role: "assistant", content: "1" },
      ]),
    );
    expect(touched()).toBe(started);
    store.endRun({
      runId: "run_t1",
      status: "final",
      output: "1",
      steps: 1,
      promptTokens: 1,
      completionTokens: 1,
      paused: null,
      error: null,
    });
    expect(Date.parse(touched())).toBeGreaterThan(Date.parse(started));
    // Messages of no run (nothing started the session) still create and touch it.
    store.appendMessages("web:loose", null, entries([{ role: "user", content: "hi" }]));
    expect(store.db.prepare("SELECT count(*) FROM sessions WHERE id = 'web:loose'").pluck().get()).toBe(1);
  });

  it("listSessions counts messages, billed tokens and runs, most recent activity first", () => {
    const store = openTestStore();
    store.startRun({ runId: "run_a1", sessionId: "web:a", userId: "U1", input: "one" });
    store.appendMessages(
      "web:a",
      "run_a1",
      entries([
        { role: "user", content: "one" },
        { role: "assistant", content: "1" },
      ]),
    );
    store.endRun({
      runId: "run_a1",
      status: "final",
      output: "1",
      steps: 1,
      promptTokens: 100,
      completionTokens: 7,
      paused: null,
      error: null,
    });
    store.startRun({ runId: "run_a2", sessionId: "web:a", userId: "U1", input: "two" });
    store.appendMessages("web:a", "run_a2", entries([{ role: "user", content: "two" }]));
    store.endRun({
      runId: "run_a2",
      status: "error",
      output: "failed",
      steps: 1,
      promptTokens: 50,
      completionTokens: 0,
      paused: null,
      error: '{"code":"model_unavailable"}',
    });
    store.startRun({ runId: "run_b1", sessionId: "web:b", userId: "U2", input: "hi" });
    store.appendMessages(
      "web:b",
      "run_b1",
      entries([
        { role: "user", content: "hi" },
        { role: "assistant", content: "hello" },
      ]),
    );
    store.endRun({
      runId: "run_b1",
      status: "final",
      output: "hello",
      steps: 1,
      promptTokens: 20,
      completionTokens: 3,
      paused: null,
      error: null,
    });

    const sessions = store.listSessions();
    const byId = [...sessions].sort((a, b) => a.id.localeCompare(b.id));
    expect(byId.map(({ id, messageCount, tokens, runCount }) => ({ id, messageCount, tokens, runCount }))).toEqual([
      { id: "web:a", messageCount: 3, tokens: 157, runCount: 2 },
      { id: "web:b", messageCount: 2, tokens: 23, runCount: 1 },
    ]);
    // Most recent first (two writes may share a millisecond, so only the order of the times is checked).
    const times = sessions.map((session) => Date.parse(session.lastActivity));
    expect(times.every((time) => !Number.isNaN(time))).toBe(true);
    expect([...times].sort((a, b) => b - a)).toEqual(times);
    expect(Date.parse(byId[0]?.lastActivity ?? "")).toBeGreaterThanOrEqual(
      Date.parse(
        store.db.prepare("SELECT max(created_at) FROM messages WHERE session_id = 'web:a'").pluck().get() as string,
      ),
    );

    const run = store.db
      .prepare(
        "SELECT status, output, steps, prompt_tokens, completion_tokens, error, ended_at FROM runs WHERE id = 'run_a2'",
      )
      .get();
    expect(run).toMatchObject({
      status: "error",
      output: "failed",
      steps: 1,
      prompt_tokens: 50,
      completion_tokens: 0,
      error: '{"code":"model_unavailable"}',
    });
    expect((run as { ended_at: string | null }).ended_at).not.toBeNull();
  });
});

describe("runs of a process that died", () => {
  it("interruptOrphanedRuns() marks a dead process's running runs interrupted, never a live one's or a finished run", async () => {
    const path = databasePath();
    const store = openTestStore(path);
    // A real process that has exited: its pid is free.
    const child = spawn(process.execPath, ["-e", ""]);
    const deadPid = child.pid as number;
    await new Promise((resolve) => child.once("exit", resolve));
    const start = (runId: string) => store.startRun({ runId, sessionId: "cli:runs", userId: "U1", input: "hi" });
    start("run_dead");
    start("run_live");
    start("run_done");
    start("run_other_host");
    start("run_old");
    const host = hostname();
    const setOwner = store.db.prepare("UPDATE runs SET owner = ? WHERE id = ?");
    setOwner.run(`${host}:${deadPid}`, "run_dead");
    setOwner.run("some-other-host:1", "run_other_host");
    setOwner.run(null, "run_old"); // from before owners were recorded
    store.endRun({
      runId: "run_done",
      status: "final",
      output: "ok",
      steps: 1,
      promptTokens: 1,
      completionTokens: 1,
      paused: null,
      error: null,
    });

    expect(store.interruptOrphanedRuns()).toBe(2);
    const statusOf = store.db.prepare("SELECT status FROM runs WHERE id = ?").pluck();
    expect(["run_dead", "run_live", "run_done", "run_other_host", "run_old"].map((id) => statusOf.get(id))).toEqual([
      "interrupted",
      "running",
      "final",
      "running",
      "interrupted",
    ]);
    expect(store.db.prepare("SELECT ended_at FROM runs WHERE id = 'run_dead'").pluck().get()).toEqual(
      expect.any(String),
    );
    expect(store.interruptOrphanedRuns()).toBe(0);
  });

  it("regression: a run owned by this host and pid under another instance (a container's PID 1, restarted) is interrupted, though the pid is alive", () => {
    const store = openTestStore();
    const start = (runId: string, owner: string) => {
      store.startRun({ runId, sessionId: "cli:restarted", userId: "U1", input: "hi" });
      store.db.prepare("UPDATE runs SET owner = ? WHERE id = ?").run(owner, runId);
    };
    // The process this one replaced: same host, same pid, its own instance id.
    store.db
      .prepare("INSERT INTO instances (id, host, pid, started_at) VALUES ('before-the-restart', ?, ?, ?)")
      .run(hostname(), process.pid, new Date(0).toISOString());
    start("run_of_the_replaced", "before-the-restart");
    start("run_legacy_same_pid", `${hostname()}:${process.pid}`); // as owners were written before instances
    store.startRun({ runId: "run_mine", sessionId: "cli:restarted", userId: "U1", input: "hi" });

    expect(store.interruptOrphanedRuns()).toBe(2);
    const statusOf = store.db.prepare("SELECT status FROM runs WHERE id = ?").pluck();
    expect(["run_of_the_replaced", "run_legacy_same_pid", "run_mine"].map((id) => statusOf.get(id))).toEqual([
      "interrupted",
      "interrupted",
      "running",
    ]);
    // The instance that is gone is forgotten; this one, which owns a running run, is kept.
    expect(store.db.prepare("SELECT id, host, pid FROM instances").all()).toEqual([
      { id: INSTANCE.id, host: hostname(), pid: process.pid },
    ]);
  });

  it("an instance whose heartbeat is stale is gone, on any host; one beating recently, or never (the command line), on another host may still run", () => {
    const store = openTestStore();
    const beatAgo = (milliseconds: number | null) =>
      milliseconds === null ? null : new Date(Date.now() - milliseconds).toISOString();
    const instances: Array<[id: string, host: string, heartbeat: string | null]> = [
      ["stale-elsewhere", "another-host", beatAgo(STALE_AFTER_MS + 60_000)],
      ["fresh-elsewhere", "another-host", beatAgo(1_000)],
      ["silent-elsewhere", "another-host", beatAgo(null)],
      // A pid of this host that exists (this process's parent), reused by a process that is not the owner.
      ["stale-here", hostname(), beatAgo(STALE_AFTER_MS + 60_000)],
    ];
    for (const [id, host, heartbeat] of instances) {
      store.db
        .prepare("INSERT INTO instances (id, host, pid, started_at, heartbeat_at) VALUES (?, ?, ?, ?, ?)")
        .run(id, host, process.ppid, new Date(0).toISOString(), heartbeat);
      store.startRun({ runId: `run_${id}`, sessionId: "cli:beats", userId: "U1", input: "hi" });
      store.db.prepare("UPDATE runs SET owner = ? WHERE id = ?").run(id, `run_${id}`);
    }
    expect(store.interruptOrphanedRuns()).toBe(2);
    const statusOf = store.db.prepare("SELECT status FROM runs WHERE id = ?").pluck();
    expect(instances.map(([id]) => [id, statusOf.get(`run_${id}`)])).toEqual([
      ["stale-elsewhere", "interrupted"],
      ["fresh-elsewhere", "running"],
      ["silent-elsewhere", "running"],
      ["stale-here", "interrupted"],
    ]);
  });

  it("a bot's checkpoint thread beats for its instance", async () => {
    const path = databasePath();
    const store = openTestStore(path, { checkpointInBackground: true });
    const other = openTestStore(path);
    const heartbeat = () =>
      other.db.prepare("SELECT host, pid, heartbeat_at AS heartbeatAt FROM instances WHERE id = ?").get(INSTANCE.id) as
        | { heartbeatAt: string }
        | undefined;
    await expect
      .poll(heartbeat, { timeout: 10_000, interval: 25 })
      .toEqual({ host: hostname(), pid: process.pid, heartbeatAt: expect.any(String) });
    expect(Date.now() - Date.parse(heartbeat()?.heartbeatAt ?? "")).toBeLessThan(STALE_AFTER_MS);
    store.close();
  });
});

describe("a run accepted before it starts", () => {
  it("acceptRun() stores the run as accepted under this process; its start makes it running (once), and it can end without starting", () => {
    const path = databasePath();
    const store = openTestStore(path);
    const run = { runId: "run_accepted", sessionId: "web:queue", userId: "web:alice", input: "hi" };
    store.acceptRun(run);
    const other = openTestStore(path); // committed, for another connection to see
    const row = other.db.prepare(
      "SELECT session_id AS sessionId, user_id AS userId, status, owner, accepted_at AS acceptedAt FROM runs WHERE id = ?",
    );
    expect(row.get("run_accepted")).toEqual({
      sessionId: "web:queue",
      userId: "web:alice",
      status: "accepted",
      owner: INSTANCE.id,
      acceptedAt: expect.any(String),
    });
    expect(store.sessionOwner("web:queue")).toBe("web:alice");

    // Memory, then the trace, start each run they see: the first start takes the accepted row over.
    expect(store.startRun(run)).toBe(true);
    expect(store.startRun(run)).toBe(false);
    expect(row.get("run_accepted")).toMatchObject({ status: "running", owner: INSTANCE.id });
    const outcome = {
      runId: "run_accepted",
      status: "error",
      output: "refused",
      steps: 0,
      promptTokens: 0,
      completionTokens: 0,
      paused: null,
      error: null,
    };
    expect(store.endUnstartedRun(outcome)).toBe(false); // it started: only its own end ends it

    store.acceptRun({ ...run, runId: "run_refused" });
    expect(store.endUnstartedRun({ ...outcome, runId: "run_refused" })).toBe(true);
    expect(row.get("run_refused")).toMatchObject({ status: "error" });
  });

  it("interruptOrphanedRuns() marks a gone process's accepted runs interrupted, never this process's", () => {
    const store = openTestStore();
    store.acceptRun({ runId: "run_waiting_here", sessionId: "web:queue", userId: "web:alice", input: "hi" });
    store.acceptRun({ runId: "run_waiting_there", sessionId: "web:queue", userId: "web:alice", input: "hi" });
    store.db.prepare("UPDATE runs SET owner = ? WHERE id = 'run_waiting_there'").run(`${hostname()}:${process.pid}`);
    expect(store.interruptOrphanedRuns()).toBe(1);
    const statusOf = store.db.prepare("SELECT status FROM runs WHERE id = ?").pluck();
    expect([statusOf.get("run_waiting_here"), statusOf.get("run_waiting_there")]).toEqual(["accepted", "interrupted"]);
  });
});

describe("a paused run resumed", () => {
  it("resumeRun() makes an awaiting run running again under this process, and leaves any other run alone", () => {
    const store = openTestStore();
    store.startRun({ runId: "run_paused", sessionId: "cli:resume", userId: "U1", input: "cancel it" });
    store.endRun({
      runId: "run_paused",
      status: "awaiting_approval",
      output: "Waiting",
      steps: 1,
      promptTokens: 1,
      completionTokens: 1,
      paused: '{"pending":[]}',
      error: null,
    });
    store.startRun({ runId: "run_done", sessionId: "cli:resume", userId: "U1", input: "hi" });
    store.endRun({
      runId: "run_done",
      status: "final",
      output: "ok",
      steps: 1,
      promptTokens: 1,
      completionTokens: 1,
      paused: null,
      error: null,
    });
    expect(store.pausedRun("run_paused")).toBe('{"pending":[]}');

    store.resumeRun("run_paused");
    store.resumeRun("run_done");
    const row = store.db.prepare("SELECT status, paused, owner, ended_at AS endedAt FROM runs WHERE id = ?");
    expect(row.get("run_paused")).toEqual({ status: "running", paused: null, owner: INSTANCE.id, endedAt: null });
    expect(row.get("run_done")).toMatchObject({ status: "final" });
    // A second resume of the same pause finds nothing to resume; this process is alive, so nothing is interrupted.
    expect(store.pausedRun("run_paused")).toBeUndefined();
    expect(store.interruptOrphanedRuns()).toBe(0);
  });
});

describe("claims", () => {
  it("claim() is true once and false ever after, also from a second connection to the same file", () => {
    const path = databasePath();
    const first = openTestStore(path);
    const second = openTestStore(path);
    expect(first.claim("Ev123")).toBe(true);
    expect(first.claim("Ev123")).toBe(false);
    expect(second.claim("Ev123")).toBe(false);
    expect(second.claim("Ev456")).toBe(true);
    expect(first.claim("Ev456")).toBe(false);
    // A raw connection sees both, committed.
    const raw = new Database(path, { readonly: true });
    expect(raw.prepare("SELECT id FROM claims ORDER BY id").pluck().all()).toEqual(["Ev123", "Ev456"]);
    raw.close();
  });

  it("claim() with several ids claims them all in one commit, and is true only when none was claimed before", () => {
    const store = openTestStore();
    expect(store.claim("slack:event:Ev1", "slack:message:C1:1.000001")).toBe(true);
    // A redelivery under a new event id of a message already claimed: refused, and its id claimed too.
    expect(store.claim("slack:event:Ev2", "slack:message:C1:1.000001")).toBe(false);
    expect(store.claim("slack:event:Ev2")).toBe(false);
    expect(store.db.prepare("SELECT id FROM claims ORDER BY id").pluck().all()).toEqual([
      "slack:event:Ev1",
      "slack:event:Ev2",
      "slack:message:C1:1.000001",
    ]);
  });

  it("pruneClaims() forgets only claims older than the moment given", () => {
    const store = openTestStore();
    store.claim("old");
    store.claim("new");
    store.db.prepare("UPDATE claims SET claimed_at = '2000-01-01T00:00:00.000Z' WHERE id = 'old'").run();
    expect(store.pruneClaims(new Date(Date.now() - 86_400_000))).toBe(1);
    expect(store.claim("new")).toBe(false);
    expect(store.claim("old")).toBe(true);
  });
});

describe("facts", () => {
  it("ranks by bm25: the fact that matches more of the words comes first", () => {
    const store = openTestStore();
    const weak = store.addFact("U1", "user", "The office server room is on the second floor.");
    const strong = store.addFact("U1", "user", "The staging server deploy key is stored in the team vault.");
    store.addFact("U1", "user", "Likes espresso in the morning.");
    const found = store.searchFacts("U1", "cli:x", "Where is the deploy key for the staging server?", 5);
    expect(found.map((fact) => fact.id).slice(0, 2)).toEqual([strong, weak]);
    expect(found[0]).toMatchObject({
      userId: "U1",
      scope: "user",
      content: "The staging server deploy key is stored in the team vault.",
    });
    expect(store.searchFacts("U1", "cli:x", "staging server deploy", 1).map((fact) => fact.id)).toEqual([strong]);
  });

  it("does not match on common words alone (regression: 'is' and 'the' pulled in every fact)", () => {
    const store = openTestStore();
    store.addFact("U1", "user", "The office is on the second floor.");
    expect(store.searchFacts("U1", "cli:x", "What is the weather like?", 5)).toEqual([]);
    expect(store.searchFacts("U1", "cli:x", "Which floor is the office on?", 5)).toHaveLength(1);
  });

  it("never returns another user's personal facts", () => {
    const store = openTestStore();
    store.addFact("U2", "user", "U2 prefers answers in French.");
    const own = store.addFact("U1", "user", "U1 prefers answers in German.");
    expect(store.searchFacts("U1", "slack:T1:C1", "prefers answers French German", 10).map((fact) => fact.id)).toEqual([
      own,
    ]);
    expect(store.searchFacts("U3", "slack:T1:C1", "prefers answers French German", 10)).toEqual([]);
  });

  it("finds a channel fact from any thread of that channel, never from another channel", () => {
    const store = openTestStore();
    const shared = store.addFact("U1", "slack:T1:C1", "The release train leaves on Thursdays.");
    expect(channelOf("slack:T1:C1:1234.5")).toBe("slack:T1:C1");
    expect(
      store
        .searchFacts("U1", channelOf("slack:T1:C1:1234.5"), "when does the release train leave", 5)
        .map((fact) => fact.id),
    ).toEqual([shared]);
    expect(store.searchFacts("U1", channelOf("slack:T1:C1:9999.1"), "release train", 5).map((fact) => fact.id)).toEqual(
      [shared],
    );
    expect(store.searchFacts("U1", channelOf("slack:T1:C2:1234.5"), "release train", 5)).toEqual([]);
    expect(store.searchFacts("U1", channelOf("discord:dm:C1"), "release train", 5)).toEqual([]);
  });

  it("shares a channel fact with everyone in that channel (what remember's shared_with_channel promises), but not personal facts", () => {
    const store = openTestStore();
    const shared = store.addFact("U1", "discord:G1:C1", "The on-call rota lives in the wiki.");
    store.addFact("U1", "user", "U1's on-call rota starts Monday.");
    expect(
      store.searchFacts("U2", channelOf("discord:G1:C1:thread9"), "on-call rota", 5).map((fact) => fact.id),
    ).toEqual([shared]);
    expect(store.searchFacts("U2", channelOf("discord:G1:C2"), "on-call rota", 5)).toEqual([]);
  });

  it("forgetFact works only for the fact's owner, and a forgotten fact is no longer found", () => {
    const store = openTestStore();
    const id = store.addFact("U1", "user", "Parking spot number 42 in the garage.");
    expect(store.forgetFact("U2", id)).toBe(false);
    expect(store.searchFacts("U1", "cli:x", "parking garage", 5).map((fact) => fact.id)).toEqual([id]);
    expect(store.forgetFact("U1", id)).toBe(true);
    expect(store.forgetFact("U1", id)).toBe(false);
    expect(store.searchFacts("U1", "cli:x", "parking garage", 5)).toEqual([]);
    // The FTS index forgot it too, so a new fact with the same words is the only match.
    const again = store.addFact("U1", "user", "Parking moved to the north garage.");
    expect(store.searchFacts("U1", "cli:x", "parking garage", 5).map((fact) => fact.id)).toEqual([again]);
  });

  it.each([
    'AND OR "NEAR(',
    '"',
    "'); DROP TABLE facts; --",
    "NEAR(vault key, 2)",
    "deploy* -staging ^key content:vault",
    "key AND NOT vault",
    "(((",
    "!!! ??? ...",
    "",
    "🙂 ключ vault",
    Array.from({ length: 200 }, (_, index) => `word${index}`).join(" "),
  ])("does not throw on an FTS query made of %j", (query) => {
    const store = openTestStore();
    const id = store.addFact("U1", "user", "The vault key rotates monthly.");
    const found = store.searchFacts("U1", "cli:x", query, 5);
    expect(Array.isArray(found)).toBe(true);
    if (/vault|key/i.test(query)) expect(found.map((fact) => fact.id)).toEqual([id]);
  });
});
