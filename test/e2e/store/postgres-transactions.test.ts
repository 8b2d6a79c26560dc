// The PostgreSQL store's transactions on a pipelining connection: statements a body sends without
// waiting travel with COMMIT, and still make the transaction whole or nothing. Against the database
// GLASSBOX_TEST_DATABASE_URL names, in a schema of its own.
import { randomBytes } from "node:crypto";
import net from "node:net";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { answeredLater, createPool, inTransaction } from "../../../src/store/postgres-client.js";
import { TEST_DATABASE_URL } from "../helpers/store-targets.js";

const NEEDS = "(needs GLASSBOX_TEST_DATABASE_URL (e.g. postgres://postgres@127.0.0.1:5432/test))";

describe.skipIf(!TEST_DATABASE_URL)(`transactions on PostgreSQL ${NEEDS}`, () => {
  const schema = `tx_${randomBytes(6).toString("hex")}`;
  let pool: pg.Pool;
  const values = async () =>
    (await pool.query<{ value: string }>("SELECT value FROM notes ORDER BY id")).rows.map((row) => row.value);

  beforeAll(async () => {
    pool = createPool({ url: TEST_DATABASE_URL as string, schema, poolSize: 1 });
    await pool.query(`CREATE SCHEMA ${schema}`);
    await pool.query("CREATE TABLE notes (id serial PRIMARY KEY, value text NOT NULL UNIQUE)");
  });
  afterAll(async () => {
    await pool.query(`DROP SCHEMA ${schema} CASCADE`);
    await pool.end();
  });

  it("statements sent without waiting commit in the order sent, and an answer kept for later comes back", async () => {
    let committed = false;
    const ids = await inTransaction(pool, async (transaction) => {
      transaction.send("INSERT INTO notes (value) VALUES ($1)", ["first"]);
      const second = transaction.query<{ id: number }>("INSERT INTO notes (value) VALUES ($1) RETURNING id", [
        "second",
      ]);
      transaction.send("UPDATE notes SET value = value || '!' WHERE value = $1", ["first"]);
      transaction.afterCommit(() => (committed = true));
      return answeredLater(second.then(({ rows }) => rows.map((row) => row.id)));
    });
    expect(ids).toHaveLength(1);
    expect(committed).toBe(true);
    expect(await values()).toEqual(["first!", "second"]);
  });

  it("a statement sent without waiting that fails takes the whole transaction with it; the connection serves the next one", async () => {
    await pool.query("DELETE FROM notes");
    let committed = false;
    const failing = inTransaction(pool, async (transaction) => {
      transaction.send("INSERT INTO notes (value) VALUES ($1)", ["kept only if all is"]);
      transaction.send("INSERT INTO notes (value) VALUES ($1)", [null]); // NOT NULL: fails
      transaction.send("INSERT INTO notes (value) VALUES ($1)", ["after the failure"]);
      transaction.afterCommit(() => (committed = true));
      return "done";
    });
    // The first failure is the outcome, not the aborted transaction's refusals of what came after it.
    await expect(failing).rejects.toMatchObject({ code: "23502" });
    expect(committed).toBe(false);
    expect(await values()).toEqual([]);
    // The one connection of the pool is clean: the next transaction commits.
    await inTransaction(pool, async (transaction) =>
      transaction.send("INSERT INTO notes (value) VALUES ($1)", ["next"]),
    );
    expect(await values()).toEqual(["next"]);
  });

  it("a body that throws after sending rolls back what it sent", async () => {
    await pool.query("DELETE FROM notes");
    const failing = inTransaction(pool, async (transaction) => {
      transaction.send("INSERT INTO notes (value) VALUES ($1)", ["sent, then taken back"]);
      await transaction.query("SELECT 1");
      throw new Error("the body fails");
    });
    await expect(failing).rejects.toThrow("the body fails");
    expect(await values()).toEqual([]);
  });

  it("an answer kept for later that fails fails the transaction", async () => {
    await pool.query("DELETE FROM notes");
    await pool.query("INSERT INTO notes (value) VALUES ('taken')");
    const failing = inTransaction(pool, async (transaction) => {
      transaction.send("INSERT INTO notes (value) VALUES ($1)", ["new"]);
      return answeredLater(transaction.query("INSERT INTO notes (value) VALUES ($1) RETURNING id", ["taken"]));
    });
    await expect(failing).rejects.toMatchObject({ code: "23505" });
    expect(await values()).toEqual(["taken"]);
  });

  it("a statement with values is prepared, whether run by the pool or in a transaction", async () => {
    // While a statement runs, pg_prepared_statements lists it if it was prepared (current_query() is its text).
    const prepared = (text: string) =>
      `${text}, (SELECT count(*) FROM pg_prepared_statements WHERE statement = current_query()) AS prepared`;
    const byPool = prepared("SELECT $1::int + 1 AS next");
    const inside = prepared("SELECT $1::int + 2 AS next");
    for (const value of [1, 2, 3])
      expect((await pool.query(byPool, [value])).rows).toEqual([{ next: value + 1, prepared: 1 }]);
    const answer = await inTransaction(pool, async (transaction) => (await transaction.query(inside, [1])).rows);
    expect(answer).toEqual([{ next: 3, prepared: 1 }]);
    // Without values it is sent as it is (the simple protocol), and not kept.
    expect((await pool.query(prepared("SELECT 1 AS next"))).rows).toEqual([{ next: 1, prepared: 0 }]);
  });

  it("what many callers send at once (statements, and transactions that need no answer midway) leaves in a write per shared connection", async () => {
    await pool.query("DELETE FROM notes");
    const writes = countingWrites();
    try {
      const values = Array.from({ length: 20 }, (_, index) => `note ${index}`);
      await Promise.all([
        ...values.slice(0, 10).map((value) => pool.query("INSERT INTO notes (value) VALUES ($1)", [value])),
        ...values.slice(10).map((value) =>
          inTransaction(pool, async (transaction) => {
            transaction.send("INSERT INTO notes (value) VALUES ($1)", [value]);
            transaction.send("UPDATE notes SET value = value || '!' WHERE value = $1", [value]);
            return value;
          }),
        ),
      ]);
      // Two connections shared (postgres-client.ts): a statement or a transaction each would be 20 writes.
      expect(writes.count()).toBeLessThanOrEqual(2);
    } finally {
      writes.stop();
    }
    const stored = await values();
    expect(stored).toHaveLength(20);
    expect(stored.filter((value) => value.endsWith("!"))).toHaveLength(10);
  });

  it("a transaction that fails on a shared connection takes back only its own statements, not those sent with it", async () => {
    await pool.query("DELETE FROM notes");
    const [failed, inserted] = await Promise.allSettled([
      inTransaction(pool, async (transaction) => {
        transaction.send("INSERT INTO notes (value) VALUES ($1)", ["in the failing transaction"]);
        transaction.send("INSERT INTO notes (value) VALUES ($1)", [null]); // NOT NULL: fails
        return "sent";
      }),
      pool.query("INSERT INTO notes (value) VALUES ($1)", ["sent with it"]),
    ]);
    expect(failed).toMatchObject({ status: "rejected", reason: { code: "23502" } });
    expect(inserted.status).toBe("fulfilled");
    expect(await values()).toEqual(["sent with it"]);
  });

  it("transactions handed over at the same moment commit as one, each with its own answers", async () => {
    await pool.query("DELETE FROM notes");
    const values10 = Array.from({ length: 10 }, (_, index) => `grouped ${index}`);
    const answers = await Promise.all(
      values10.map((value) =>
        inTransaction(pool, async (transaction) => {
          const inserted = transaction.query<{ value: string; tx: string }>(
            "INSERT INTO notes (value) VALUES ($1) RETURNING value, txid_current()::text AS tx",
            [value],
          );
          return answeredLater(inserted.then(({ rows }) => rows[0]));
        }),
      ),
    );
    expect(answers.map((answer) => answer?.value)).toEqual(values10);
    // One transaction, so one commit (and one wait for the disk) for all ten.
    expect(new Set(answers.map((answer) => answer?.tx)).size).toBe(1);
    expect(await values()).toEqual(values10);
  });

  it("a statement sent right behind a failed transaction that carried its first Parse still runs", async () => {
    // pg parses a named statement once per connection: those behind the first use rely on it, and a
    // transaction that fails before it reaches that Parse leaves it unparsed.
    const statement = `SELECT $1::int + 40 AS n_${randomBytes(4).toString("hex")}`;
    const failing = inTransaction(pool, async (transaction) => {
      transaction.send("INSERT INTO notes (value) VALUES ($1)", [null]); // NOT NULL: fails
      transaction.send(statement, [0]);
      return "sent";
    });
    failing.catch(() => {});
    // Once the transaction has been written, a statement on each shared connection, one behind it.
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    const behind = await Promise.all([1, 2].map((value) => pool.query(statement, [value])));
    expect(behind.map((result) => Object.values(result.rows[0] ?? {})[0])).toEqual([41, 42]);
    await expect(failing).rejects.toMatchObject({ code: "23502" });
  });

  it("when one transaction of a group fails, the others still commit, each alone, and only it fails", async () => {
    await pool.query("DELETE FROM notes");
    const send = (value: string | null) =>
      inTransaction(pool, async (transaction) => {
        transaction.send("INSERT INTO notes (value) VALUES ($1)", [`${value} (first)`]);
        const second = transaction.query<{ tx: string }>(
          "INSERT INTO notes (value) VALUES ($1) RETURNING txid_current()::text AS tx",
          [value],
        );
        return answeredLater(second.then(({ rows }) => rows[0]?.tx));
      });
    const outcomes = await Promise.allSettled([send("a"), send(null), send("c")]);
    expect(outcomes.map((outcome) => outcome.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect(outcomes[1]).toMatchObject({ reason: { code: "23502" } });
    const [first, , third] = outcomes as PromiseFulfilledResult<string>[];
    expect(first?.value).not.toEqual(third?.value);
    expect(await values()).toEqual(["a (first)", "a", "c (first)", "c"]);
  });
});

/** Counts the writes this process makes to PostgreSQL's port from now until stop(). */
function countingWrites(): { count(): number; stop(): void } {
  const port = Number(new URL(TEST_DATABASE_URL as string).port || 5432);
  const socket = net.Socket.prototype as unknown as Record<"_writev" | "_write", (...args: unknown[]) => unknown>;
  const originals = { _writev: socket._writev, _write: socket._write };
  let writes = 0;
  for (const method of ["_writev", "_write"] as const) {
    const original = originals[method];
    socket[method] = function (this: net.Socket, ...args: unknown[]) {
      if (this.remotePort === port) writes++;
      return original.apply(this, args);
    };
  }
  return {
    count: () => writes,
    stop: () => Object.assign(socket, originals),
  };
}
