// Database files in the states a person's disk can leave them in: damaged pages, not a database at
// all, and a file no one may write — root included, as the tests run as root (chmod does not stop
// root; the immutable attribute does, on ext4 and most Linux file systems).
import { execFileSync } from "node:child_process";
import { closeSync, openSync, statSync, writeFileSync, writeSync } from "node:fs";
import { openSqliteStore } from "../../../src/store/sqlite-store.js";

const PAGE_BYTES = 4096;

/** A real database with some hundred messages, then garbage written over the middle of its pages. */
export function writeDamagedDatabase(path: string): void {
  const store = openSqliteStore(path);
  for (let index = 0; index < 200; index++)
    store.appendMessages("cli:damaged", null, [
      { message: { role: "user", content: `message ${index} ${"x".repeat(200)}` }, tokens: 10 },
    ]);
  store.close(); // the last connection to close copies the WAL into the file
  const pages = statSync(path).size / PAGE_BYTES;
  const file = openSync(path, "r+");
  try {
    // Page 1 (the header and schema) stays readable: opening works, reading the data does not.
    for (let page = 2; page < pages - 1; page += 2)
      writeSync(file, Buffer.alloc(512, 0x5a), 0, 512, page * PAGE_BYTES + 64);
  } finally {
    closeSync(file);
  }
}

export function writeNotADatabase(path: string): void {
  writeFileSync(path, "These are my notes, not a database.\n".repeat(200));
}

/** Makes the file immutable (chattr +i); returns the undo. Fails loudly where the file system cannot. */
export function makeImmutable(path: string): () => void {
  execFileSync("chattr", ["+i", path]);
  return () => execFileSync("chattr", ["-i", path]);
}
