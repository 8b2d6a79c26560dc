/** The recorded conversations, for the commands that read them (sessions, trace, usage, replay, eval) and reset. */
import { databaseExists, whyNoDatabaseCanBeMade } from "../store/sqlite-file.js";
import { openStorePort, storePortOptionsFromEnv, type AnyStorePort } from "../store/index.js";

export interface Records {
  /** Where they are, for messages: the SQLite file, or the database (without its password) once open. */
  where: string;
  /** The setting that says where: GLASSBOX_DB or GLASSBOX_DATABASE_URL. */
  setting: string;
  store: AnyStorePort | undefined;
  /** Without a store: why glassbox could never record anything there (the path cannot be written). */
  unwritable?: string;
}

/**
 * The configured store (PostgreSQL with GLASSBOX_DATABASE_URL, else the SQLite file at GLASSBOX_DB),
 * opened to read (SQLite: read-only unless `write`), or no store when the SQLite file does not
 * exist yet: a command that reads never creates one (nor its folder).
 */
export async function openRecords(options: { write?: boolean } = {}): Promise<Records> {
  const settings = storePortOptionsFromEnv();
  if (settings.databaseUrl === undefined) {
    const records = { where: settings.databasePath, setting: "GLASSBOX_DB" };
    // A schema without a URL is a mistake openStorePort words; otherwise no file means nothing recorded.
    if (settings.databaseSchema === undefined && !databaseExists(settings.databasePath))
      return { ...records, store: undefined, unwritable: whyNoDatabaseCanBeMade(settings.databasePath) };
    return { ...records, store: await openStorePort({ ...settings, readOnly: !options.write }) };
  }
  const store = await openStorePort(settings);
  return { where: store.location, setting: "GLASSBOX_DATABASE_URL", store };
}

/** There is nothing in `records` yet; and, where the path can never be written, that nothing can be. */
export const nothingRecorded = (records: Pick<Records, "where" | "setting" | "unwritable">) =>
  records.unwritable
    ? `No conversations are recorded in ${records.where} (${records.setting}), and none can be: ${records.unwritable}; set ${records.setting} to a file in a folder glassbox may write.`
    : `No conversations are recorded yet in ${records.where} (${records.setting}).`;
