/**
 * The PostgreSQL connection: a pool whose values come back as glassbox keeps them (counts and ids as
 * numbers, moments as ISO strings, days as "YYYY-MM-DD"), an optional schema of its own, transactions
 * retried on a deadlock or serialization failure, and one sentence for a database that cannot be
 * reached or opened. A URL's password never appears in what is shown. Each connection prepares a
 * statement with parameters the first time it runs it, and afterwards only binds and executes it.
 * Single statements, and transactions that need no answer before their COMMIT, travel on a few
 * connections every caller shares, and such transactions sent at the same moment commit as one
 * (postgres-shared.ts).
 */
import pg from "pg";
import { GlassboxError } from "../agent/errors.js";
import { redactUrl } from "../redact.js";
import { type HeldStatement, preparingStatements, sharedConnectionsOf, sharingQueries } from "./postgres-shared.js";

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
  const shared = {
    connectionString: connection.url,
    types: TYPES,
    connectionTimeoutMillis: 10_000,
    application_name: "glassbox",
    ...(connection.schema ? { options: `-c search_path=${connection.schema}` } : {}),
  };
  // A statement is written without waiting for the one before it to be answered: a transaction's
  // BEGIN travels with its first statement.
  const pool = new pg.Pool({ ...shared, max: connection.poolSize ?? 10, pipeline: true });
  // An idle connection that breaks (the server restarted) is dropped; the next query opens another.
  pool.on("error", () => {});
  pool.on("connect", (client) => preparingStatements(client));
  sharingQueries(pool, shared, SHARED_CONNECTIONS);
  return pool;
}

/** Connections shared by every caller of a pool (postgres-shared.ts); a few keep one slow statement from holding all. */
const SHARED_CONNECTIONS = 2;

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
 * fails; retried a few times on a deadlock or a serialization failure. What the body sends without
 * awaiting (`send`, or an `answeredLater` it returns) travels with COMMIT. A body that needs no answer
 * before its end is sent whole on a shared connection, committed together with the other such
 * transactions of this turn of the event loop (postgres-shared.ts); one that waits for an answer takes
 * a connection of its own from the moment it waits. Callbacks handed to `afterCommit` run once it has
 * committed, in order.
 */
export async function inTransaction<T>(
  pool: pg.Pool,
  body: (transaction: PostgresTransaction) => Promise<T | Answered<T>>,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await transactionOnce(pool, body);
    } catch (error) {
      if (attempt < 4 && RETRYABLE.has((error as { code?: string }).code ?? "")) continue;
      throw error;
    }
  }
}

async function transactionOnce<T>(
  pool: pg.Pool,
  body: (transaction: PostgresTransaction) => Promise<T | Answered<T>>,
): Promise<T> {
  const committed: Array<() => void> = [];
  const answers: Promise<unknown>[] = [];
  // Each statement's answer is kept, with a handler at once: one may fail while the body awaits another.
  const kept = <A>(answer: Promise<A>) => {
    answers.push(answer);
    answer.catch(() => {});
    return answer;
  };
  // The body's statements are held until it ends or waits for one of them; then they go, in order.
  const held: HeldStatement[] = [];
  let client: pg.PoolClient | undefined;
  const run = (text: string, values?: unknown[]) =>
    client
      ? (client.query(text, values) as Promise<pg.QueryResult>)
      : new Promise<pg.QueryResult>((resolve, reject) => held.push({ text, values, resolve, reject }));
  const transaction: PostgresTransaction = {
    query: ((text: string, values?: unknown[]) => kept(run(text, values))) as pg.ClientBase["query"],
    send: (text, values) => void kept(run(text, values)),
    afterCommit: (callback) => void committed.push(callback),
  };
  const outcome = body(transaction);
  let ended = false;
  outcome.then(
    () => (ended = true),
    () => (ended = true),
  );
  const shared = sharedConnectionsOf(pool);
  // The body's own microtasks first: a body that waits for none of its statements' answers has ended by then
  // (its statements are held until then anyway: a shared connection sends at the end of this turn).
  if (shared) await new Promise<void>((resolve) => setImmediate(resolve));
  const sendHeld = (connection: pg.ClientBase) => {
    kept(connection.query("BEGIN"));
    for (const statement of held.splice(0))
      (connection.query(statement.text, statement.values) as Promise<pg.QueryResult>).then(
        statement.resolve,
        statement.reject,
      );
  };
  if (shared && ended) {
    const result = await outcome; // a body that threw has sent nothing
    return committedValue(shared.commit(held.splice(0)), result, answers, committed);
  }
  client = await pool.connect();
  let broken = false;
  try {
    sendHeld(client);
    const result = await outcome;
    return await committedValue(client.query("COMMIT"), result, answers, committed);
  } catch (error) {
    await Promise.allSettled(answers); // the connection answers in order: nothing of this body is left on it
    await client.query("ROLLBACK").catch(() => (broken = true));
    throw error;
  } finally {
    client.release(broken);
  }
}

/** The body's value once COMMIT and every statement before it are answered; the first failure otherwise. */
async function committedValue<T>(
  commit: Promise<unknown>,
  result: T | Answered<T>,
  answers: Promise<unknown>[],
  committed: Array<() => void>,
): Promise<T> {
  const value = result instanceof Answered ? result.answer : Promise.resolve(result);
  // A statement that failed ends the transaction in a rollback, which COMMIT then reports as done:
  // the first failure is the transaction's outcome.
  const settled = await Promise.allSettled([...answers, value, commit]);
  const failed = settled.find((outcome) => outcome.status === "rejected");
  if (failed) throw failed.reason;
  for (const callback of committed) callback();
  return (settled[answers.length] as PromiseFulfilledResult<T>).value;
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
