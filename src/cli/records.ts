/** The recorded conversations, for the commands that only read them (sessions, trace, usage, reset). */
import { loadConfig } from "../config.js";
import { databaseExists, openStore, type Store } from "../agent/store.js";

/**
 * The configured database, opened to read, or undefined when there is none yet: a command that
 * only reads never creates one (nor its folder).
 */
export function openRecords(): { path: string; store: Store | undefined } {
  const path = loadConfig().databasePath;
  return { path, store: databaseExists(path) ? openStore(path, { readOnly: true }) : undefined };
}

export const nothingRecorded = (path: string) => `No conversations are recorded yet in ${path} (GLASSBOX_DB).`;
