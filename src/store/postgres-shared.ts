/**
 * The connections the store's statements share. Turns running at once mostly send single statements
 * and transactions that need no answer before their COMMIT; those travel on a few pipelined
 * connections shared by every caller, so that what many turns send in the same moment leaves in one
 * write and is answered in one read, instead of a system call and a server wake-up per statement on
 * a connection of its own. A transaction that waits for an answer midway (it reads, then decides)
 * takes a connection of the pool to itself. Such a body uses only its transaction, never the pool: a
 * statement on a shared connection waits behind the others there, and one of them may be waiting for
 * a row the body holds.
 *
 * The transactions handed over in the same turn of the event loop also commit together, as one
 * transaction (a group commit): each COMMIT waits for the server's write-ahead log to reach the disk,
 * and on one connection those waits come one after the other, so a commit per turn's step was much of
 * the server's work. When anything in a group fails, each of its transactions runs again on its own,
 * so that only the one at fault fails; none of a group's answers is given before the group commits.
 * Groups take turns on one connection, so that two groups never wait for rows the other holds.
 */
import { createHash } from "node:crypto";
import type { Writable } from "node:stream";
import pg from "pg";

type Query = (config: unknown, values?: unknown, callback?: unknown) => unknown;

export interface SharedConnections {
  /** A connection open and ready; the statements given to it in one go are sent together, in order. */
  connection(): Promise<pg.Client>;
  /**
   * Runs `statements` in a transaction, committed together with the others given in the same turn of
   * the event loop; settles once it has committed (or failed). Each statement hears its own answer.
   */
  commit(statements: HeldStatement[]): Promise<void>;
  close(): Promise<void>;
}

/** A statement of a transaction, answered through its callbacks. */
export interface HeldStatement {
  text: string;
  values?: unknown[];
  resolve(result: pg.QueryResult): void;
  reject(error: unknown): void;
}

interface HeldTransaction {
  statements: HeldStatement[];
  committed(): void;
  failed(error: unknown): void;
}

/**
 * What is left to do at the end of this turn of the event loop: first the transactions gathered in it
 * are sent, then the connections' held writes go (so that a group leaves in the same write as the
 * statements sent before it).
 */
interface TurnEnd {
  send: Array<() => void>;
  release: Array<() => void>;
}
let turnEnd: TurnEnd | undefined;

function atTurnEnd(step: keyof TurnEnd, callback: () => void): void {
  if (!turnEnd) {
    const steps: TurnEnd = { send: [], release: [] };
    turnEnd = steps;
    setImmediate(() => {
      for (const send of steps.send) send(); // may hold more writes, released below
      turnEnd = undefined;
      for (const release of steps.release) release();
    });
  }
  turnEnd[step].push(callback);
}

/**
 * `count` pipelined connections made with `config`, opened when first needed and again after one
 * breaks (`onError` hears why).
 */
function sharedConnections(
  config: pg.ClientConfig,
  count: number,
  onError?: (error: Error) => void,
): SharedConnections {
  const open: Array<Promise<pg.Client> | undefined> = new Array(count).fill(undefined);
  const ready: Array<pg.Client | undefined> = new Array(count).fill(undefined);
  let next = 0;
  let closed = false;
  function connect(slot: number): Promise<pg.Client> {
    const client = new pg.Client({ ...config, pipeline: true });
    const opened = client.connect().then(() => {
      preparingStatements(client, (release) => atTurnEnd("release", release));
      if (open[slot] === opened) ready[slot] = client;
      return client;
    });
    const drop = () => {
      if (open[slot] !== opened) return;
      open[slot] = undefined;
      ready[slot] = undefined;
    };
    client.on("error", (error) => {
      onError?.(error);
      drop();
    });
    client.on("end", drop);
    opened.catch(drop);
    open[slot] = opened;
    return opened;
  }
  /** The connection in `slot`: itself when it is open, so that what is sent now joins this turn's write. */
  const onSlot = (slot: number): pg.Client | Promise<pg.Client> => {
    if (closed) return Promise.reject(new Error("the store is closed"));
    return ready[slot] ?? open[slot] ?? connect(slot);
  };
  /** The connections in turn, for single statements; groups all go on the first. */
  const connection = () => {
    const slot = next;
    next = (next + 1) % count;
    return onSlot(slot);
  };
  const groupConnection = () => onSlot(0);
  let gathering: HeldTransaction[] | undefined;
  return {
    connection: async () => connection(),
    commit(statements) {
      return new Promise<void>((committed, failed) => {
        if (!gathering) {
          const group: HeldTransaction[] = (gathering = []);
          atTurnEnd("send", () => {
            gathering = undefined;
            commitGroup(groupConnection, group);
          });
        }
        gathering.push({ statements, committed, failed });
      });
    },
    async close() {
      closed = true;
      const clients = await Promise.allSettled(open.filter((client) => client !== undefined));
      await Promise.all(clients.map((client) => (client.status === "fulfilled" ? client.value.end() : undefined)));
    },
  };
}

type Connection = () => pg.Client | Promise<pg.Client>;

/** Runs `send` on a connection: at once when one is open, else once it is. */
function onConnection(connection: Connection, send: (client: pg.Client) => Promise<void>): Promise<void> {
  try {
    const client = connection();
    return client instanceof pg.Client ? send(client) : client.then(send);
  } catch (error) {
    return Promise.reject(error);
  }
}

/**
 * Sends `group` as one transaction: BEGIN, every statement, COMMIT. When the server takes it back
 * (a statement of one of them failed), each is sent again on its own, so that only the one at fault
 * fails; when it cannot be known whether the group committed (the connection broke), each hears why.
 */
function commitGroup(connection: Connection, group: HeldTransaction[]): void {
  const [only] = group;
  if (group.length === 1 && only) return void commitAlone(connection, only);
  onConnection(connection, async (client) => {
    const answers = await sendTransaction(
      client,
      group.flatMap((transaction) => transaction.statements),
    );
    if (committedAll(answers)) {
      let index = 1;
      for (const transaction of group) index = answered(transaction, answers, index);
    } else if (rolledBack(answers)) {
      for (const transaction of group) void commitAlone(connection, transaction);
    } else throw firstFailure(answers);
  }).catch((error: unknown) => {
    for (const transaction of group) fail(transaction, error);
  });
}

/**
 * Sends `transaction` on its own. One that failed only because a statement in it had been parsed by
 * an earlier one that failed first (pg sends a statement's Parse once per connection, and those
 * behind it in the pipeline rely on it) is sent once more: nothing of it ran.
 */
function commitAlone(connection: Connection, transaction: HeldTransaction, attempt = 1): Promise<void> {
  return onConnection(connection, async (client) => {
    const answers = await sendTransaction(client, transaction.statements);
    if (committedAll(answers)) return void answered(transaction, answers, 1);
    const failure = firstFailure(answers);
    if (attempt === 1 && rolledBack(answers) && isUnparsed(failure)) return commitAlone(connection, transaction, 2);
    fail(transaction, failure);
  }).catch((error: unknown) => fail(transaction, error));
}

/** BEGIN, the statements, COMMIT, all sent at once; the answers of all, in that order. */
function sendTransaction(
  client: pg.Client,
  statements: HeldStatement[],
): Promise<PromiseSettledResult<pg.QueryResult>[]> {
  const query = (text: string, values?: unknown[]) => client.query(text, values) as Promise<pg.QueryResult>;
  return Promise.allSettled([
    query("BEGIN"),
    ...statements.map((statement) => query(statement.text, statement.values)),
    query("COMMIT"),
  ]);
}

/** Gives `transaction`'s statements their answers, from `answers[index]` on; the index after them. */
function answered(transaction: HeldTransaction, answers: PromiseSettledResult<pg.QueryResult>[], index: number) {
  let next = index;
  for (const statement of transaction.statements)
    statement.resolve((answers[next++] as PromiseFulfilledResult<pg.QueryResult>).value);
  transaction.committed();
  return next;
}

const firstFailure = (answers: PromiseSettledResult<pg.QueryResult>[]): unknown =>
  answers.find((answer): answer is PromiseRejectedResult => answer.status === "rejected")?.reason ??
  new Error("the transaction was rolled back");

/** A named statement the server does not know: its Parse travelled with an earlier statement that failed first. */
const isUnparsed = (error: unknown) => (error as { code?: string }).code === "26000";

/** Whether every statement was answered and COMMIT committed (after a failure it answers ROLLBACK). */
const committedAll = (answers: PromiseSettledResult<pg.QueryResult>[]) =>
  answers.every((answer) => answer.status === "fulfilled") &&
  (answers.at(-1) as PromiseFulfilledResult<pg.QueryResult>).value.command === "COMMIT";

/**
 * Whether the server answered that nothing was committed: COMMIT answered ROLLBACK, or refused with an
 * error that leaves the connection up (a FATAL one ends it, perhaps after the commit).
 */
function rolledBack(answers: PromiseSettledResult<pg.QueryResult>[]): boolean {
  const commit = answers.at(-1);
  if (commit?.status === "fulfilled") return commit.value.command === "ROLLBACK";
  return commit?.reason instanceof pg.DatabaseError && commit.reason.severity === "ERROR";
}

function fail(transaction: HeldTransaction, error: unknown): void {
  for (const statement of transaction.statements) statement.reject(error);
  transaction.failed(error);
}

const sharedOf = new WeakMap<pg.Pool, SharedConnections>();

/** The connections `pool`'s statements share (sharingQueries), if it has them. */
export const sharedConnectionsOf = (pool: pg.Pool): SharedConnections | undefined => sharedOf.get(pool);

/**
 * Runs one statement that writes as a transaction of its own, committed with the others given in this
 * turn of the event loop (on a pool without shared connections, as it is).
 */
export function commitTogether(pool: pg.Pool, text: string, values?: unknown[]): Promise<pg.QueryResult> {
  const shared = sharedOf.get(pool);
  if (!shared) return pool.query(text, values);
  return new Promise((resolve, reject) => void shared.commit([{ text, values, resolve, reject }]).catch(reject));
}

/**
 * Makes `pool.query` run on `count` connections shared by all its callers (opened with the pool's
 * `config`), and `pool.end` close them too; `pool.connect` still hands out a connection of its own.
 */
export function sharingQueries(
  pool: pg.Pool,
  config: pg.ClientConfig,
  count: number,
  onError?: (error: Error) => void,
): void {
  const connections = sharedConnections(config, count, onError);
  sharedOf.set(pool, connections);
  // A single statement never runs when it fails as unparsed (see commitAlone): it is sent once more.
  const query = (client: pg.Client, text: string, values?: unknown[]) =>
    (client.query(text, values) as Promise<pg.QueryResult>).catch((error: unknown) => {
      if (isUnparsed(error)) return client.query(text, values);
      throw error;
    });
  pool.query = ((text: string, values?: unknown[]) =>
    connections.connection().then((client) => query(client, text, values))) as typeof pool.query;
  const end = pool.end.bind(pool);
  pool.end = (async () => {
    await connections.close();
    await end();
  }) as typeof pool.end;
}

/**
 * Makes `client` run each statement with parameters as a prepared statement, named by its text:
 * PostgreSQL parses and plans it once per connection instead of at every call, which is much of
 * its work for the store's small statements (bench/pipeline-cost.ts). A statement that names its
 * columns with `*` is left unprepared: a migration that adds a column would break its cached plan.
 *
 * What the connection is given in one go leaves in one write: its socket is held from the first
 * statement until `later` (the end of the current tick, or of this turn of the event loop for a
 * shared connection). A write per statement costs a system call on each side.
 */
export function preparingStatements(
  client: pg.ClientBase,
  later: (release: () => void) => unknown = process.nextTick,
): void {
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
      later(release);
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
