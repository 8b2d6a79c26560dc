/**
 * Opening the store's SQLite file. A file that is damaged, is not a database, or cannot be opened
 * or written is refused here with one sentence naming it and GLASSBOX_DB, so no entry point (the
 * bot, the command line, a worker) starts and then fails every message.
 */
import { existsSync, mkdirSync, mkdtempSync, rmdirSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import Database from "better-sqlite3";
import { switchToWal } from "../sqlite-wal.js";
import { GlassboxError } from "../agent/errors.js";
import { migrate, SCHEMA_VERSION, schemaVersion } from "./sqlite-schema.js";

/**
 * The connection, checked and migrated. `readOnly` opens an existing file for reading only: it never
 * creates one (see databaseExists), and migrates only a file an older glassbox wrote.
 */
export function openDatabase(path: string, readOnly = false): Database.Database {
  let db: Database.Database | undefined;
  try {
    if (!readOnly && path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
    db = new Database(path, readOnly ? { readonly: true, fileMustExist: true } : {});
    // The busy timeout first: switching to WAL takes a lock that another process opening the file may hold.
    db.pragma("busy_timeout = 5000");
    const check = String(db.pragma("quick_check(1)", { simple: true }));
    if (check !== "ok") throw damaged(path, check);
    if (readOnly) {
      if (schemaVersion(db) >= SCHEMA_VERSION) return db;
      db.close();
      openDatabase(path).close(); // written by an older glassbox: upgraded once, then read
      return openDatabase(path, true);
    }
    switchToWal(db);
    db.pragma("synchronous = NORMAL"); // with WAL: durable across process crashes, fast commits
    db.pragma("foreign_keys = ON");
    migrate(db);
    if (path !== ":memory:") assertWritable(db);
    return db;
  } catch (error) {
    if (db?.open) db.close();
    throw describeOpenFailure(path, error);
  }
}

/** Whether there is a file to read at `path`; false only when nothing is there yet. */
export function databaseExists(path: string): boolean {
  try {
    statSync(path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw describeOpenFailure(path, error);
  }
}

/**
 * Why no database could ever be made at `path` (where there is none yet), or undefined when one can:
 * the nearest part of the path that exists is a file, or a folder that takes no new entry. Found by
 * trying, since permission bits do not tell (root passes them, and /sys or /proc refuse files to
 * everyone): an empty folder is made there and removed at once.
 */
export function whyNoDatabaseCanBeMade(path: string): string | undefined {
  let folder = dirname(resolve(path));
  while (!existsSync(folder) && folder !== dirname(folder)) folder = dirname(folder);
  try {
    if (!statSync(folder).isDirectory()) return `${folder} is a file, not a folder`;
    rmdirSync(mkdtempSync(join(folder, ".glassbox-write-check-")));
    return undefined;
  } catch (error) {
    return `the folder ${folder} may not be written (${(error as NodeJS.ErrnoException).code ?? String(error)})`;
  }
}

/**
 * SQLite opens a file it may not write read-only without a word, and says so only at the first
 * write: try one (the version, rewritten unchanged) and take it back.
 */
function assertWritable(db: Database.Database): void {
  db.exec("BEGIN IMMEDIATE");
  try {
    db.pragma(`user_version = ${schemaVersion(db)}`);
  } finally {
    if (db.inTransaction) db.exec("ROLLBACK");
  }
}

function damaged(path: string, check: string): GlassboxError {
  const problem = check.replace(/^\*\*\* in database \w+ \*\*\*\n/, "").split("\n")[0] ?? "";
  return new GlassboxError(
    "configuration",
    `The database ${path} is damaged (SQLite's quick_check: ${problem.length > 120 ? `${problem.slice(0, 120)}…` : problem}); restore it from a backup, or move it aside and glassbox starts a new one there (or set GLASSBOX_DB to another file).`,
  );
}

/** One sentence for what went wrong opening the file; errors of any other kind pass unchanged. */
function describeOpenFailure(path: string, error: unknown): unknown {
  if (error instanceof GlassboxError) return error;
  const code = (error as { code?: unknown }).code;
  if (typeof code !== "string") return error;
  const sentence = (text: string) => new GlassboxError("configuration", text, undefined, { cause: error });
  const elsewhere = "set GLASSBOX_DB to a file in a folder glassbox may write";
  // mkdir says EEXIST, and stat ENOTDIR, when a part of the path is a file.
  if (
    code === "ENOTDIR" ||
    code === "EEXIST" ||
    (code.startsWith("SQLITE_CANTOPEN") && pathProblem(path) === "ENOTDIR")
  ) {
    return sentence(`The database ${path} cannot be opened: a part of its path is a file, not a folder; ${elsewhere}.`);
  }
  if (code.startsWith("SQLITE_CANTOPEN") && pathProblem(path) === "folder") {
    return sentence(
      `The database ${path} is a folder, not a file; set GLASSBOX_DB to a file's path, such as data/glassbox.db.`,
    );
  }
  if (code.startsWith("SQLITE_CANTOPEN") && pathProblem(path) === "ENOENT") {
    return sentence(
      `There is no database at ${path} (GLASSBOX_DB) yet; glassbox makes it when it first starts a conversation.`,
    );
  }
  if (
    code === "EACCES" ||
    code === "EPERM" ||
    code === "EROFS" ||
    code.startsWith("SQLITE_CANTOPEN") ||
    code.startsWith("SQLITE_PERM")
  ) {
    return sentence(
      `The database ${path} cannot be opened (its folder or the file may not be read or written, ${code}); fix the permissions, or ${elsewhere}.`,
    );
  }
  if (code.startsWith("SQLITE_READONLY")) {
    return sentence(
      `The database ${path} cannot be written (the file or its folder is read-only); make it writable, or ${elsewhere}.`,
    );
  }
  if (code === "SQLITE_NOTADB") {
    return sentence(
      `${path} is not a SQLite database; set GLASSBOX_DB to glassbox's database file, or move this one aside and glassbox starts a new one there.`,
    );
  }
  if (code.startsWith("SQLITE_CORRUPT")) return damaged(path, (error as Error).message);
  if (code === "SQLITE_FULL")
    return sentence(
      `The disk of the database ${path} is full; free some space, or set GLASSBOX_DB to a file on another disk.`,
    );
  if (code.startsWith("SQLITE_IOERR")) {
    return sentence(
      `The database ${path} cannot be read or written (${(error as Error).message}); check the disk it is on, or set GLASSBOX_DB to a file elsewhere.`,
    );
  }
  return error;
}

/** What is at the path: nothing (ENOENT), a folder, a file under a file (ENOTDIR), or a file. */
function pathProblem(path: string): "ENOENT" | "ENOTDIR" | "folder" | "file" | undefined {
  try {
    return statSync(path).isDirectory() ? "folder" : "file";
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === "ENOENT" || code === "ENOTDIR" ? code : undefined;
  }
}
