/** Switching a SQLite file to WAL when other threads or processes may be opening it too. */
import type Database from "better-sqlite3";

/**
 * WAL needs a moment of exclusive access. When another process is opening or closing the same file
 * just then, SQLite reports it busy at once instead of waiting through the busy timeout: wait a
 * little and try again, for up to about two seconds.
 */
export function switchToWal(db: Database.Database): void {
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (let attempt = 1; ; attempt++) {
    try {
      db.pragma("journal_mode = WAL");
      return;
    } catch (error) {
      if ((error as { code?: string }).code !== "SQLITE_BUSY" || attempt === 40) throw error;
      Atomics.wait(pause, 0, 0, 10 + attempt * 2); // a synchronous sleep: opening a store is synchronous
    }
  }
}
