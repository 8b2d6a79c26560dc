// Opening the store's file (openSqliteStore, so every entry point): a damaged file, one that is not a
// database, one that cannot be opened or written, and reading without creating — each refused with
// one sentence naming the file and GLASSBOX_DB, or read as asked. Real files in a temp dir.
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import Database from "better-sqlite3";
import { GlassboxError } from "../../../src/agent/errors.js";
import { migrate, SCHEMA_VERSION } from "../../../src/store/sqlite-schema.js";
import { openSqliteStore } from "../../../src/store/sqlite-store.js";
import { databaseExists } from "../../../src/store/sqlite-file.js";
import { makeImmutable, writeDamagedDatabase, writeNotADatabase } from "../helpers/database-files.js";
import { databasePath, openTestStore, removeDatabases } from "../../helpers/memory.js";

const undo: Array<() => void> = [];
afterEach(() => {
  for (const step of undo.splice(0)) step();
  removeDatabases();
});

/** What openSqliteStore throws, which must be glassbox's configuration error: one sentence, no stack for a person. */
function refusal(open: () => unknown): string {
  let caught: unknown;
  try {
    open();
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(GlassboxError);
  expect((caught as GlassboxError).code).toBe("configuration");
  const message = (caught as GlassboxError).message;
  expect(message).not.toContain("\n");
  expect(message).toContain("GLASSBOX_DB");
  return message;
}

describe("a database that is damaged or not a database", () => {
  it("regression: a damaged database (quick_check fails) is refused at open with one sentence naming the file, instead of a store that fails every message", () => {
    const path = databasePath();
    writeDamagedDatabase(path);
    const message = refusal(() => openSqliteStore(path));
    expect(message).toMatch(
      new RegExp(
        `^The database ${path} is damaged \\(SQLite's quick_check: .+\\); restore it from a backup, or move it aside and glassbox starts a new one there \\(or set GLASSBOX_DB to another file\\)\\.$`,
      ),
    );
    expect(refusal(() => openSqliteStore(path, { readOnly: true }))).toBe(message);
  });

  it("regression: a file that is not a database is refused in one sentence naming it", () => {
    const path = databasePath();
    writeNotADatabase(path);
    expect(refusal(() => openSqliteStore(path))).toBe(
      `${path} is not a SQLite database; set GLASSBOX_DB to glassbox's database file, or move this one aside and glassbox starts a new one there.`,
    );
    expect(refusal(() => openSqliteStore(path, { readOnly: true }))).toContain("is not a SQLite database");
  });
});

describe("a database that cannot be opened or written", () => {
  it("regression: a path under a file, or a folder where the file should be, says so naming GLASSBOX_DB", () => {
    const directory = join(databasePath(), "..");
    writeFileSync(join(directory, "a-file"), "x");
    const underFile = join(directory, "a-file", "glassbox.db");
    const expected = `The database ${underFile} cannot be opened: a part of its path is a file, not a folder; set GLASSBOX_DB to a file in a folder glassbox may write.`;
    expect(refusal(() => openSqliteStore(underFile))).toBe(expected);
    expect(refusal(() => databaseExists(underFile))).toBe(expected);

    const folder = join(directory, "folder.db");
    mkdirSync(folder);
    expect(refusal(() => openSqliteStore(folder))).toBe(
      `The database ${folder} is a folder, not a file; set GLASSBOX_DB to a file's path, such as data/glassbox.db.`,
    );
  });

  it("regression: a file that may not be written is refused at open (SQLite would open it read-only without a word); reading it still works", () => {
    const path = databasePath();
    const store = openSqliteStore(path);
    store.appendMessages("cli:kept", null, [{ message: { role: "user", content: "still readable" }, tokens: 3 }]);
    store.close();
    undo.push(makeImmutable(path));

    expect(refusal(() => openSqliteStore(path))).toBe(
      `The database ${path} cannot be written (the file or its folder is read-only); make it writable, or set GLASSBOX_DB to a file in a folder glassbox may write.`,
    );
    const reading = openTestStore(path, { readOnly: true });
    expect(reading.listSessions().map((session) => session.id)).toEqual(["cli:kept"]);
  });
});

describe("reading without creating", () => {
  it("databaseExists() is false where nothing is yet, and a read-only open never makes a file there", () => {
    const path = databasePath();
    expect(databaseExists(path)).toBe(false);
    expect(refusal(() => openSqliteStore(path, { readOnly: true }))).toBe(
      `There is no database at ${path} (GLASSBOX_DB) yet; glassbox makes it when it first starts a conversation.`,
    );
    expect(existsSync(path)).toBe(false);
  });

  it("a read-only open of a file an older glassbox wrote upgrades its schema once, then reads it", () => {
    const path = databasePath();
    // A file exactly as the previous version left it: every migration but the latest.
    const older = new Database(path);
    migrate(older, SCHEMA_VERSION - 1);
    older
      .prepare("INSERT INTO sessions (id, created_at, updated_at) VALUES ('cli:old', '2026-01-01', '2026-01-01')")
      .run();
    older
      .prepare(
        "INSERT INTO messages (session_id, epoch, role, content, tokens, created_at) VALUES ('cli:old', 0, 'user', 'from before', 3, '2026-01-01')",
      )
      .run();
    older.close();
    const latest = SCHEMA_VERSION;

    const reading = openTestStore(path, { readOnly: true });
    expect(reading.db.pragma("user_version", { simple: true })).toBe(latest);
    expect(reading.listSessions().map((session) => session.id)).toEqual(["cli:old"]);
    expect(() => reading.resetSession("cli:old")).toThrow(/readonly/);
  });
});

describe("npm start", () => {
  it("regression: refuses a damaged database at start with one sentence, instead of starting and failing every message", async () => {
    const path = databasePath();
    writeDamagedDatabase(path);
    // A bot that starts anyway is stopped (timeout) before the test's own time runs out.
    const { code, stdout, stderr } = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        ["--import", "tsx", "src/main.ts"],
        {
          env: {
            PATH: process.env.PATH ?? "",
            OPENAI_BASE_URL: "http://127.0.0.1:9/v1",
            GLASSBOX_DB: path,
            GLASSBOX_WEB_PORT: "0",
          },
          timeout: 25_000,
        },
        (error, out, err) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout: out, stderr: err }),
      );
    });
    expect(code).toBe(1);
    expect(stdout).toBe("");
    expect(stderr).toMatch(
      new RegExp(`^glassbox: The database ${path} is damaged \\(SQLite's quick_check: [^\\n]+GLASSBOX_DB[^\\n]+\\n$`),
    );
  });
});
