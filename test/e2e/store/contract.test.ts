// One contract for every store implementation: the same operations, the same answers, the same
// guarantees under concurrency. SQLite always; PostgreSQL whenever GLASSBOX_TEST_DATABASE_URL names
// a database (each test in a schema of its own, dropped afterwards). Also: how the store is chosen
// from the settings, and what a person reads when a database cannot be opened.
import { describe, expect, it } from "vitest";
import { GlassboxError } from "../../../src/agent/errors.js";
import { openStorePort, storePortOptionsFromEnv } from "../../../src/store/index.js";
import { approvalsContract } from "./contract-approvals.js";
import { eraseContract } from "./contract-erase.js";
import { conversationsContract, factsContract } from "./contract-conversations.js";
import { feedbackContract } from "./contract-feedback.js";
import { gatesContract } from "./contract-gates.js";
import { readingsContract } from "./contract-readings.js";
import { runsContract } from "./contract-runs.js";
import { schedulesContract } from "./contract-schedules.js";
import { TARGETS, TEST_DATABASE_URL, useContract } from "../helpers/store-targets.js";

for (const target of TARGETS) {
  const title =
    target.kind === "sqlite" && !TEST_DATABASE_URL
      ? "store contract: SQLite (PostgreSQL not run here: GLASSBOX_TEST_DATABASE_URL is not set)"
      : `store contract: ${target.name}`;
  describe(title, () => {
    const contract = useContract(target);
    describe("conversations", () => conversationsContract(contract));
    describe("facts", () => factsContract(contract));
    describe("runs", () => runsContract(contract));
    describe("approvals", () => approvalsContract(contract));
    describe("gates", () => gatesContract(contract));
    describe("readings", () => readingsContract(contract));
    describe("feedback", () => feedbackContract(contract));
    describe("erasure", () => eraseContract(contract));
    describe("schedules", () => schedulesContract(contract));
    it("ping answers while the handle is open (readiness), and fails once it is closed", async () => {
      const store = await contract.open();
      await expect(store.ping()).resolves.toBeUndefined();
      await store.close();
      await expect(store.ping()).rejects.toThrow();
    });
  });
}

describe("choosing and opening the store", () => {
  it("reads GLASSBOX_DATABASE_URL, GLASSBOX_DATABASE_SCHEMA and GLASSBOX_DB, with SQLite at data/glassbox.db by default", () => {
    expect(storePortOptionsFromEnv({})).toEqual({
      databaseUrl: undefined,
      databaseSchema: undefined,
      databasePath: "data/glassbox.db",
    });
    expect(
      storePortOptionsFromEnv({
        GLASSBOX_DATABASE_URL: " postgres://db/glassbox ",
        GLASSBOX_DATABASE_SCHEMA: "bot",
        GLASSBOX_DB: "x.db",
      }),
    ).toEqual({
      databaseUrl: "postgres://db/glassbox",
      databaseSchema: "bot",
      databasePath: "x.db",
    });
  });

  const refusal = async (options: Parameters<typeof openStorePort>[0]) => {
    const error = await openStorePort(options).then(
      async (store) => {
        await store.close();
        throw new Error("the store opened");
      },
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(GlassboxError);
    expect((error as GlassboxError).code).toBe("configuration");
    return (error as Error).message;
  };

  it("refuses a URL that is not PostgreSQL's, a schema without a URL, and a schema name it cannot use, in one sentence each", async () => {
    expect(await refusal({ databaseUrl: "mysql://root:hunter2@db/glassbox", databasePath: "x.db" })).toBe(
      "GLASSBOX_DATABASE_URL must be a PostgreSQL URL such as postgres://user@host:5432/glassbox; unset it to use SQLite at GLASSBOX_DB.",
    );
    expect(await refusal({ databaseSchema: "bot", databasePath: "x.db" })).toMatch(
      /^GLASSBOX_DATABASE_SCHEMA names a PostgreSQL schema, but GLASSBOX_DATABASE_URL is not set; .*\.$/,
    );
    expect(
      await refusal({
        databaseUrl: "postgres://127.0.0.1:1/glassbox",
        databaseSchema: "Robert'); DROP",
        databasePath: "x.db",
      }),
    ).toMatch(/^The schema name .* is not usable; .*GLASSBOX_DATABASE_SCHEMA\)\.$/);
  });

  it("says in one sentence, without the password, that a PostgreSQL server cannot be reached", async () => {
    const message = await refusal({
      databaseUrl: "postgres://glassbox:s3cret-password@127.0.0.1:1/glassbox",
      databasePath: "x.db",
    });
    expect(message).toBe(
      "I can't reach PostgreSQL at postgres://glassbox@127.0.0.1:1/glassbox (ECONNREFUSED); start it, or set GLASSBOX_DATABASE_URL to where it runs.",
    );
  });

  if (TEST_DATABASE_URL !== undefined) {
    const url = new URL(TEST_DATABASE_URL);
    url.pathname = "/glassbox_no_such_database";
    it("says in one sentence that a PostgreSQL database does not exist", async () => {
      expect(await refusal({ databaseUrl: url.href, databasePath: "x.db" })).toMatch(
        /^PostgreSQL at .*glassbox_no_such_database has no such database \(.*\); create it, or name another in GLASSBOX_DATABASE_URL\.$/,
      );
    });
  }
});
