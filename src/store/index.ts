/**
 * Opening the store: PostgreSQL when a database URL is given (GLASSBOX_DATABASE_URL, postgres://...),
 * else SQLite at a file (GLASSBOX_DB, data/glassbox.db by default). Both are the same port.
 */
import { GlassboxError } from "../agent/errors.js";
import { openPostgresPort, type PostgresPort } from "./postgres.js";
import { openSqlitePort, type SqlitePort } from "./sqlite.js";

export type { AfterCommit, StorePort } from "./port.js";
export type * from "./port-data.js";
export type { PostgresPort } from "./postgres.js";
export type { SqlitePort } from "./sqlite.js";

/** Either store; `kind` tells which (and so which run queue goes with it). */
export type AnyStorePort = SqlitePort | PostgresPort;

export interface StorePortOptions {
  /** postgres://... selects PostgreSQL (GLASSBOX_DATABASE_URL). */
  databaseUrl?: string;
  /** A schema of its own inside that database, created if missing (GLASSBOX_DATABASE_SCHEMA). */
  databaseSchema?: string;
  /** Without a URL: the SQLite file (GLASSBOX_DB). */
  databasePath: string;
  /** A long-running process (a bot, a worker): SQLite checkpoints from a thread of its own; both beat for this process. */
  longRunning?: boolean;
  /** Only reads (the command line): SQLite opens an existing file read-only. */
  readOnly?: boolean;
  /** PostgreSQL: connections in the pool (default 10). */
  poolSize?: number;
}

/** The store's settings as the environment gives them. */
export function storePortOptionsFromEnv(env: Record<string, string | undefined> = process.env): StorePortOptions {
  const value = (name: string) => env[name]?.trim() || undefined;
  return {
    databaseUrl: value("GLASSBOX_DATABASE_URL"),
    databaseSchema: value("GLASSBOX_DATABASE_SCHEMA"),
    databasePath: value("GLASSBOX_DB") ?? "data/glassbox.db",
  };
}

/** Opens (and migrates) the store; a setting that is wrong, or a database that cannot be opened, is one sentence. */
export async function openStorePort(options: StorePortOptions): Promise<AnyStorePort> {
  const url = options.databaseUrl;
  if (url === undefined) {
    if (options.databaseSchema !== undefined)
      throw new GlassboxError(
        "configuration",
        "GLASSBOX_DATABASE_SCHEMA names a PostgreSQL schema, but GLASSBOX_DATABASE_URL is not set; set both, or neither to use SQLite at GLASSBOX_DB.",
      );
    return openSqlitePort(options.databasePath, { longRunning: options.longRunning, readOnly: options.readOnly });
  }
  if (!/^postgres(ql)?:\/\//i.test(url)) {
    throw new GlassboxError(
      "configuration",
      "GLASSBOX_DATABASE_URL must be a PostgreSQL URL such as postgres://user@host:5432/glassbox; unset it to use SQLite at GLASSBOX_DB.",
    );
  }
  return openPostgresPort({
    url,
    schema: options.databaseSchema,
    poolSize: options.poolSize,
    longRunning: options.longRunning,
  });
}
