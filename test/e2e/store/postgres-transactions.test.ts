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
});
