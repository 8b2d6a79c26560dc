/**
 * Tables the store port needs beyond the SQLite schema of src/agent/store-schema.ts: the quota
 * ledger (a user's day, and the calls in flight) and cancel requests. Every statement is idempotent,
 * so these can later join store-schema's migrations unchanged; until then they are added when a
 * file lacks them, in one IMMEDIATE transaction (two processes opening a file at once: the second
 * waits, then finds them there).
 */
import type Database from "better-sqlite3";

const TABLES = ["quota_days", "quota_reservations", "cancel_requests"];

export const PORT_TABLES_SQL = `
  -- a user's spending on a UTC day: what settled model calls spent (cost null: a model without a price)
  CREATE TABLE IF NOT EXISTS quota_days (
    user_id TEXT NOT NULL,
    day TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    cost REAL,
    PRIMARY KEY (user_id, day)
  );
  -- model calls in flight, each holding room under the caps until it settles or its hold ends
  CREATE TABLE IF NOT EXISTS quota_reservations (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    day TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    cost REAL NOT NULL,
    expires_at TEXT NOT NULL
  );
  CREATE INDEX IF NOT EXISTS quota_reservations_by_user ON quota_reservations(user_id, day);
  -- "stop": the runs it reached, checked between steps by whoever runs them
  CREATE TABLE IF NOT EXISTS cancel_requests (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    requested_at TEXT NOT NULL
  );
  CREATE INDEX IF NOT EXISTS cancel_requests_by_run ON cancel_requests(run_id);
  CREATE INDEX IF NOT EXISTS cancel_requests_by_age ON cancel_requests(requested_at);
`;

export function addPortTables(db: Database.Database): void {
  const present = db
    .prepare(
      `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN (${TABLES.map(() => "?").join(", ")})`,
    )
    .pluck();
  if (present.get(...TABLES) === TABLES.length) return;
  db.transaction(() => db.exec(PORT_TABLES_SQL)).immediate();
}
