/**
 * How the store's writes reach the file: units committed together at the end of each event-loop
 * turn (group commit), and a bot's background thread that checkpoints the WAL and beats for this
 * process's instance.
 */
import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import type Database from "better-sqlite3";
import { HEARTBEAT_EVERY_MS, INSTANCE } from "./instances.js";

interface Unit {
  body: () => unknown;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

/**
 * Group commit. Units wait for the end of the event-loop turn, then run back to back in one
 * transaction, each in a savepoint, and commit once. A burst of runs then writes the pages they
 * share (the tail of the messages table, its index) once a turn instead of once a unit. The
 * transaction is open only while the units run, so no other write of the turn joins it.
 */
export function groupCommit(db: Database.Database) {
  let waiting: Unit[] = [];
  const inSavepoint = db.transaction((body: () => unknown) => body());
  // IMMEDIATE: a unit may read before it writes, and a deferred transaction would then fail at once
  // (SQLITE_BUSY, no waiting) if another connection committed in between.
  const together = db.transaction((units: Unit[]) => {
    // One unit alone (one run at a time) needs no savepoint: the transaction is its all-or-nothing.
    if (units.length === 1) {
      const [unit] = units as [Unit];
      const value = unit.body();
      return [() => unit.resolve(value)];
    }
    return units.map((unit): (() => void) => {
      try {
        const value = inSavepoint(unit.body);
        return () => unit.resolve(value);
      } catch (error) {
        // Some errors (a full disk, an I/O error) make SQLite roll back the whole transaction: then
        // no unit of the group was kept, and all of them fail.
        if (!db.inTransaction) throw error;
        return () => unit.reject(error);
      }
    });
  }).immediate;
  const flush = () => {
    const units = waiting;
    waiting = [];
    if (units.length === 0) return;
    let settle: Array<() => void>;
    try {
      settle = together(units);
    } catch (error) {
      settle = units.map((unit) => () => unit.reject(error));
    }
    for (const done of settle) done();
  };
  return {
    flush,
    add<T>(body: () => T): Promise<T> {
      if (db.inTransaction) throw new Error("units do not nest: run the inner body as part of the outer one");
      return new Promise<T>((resolve, reject) => {
        if (waiting.length === 0) setImmediate(flush);
        waiting.push({ body, resolve: resolve as (value: unknown) => void, reject });
      });
    },
  };
}

const CHECKPOINT_EVERY_MS = 250;
/** With a checkpoint thread, this connection checkpoints only if the WAL grows this far (40 MB) all the same. */
const BACKSTOP_CHECKPOINT_PAGES = 10_000;
/** SQLite's own default: a connection checkpoints once its commits have put this many pages in the WAL. */
const DEFAULT_CHECKPOINT_PAGES = 1_000;

// The thread's whole program. PASSIVE copies what it can without waiting for readers or writers;
// a checkpoint already running on another connection is simply left to finish. A missed heartbeat
// is harmless (the next one comes), so its errors are ignored. Asked to stop, it closes its
// connection and says so in \`ended\` (however it ends): a thread torn down with a database open
// inside a native call can take the whole process with it, and once the store is closed its files
// are the caller's to remove.
const BACKGROUND_PROGRAM = `
const { parentPort, workerData } = require("node:worker_threads");
const ended = new Int32Array(workerData.ended);
process.on("exit", () => {
  Atomics.store(ended, 0, 1);
  Atomics.notify(ended, 0);
});
const Database = require(workerData.driver);
const db = new Database(workerData.path, { fileMustExist: true });
const { id, host, pid, startedAt } = workerData.instance;
const beat = db.prepare("INSERT INTO instances (id, host, pid, started_at, heartbeat_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at");
const heartbeat = () => {
  try {
    beat.run(id, host, pid, startedAt, new Date().toISOString());
  } catch {}
};
heartbeat();
const beating = setInterval(heartbeat, workerData.heartbeatEveryMs);
const checkpointing = setInterval(() => {
  try {
    db.pragma("wal_checkpoint(PASSIVE)");
  } catch (error) {
    if (error.code !== "SQLITE_BUSY") throw error;
  }
}, workerData.everyMs);
parentPort.once("message", () => {
  clearInterval(beating);
  clearInterval(checkpointing);
  try {
    db.close();
  } finally {
    Atomics.store(ended, 0, 1);
    Atomics.notify(ended, 0);
    parentPort.close();
  }
});
`;
/** How long closing the store waits for the thread to close its connection before it is terminated. */
const STOP_WITHIN_MS = 2_000;

/**
 * Checkpoints the WAL from a worker thread, which also beats for this instance (see instances.ts).
 * Should the thread fail, the connection goes back to checkpointing after its own commits, as it
 * does by default.
 */
export function startCheckpointer(db: Database.Database, path: string): { stop(): void } {
  db.pragma(`wal_autocheckpoint = ${BACKSTOP_CHECKPOINT_PAGES}`);
  const driver = createRequire(import.meta.url).resolve("better-sqlite3");
  const ended = new Int32Array(new SharedArrayBuffer(4));
  const worker = new Worker(BACKGROUND_PROGRAM, {
    eval: true,
    workerData: {
      driver,
      ended: ended.buffer,
      path,
      everyMs: CHECKPOINT_EVERY_MS,
      heartbeatEveryMs: HEARTBEAT_EVERY_MS,
      instance: INSTANCE,
    },
  });
  worker.unref(); // never what keeps a process alive
  worker.on("error", () => {
    if (db.open) db.pragma(`wal_autocheckpoint = ${DEFAULT_CHECKPOINT_PAGES}`);
  });
  return {
    // Synchronous, as closing the store is: it returns once the thread's connection is closed.
    stop: () => {
      worker.postMessage("stop");
      if (Atomics.wait(ended, 0, 0, STOP_WITHIN_MS) === "timed-out") void worker.terminate();
    },
  };
}
