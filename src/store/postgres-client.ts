/**
 * The PostgreSQL connection: a pool whose values come back as glassbox keeps them (counts and ids as
 * numbers, moments as ISO strings, days as "YYYY-MM-DD"), an optional schema of its own, transactions
 * retried on a deadlock or serialization failure, and one sentence for a database that cannot be
 * reached or opened. A URL's password never appears in what is shown. Each connection prepares a
 * statement with parameters the first time it runs it, and afterwards only binds and executes it.
 */
import { createHash } from "node:crypto";
import type { Writable } from "node:stream";
import pg from "pg";
import { GlassboxError } from "../agent/errors.js";
import { redactUrl } from "../redact.js";

/** What the store's modules query through: the pool, or a client inside a transaction. */
export interface Db {
  query<R extends pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
}

const OIDS = { int8: 20, numeric: 1700, date: 1082, timestamptz: 1184 };
const parseTimestamp = pg.types.getTypeParser(OIDS.timestamptz);
const PARSERS: Record<number, (value: string) => unknown> = {
  [OIDS.int8]: Number, // ids and counts stay far below 2^53
  [OIDS.numeric]: Number, // sums of integers
  [OIDS.date]: (value) => value,
  [OIDS.timestamptz]: (value) => (parseTimestamp(value) as Date).toISOString(),
};
const TYPES = {
  getTypeParser: ((oid: number, format?: "text" | "binary") =>
    PARSERS[oid] ?? pg.types.getTypeParser(oid, format as "text")) as typeof pg.types.getTypeParser,
};

export const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

export interface PostgresConnection {
  url: string;
  /** A schema of its own (created if missing), so several deployments or test runs share one database. */
  schema?: string;
  poolSize?: number;
}

/** The URL as shown to people: its user, but no password (neither before the host nor in the query). */
export function locationOf(url: string): string {
  try {
    new URL(url);
    return redactUrl(url, { keepUser: true });
  } catch {
    throw new GlassboxError(
      "configuration",
      "GLASSBOX_DATABASE_URL is not a URL; give it as postgres://user@host:5432/database, or unset it to use SQLite at GLASSBOX_DB.",
    );
  }
}

export function createPool(connection: PostgresConnection): pg.Pool {
  if (connection.schema !== undefined && !SCHEMA_NAME.test(connection.schema)) {
    throw new GlassboxError(
      "configuration",
      `The schema name "${connection.schema.slice(0, 80)}" is not usable; give lowercase letters, digits and "_", starting with a letter (GLASSBOX_DATABASE_SCHEMA).`,
    );
  }
  const pool = new pg.Pool({
    connectionString: connection.url,
    max: connection.poolSize ?? 10,
    types: TYPES,
    connectionTimeoutMillis: 10_000,
    application_name: "glassbox",
    // A statement is written without waiting for the one before it to be answered: a transaction's
    // BEGIN travels with its first statement.
    pipeline: true,
    ...(connection.schema ? { options: `-c search_path=${connection.schema}` } : {}),
  });
  // An idle connection that breaks (the server restarted) is dropped; the next query opens another.
  pool.on("error", () => {});
  pool.on("connect", preparingStatements);
  return pool;
}

type Query = (config: unknown, values?: unknown, callback?: unknown) => unknown;

/**
 * Makes `client` run each statement with parameters as a prepared statement, named by its text:
 * PostgreSQL parses and plans it once per connection instead of at every call, which is much of
 * its work for the store's small statements (bench/pipeline-cost.ts). A statement that names its
 * columns with `*` is left unprepared: a migration that adds a column would break its cached plan.
 *
 * The statements a caller sends in one go (a transaction's BEGIN and first statement; what it sends
 * without awaiting, and COMMIT) leave in one write: the connection's socket is held from the first of
 * them until the current tick's work is done. A write per statement costs a system call on each side.
 */
export function preparingStatements(client: pg.PoolClient): void {
  const query = client.query.bind(client) as Query;
  const socket = (client as unknown as { connection: { stream: Writable } }).connection.stream;
  let holding = false;
  const release = () => {
    holding = false;
    socket.uncork();
  };
  (client as unknown as { query: Query }).query = (config, values, callback) => {
    if (!holding) {
      holding = true;
      socket.cork();
      process.nextTick(release);
    }
    // The pool's own query() passes a callback; a transaction's statements await a promise.
    return typeof config === "string" && Array.isArray(values) && !ALL_COLUMNS.test(config)
      ? query({ name: statementName(config), text: config, values }, undefined, callback)
      : query(config, values, callback);
  };
}

const ALL_COLUMNS = /\b(select|returning)\s+\*|\.\*/i;
const statementNames = new Map<string, string>();

function statementName(text: string): string {
  let name = statementNames.get(text);
  if (name === undefined) {
    name = `glassbox_${createHash("sha256").update(text).digest("base64url").slice(0, 24)}`;
    statementNames.set(text, name);
  }
  return name;
}

const RETRYABLE = new Set(["40001", "40P01"]); // serialization failure, deadlock detected

/**
 * A transaction: its client's queries; `send` for a statement whose answer nothing in the body needs
 * (the transaction waits for it before it counts as committed, and fails if it fails), so that it
 * travels with the statements after it and with COMMIT; and work to do once it has committed (the
 * run queue wakes its workers then, outside the transaction).
 */
export interface PostgresTransaction extends Pick<pg.ClientBase, "query"> {
  send(text: string, values?: unknown[]): void;
  afterCommit(callback: () => void): void;
}

/** What a body hands back when it is made of answers still on their way: awaited once COMMIT is sent behind them. */
export class Answered<T> {
  constructor(readonly answer: Promise<T>) {}
}

/** The answer of `answer` once the transaction has committed; see inTransaction. */
export const answeredLater = <T>(answer: Promise<T>) => new Answered(answer);

/**
 * Runs `body` in a transaction: committed when it resolves, rolled back when it or any statement in it
 * fails; retried a few times on a deadlock or a serialization failure. `begin` may ask for another
 * isolation level. The connection pipelines: BEGIN travels with the body's first statement, and what
 * the body sends without awaiting (`send`, or an `answeredLater` it returns) travels with COMMIT, so
 * a body that needs no answer before its end is one round trip. Callbacks handed to `afterCommit`
 * run once the transaction has committed, in order.
 */
export async function inTransaction<T>(
  pool: pg.Pool,
  body: (transaction: PostgresTransaction) => Promise<T | Answered<T>>,
  begin = "BEGIN",
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const client = await pool.connect();
    const committed: Array<() => void> = [];
    const answers: Promise<unknown>[] = [];
    // Each statement's answer is kept, with a handler at once: one may fail while the body awaits another.
    const kept = <A>(answer: Promise<A>) => {
      answers.push(answer);
      answer.catch(() => {});
      return answer;
    };
    const query = client.query.bind(client) as (text: string, values?: unknown[]) => Promise<pg.QueryResult>;
    const transaction: PostgresTransaction = {
      query: ((text: string, values?: unknown[]) => kept(query(text, values))) as pg.ClientBase["query"],
      send: (text, values) => void kept(query(text, values)),
      afterCommit: (callback) => void committed.push(callback),
    };
    let broken = false;
    try {
      kept(query(begin));
      const result = await body(transaction);
      const commit = query("COMMIT");
      const value = result instanceof Answered ? result.answer : Promise.resolve(result);
      // A statement that failed ends the transaction in a rollback, which COMMIT then reports as done:
      // the first failure is the transaction's outcome.
      const settled = await Promise.allSettled([...answers, value, commit]);
      const failed = settled.find((outcome) => outcome.status === "rejected");
      if (failed) throw failed.reason;
      for (const callback of committed) callback();
      return (settled[answers.length] as PromiseFulfilledResult<T>).value;
    } catch (error) {
      await Promise.allSettled(answers); // the connection answers in order: nothing of this body is left on it
      await client.query("ROLLBACK").catch(() => (broken = true));
      if (attempt < 4 && RETRYABLE.has((error as { code?: string }).code ?? "")) continue;
      throw error;
    } finally {
      client.release(broken);
    }
  }
}

/** One sentence for a database that cannot be opened; errors of any other kind pass unchanged. */
export function describeOpenFailure(error: unknown, location: string): unknown {
  if (error instanceof GlassboxError) return error;
  const code = (error as { code?: unknown }).code;
  if (typeof code !== "string") {
    if (error instanceof Error && /timeout/i.test(error.message))
      return sentence(
        `PostgreSQL at ${location} did not answer within 10 s (GLASSBOX_DATABASE_URL); check that it runs and is reachable from here.`,
        error,
      );
    return error;
  }
  const where = `PostgreSQL at ${location}`;
  if (
    ["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "ECONNRESET"].includes(code)
  ) {
    return sentence(
      `I can't reach ${where} (${code}); start it, or set GLASSBOX_DATABASE_URL to where it runs.`,
      error,
    );
  }
  if (code === "28P01" || code === "28000")
    return sentence(
      `${where} refused the login (${serverReason(error)}); check the user and password in GLASSBOX_DATABASE_URL.`,
      error,
    );
  if (code === "3D000")
    return sentence(
      `${where} has no such database (${serverReason(error)}); create it, or name another in GLASSBOX_DATABASE_URL.`,
      error,
    );
  if (code === "42501")
    return sentence(
      `${where} does not let this user create glassbox's tables (${serverReason(error)}); grant it CREATE on the database or schema, or use another user.`,
      error,
    );
  if (code.startsWith("08") || code === "57P03" || code === "53300")
    return sentence(`${where} refused the connection (${serverReason(error)}); try again, or check the server.`, error);
  return error;
}

function serverReason(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.length > 160 ? `${message.slice(0, 160)}…` : message;
}

function sentence(text: string, cause: unknown): GlassboxError {
  return new GlassboxError("configuration", text, undefined, { cause });
}
