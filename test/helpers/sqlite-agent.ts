/**
 * The agent as `npm start` builds it on SQLite (createAgentConfig over the GLASSBOX_DB file's port),
 * with the SQLite store under that port at hand, for tests that look into the file. The agent no
 * longer carries the store; only these tests need it.
 */
import { openSqliteStore, type SqliteStore } from "../../src/store/sqlite-store.js";
import type { Logger } from "../../src/logger.js";
import { createAgentConfig, type AgentOptions, type GlassboxAgent } from "../../src/setup.js";
import type { GlassboxConfig } from "../../src/config.js";
import { sqlitePortOf } from "../../src/store/sqlite.js";

export type SqliteAgent = GlassboxAgent & { store: SqliteStore };

/** close() closes the store too, as the agent does with a file it opened itself. */
export async function sqliteAgentConfig(
  config: GlassboxConfig,
  log: Logger,
  options: Omit<AgentOptions, "port"> = {},
): Promise<SqliteAgent> {
  const store = openSqliteStore(config.databasePath, { checkpointInBackground: true });
  const port = sqlitePortOf(store);
  const agent = await createAgentConfig(config, log, { ...options, port }).catch(async (error: unknown) => {
    await port.close();
    throw error;
  });
  const closeAgent = agent.close.bind(agent);
  return Object.assign(agent, {
    store,
    async close() {
      await closeAgent();
      await port.close();
    },
  });
}
