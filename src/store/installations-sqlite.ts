/**
 * Slack installation records in the SQLite file (GLASSBOX_DB), on a connection of their own beside
 * the store's (WAL lets them share the file). The file is migrated on opening, as the store migrates
 * it, so opening is safe however many times and in whatever order it happens.
 */
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";
import { GlassboxError } from "../agent/errors.js";
import { switchToWal } from "../sqlite-wal.js";
import type { InstallationRecord, InstallationRecords } from "./installations.js";
import { migrate } from "./sqlite-schema.js";

interface Row {
  key: string;
  team_id: string | null;
  enterprise_id: string | null;
  org_wide: number;
  bot_user_id: string;
  scopes: string;
  sealed: string;
  installed_at: string;
}

export function openSqliteInstallations(path: string): InstallationRecords {
  let db: Database.Database | undefined;
  try {
    if (path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
    db = new Database(path);
    db.pragma("busy_timeout = 5000");
    switchToWal(db);
    migrate(db); // the tables are the schema's (sqlite-schema.ts), like every other
  } catch (error) {
    if (db?.open) db.close();
    throw new GlassboxError(
      "configuration",
      `The Slack installations cannot be kept in ${path} (${(error as Error).message}); check GLASSBOX_DB points to a file glassbox may write.`,
      undefined,
      { cause: error },
    );
  }
  const connection = db;
  const statements = {
    put: connection.prepare(`
      INSERT INTO slack_installations (key, team_id, enterprise_id, org_wide, bot_user_id, scopes, sealed, installed_at)
      VALUES (@key, @team_id, @enterprise_id, @org_wide, @bot_user_id, @scopes, @sealed, @installed_at)
      ON CONFLICT (key) DO UPDATE SET team_id = excluded.team_id, enterprise_id = excluded.enterprise_id, org_wide = excluded.org_wide,
        bot_user_id = excluded.bot_user_id, scopes = excluded.scopes, sealed = excluded.sealed, installed_at = excluded.installed_at`),
    get: connection.prepare("SELECT * FROM slack_installations WHERE key = ?"),
    removeLinks: connection.prepare("DELETE FROM slack_installation_teams WHERE installation_key = ?"),
    remove: connection.prepare("DELETE FROM slack_installations WHERE key = ?"),
    link: connection.prepare(
      "INSERT INTO slack_installation_teams (team_id, installation_key) VALUES (?, ?) ON CONFLICT (team_id) DO UPDATE SET installation_key = excluded.installation_key",
    ),
    // The workspace's own install first, then the org-wide one it belongs to.
    forTeam: connection.prepare(`
      SELECT *, 0 AS preference FROM slack_installations WHERE key = @team
      UNION ALL
      SELECT i.*, 1 AS preference FROM slack_installation_teams t JOIN slack_installations i ON i.key = t.installation_key WHERE t.team_id = @team
      ORDER BY preference LIMIT 1`),
  };
  const remove = connection.transaction((key: string) => {
    statements.removeLinks.run(key);
    return statements.remove.run(key).changes > 0;
  });

  return {
    put: async (record) => void statements.put.run(rowOf(record)),
    get: async (key) => recordOf(statements.get.get(key) as Row | undefined),
    remove: async (key) => remove(key),
    linkTeam: async (teamId, key) => void statements.link.run(teamId, key),
    forTeam: async (teamId) => recordOf(statements.forTeam.get({ team: teamId }) as Row | undefined),
    close: async () => {
      if (connection.open) connection.close();
    },
  };
}

function rowOf(record: InstallationRecord): Row {
  return {
    key: record.key,
    team_id: record.teamId,
    enterprise_id: record.enterpriseId,
    org_wide: record.orgWide ? 1 : 0,
    bot_user_id: record.botUserId,
    scopes: record.scopes.join(","),
    sealed: record.sealed,
    installed_at: record.installedAt,
  };
}

function recordOf(row: Row | undefined): InstallationRecord | undefined {
  if (!row) return undefined;
  return {
    key: row.key,
    teamId: row.team_id,
    enterpriseId: row.enterprise_id,
    orgWide: row.org_wide === 1,
    botUserId: row.bot_user_id,
    scopes: row.scopes ? row.scopes.split(",") : [],
    sealed: row.sealed,
    installedAt: row.installed_at,
  };
}
