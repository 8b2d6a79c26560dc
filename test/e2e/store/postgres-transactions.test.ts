// The PostgreSQL store's transactions on a pipelining connection: statements a body sends without
// waiting travel with COMMIT, and still make the transaction whole or nothing. Against the database
// GLASSBOX_TEST_DATABASE_URL names, in a schema of its own.
import { randomBytes } from "node:crypto";
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

  it("a statement with values is prepared once per connection, whether run by the pool or in a transaction", async () => {
    const prepared = async (text: string) =>
      (
        await pool.query<{ count: number }>(
          "SELECT count(*) AS count FROM pg_prepared_statements WHERE statement = $1",
          [text],
        )
      ).rows[0]?.count;
    const byPool = "SELECT $1::int + 1 AS next";
    const inside = "SELECT $1::int + 2 AS next";
    expect(await prepared(byPool)).toBe(0);
    for (const value of [1, 2]) expect((await pool.query(byPool, [value])).rows).toEqual([{ next: value + 1 }]);
    await inTransaction(pool, async (transaction) => transaction.query(inside, [1]));
    expect(await prepared(byPool)).toBe(1);
    expect(await prepared(inside)).toBe(1);
  });

  it("what a transaction sends without waiting leaves in one write to the socket, BEGIN and COMMIT with it", async () => {
    await pool.query("DELETE FROM notes");
    const client = await pool.connect();
    const socket = (client as unknown as { connection: { stream: { _writev: unknown; _write: unknown } } }).connection
      .stream;
    let writes = 0;
    for (const method of ["_writev", "_write"] as const) {
      const original = socket[method] as (...args: unknown[]) => unknown;
      socket[method] = (...args: unknown[]) => {
        writes++;
        return original.apply(socket, args);
      };
    }
    client.release();
    await inTransaction(pool, async (transaction) => {
      for (const value of ["one", "two", "three"]) transaction.send("INSERT INTO notes (value) VALUES ($1)", [value]);
      return "sent";
    });
    expect(writes).toBe(1);
    expect(await values()).toEqual(["one", "two", "three"]);
  });
});
