/**
 * The connections the store's statements share. Turns running at once mostly send single statements
 * and transactions that need no answer before their COMMIT; those travel on a few pipelined
 * connections shared by every caller, so that what many turns send in the same moment leaves in one
 * write and is answered in one read, instead of a system call and a server wake-up per statement on
 * a connection of its own. A transaction that waits for an answer midway (it reads, then decides)
 * takes a connection of the pool to itself. Such a body uses only its transaction, never the pool: a
 * statement on a shared connection waits behind the others there, and one of them may be waiting for
 * a row the body holds.
 */
import { createHash } from "node:crypto";
import type { Writable } from "node:stream";
import pg from "pg";

type Query = (config: unknown, values?: unknown, callback?: unknown) => unknown;

export interface SharedConnections {
  /** A connection open and ready; the statements given to it in one go are sent together, in order. */
  connection(): Promise<pg.Client>;
  close(): Promise<void>;
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
  let next = 0;
  let closed = false;
  function connect(slot: number): Promise<pg.Client> {
    const client = new pg.Client({ ...config, pipeline: true });
    const opened = client.connect().then(() => {
      preparingStatements(client, setImmediate);
      return client;
    });
    const drop = () => {
      if (open[slot] === opened) open[slot] = undefined;
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
  return {
    connection() {
      if (closed) return Promise.reject(new Error("the store is closed"));
      const slot = next;
      next = (next + 1) % count;
      return open[slot] ?? connect(slot);
    },
    async close() {
      closed = true;
      const clients = await Promise.allSettled(open.filter((client) => client !== undefined));
      await Promise.all(clients.map((client) => (client.status === "fulfilled" ? client.value.end() : undefined)));
    },
  };
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
): SharedConnections {
  const connections = sharedConnections(config, count, onError);
  pool.query = ((text: string, values?: unknown[]) =>
    connections.connection().then((client) => client.query(text, values))) as typeof pool.query;
  const end = pool.end.bind(pool);
  pool.end = (async () => {
    await connections.close();
    await end();
  }) as typeof pool.end;
  return connections;
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
