/**
 * Slack installation records in PostgreSQL (GLASSBOX_DATABASE_URL), for every process of a
 * deployment to find a workspace's installation. The tables are created if missing, under an
 * advisory lock, so processes starting together do not race each other to create them.
 */
import type pg from "pg";
import {
  createPool,
  describeOpenFailure,
  inTransaction,
  locationOf,
  type PostgresConnection,
} from "./postgres-client.js";
import type { InstallationRecord, InstallationRecords } from "./installations.js";

const SCHEMA = `
  CREATE TABLE IF NOT EXISTS slack_installations (
    key text PRIMARY KEY, -- team id, or enterprise id of an org-wide install
    team_id text,
    enterprise_id text,
    org_wide boolean NOT NULL,
    bot_user_id text NOT NULL,
    scopes text[] NOT NULL,
    sealed text NOT NULL, -- the installation with its tokens, AES-256-GCM
    installed_at timestamptz NOT NULL
  );
  -- workspaces of an org-wide install, as events named them
  CREATE TABLE IF NOT EXISTS slack_installation_teams (
    team_id text PRIMARY KEY,
    installation_key text NOT NULL REFERENCES slack_installations(key) ON DELETE CASCADE
  );
`;

interface Row extends pg.QueryResultRow {
  key: string;
  team_id: string | null;
  enterprise_id: string | null;
  org_wide: boolean;
  bot_user_id: string;
  scopes: string[];
  sealed: string;
  installed_at: string;
}

export async function openPostgresInstallations(connection: PostgresConnection): Promise<InstallationRecords> {
  const pool = createPool(connection);
  try {
    await inTransaction(pool, async (client) => {
      // Held until this transaction ends: a second process waits here, then finds the tables made.
      await client.query(
        "SELECT pg_advisory_xact_lock(hashtext('glassbox.slack_installations'), hashtext(coalesce($1, current_schema(), '')))",
        [connection.schema ?? null],
      );
      if (connection.schema) await client.query(`CREATE SCHEMA IF NOT EXISTS ${connection.schema}`); // checked by createPool
      await client.query(SCHEMA);
    });
  } catch (error) {
    await pool.end().catch(() => {});
    throw describeOpenFailure(error, locationOf(connection.url));
  }

  return {
    async put(record) {
      await pool.query(
        `INSERT INTO slack_installations (key, team_id, enterprise_id, org_wide, bot_user_id, scopes, sealed, installed_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (key) DO UPDATE SET team_id = excluded.team_id, enterprise_id = excluded.enterprise_id, org_wide = excluded.org_wide,
           bot_user_id = excluded.bot_user_id, scopes = excluded.scopes, sealed = excluded.sealed, installed_at = excluded.installed_at`,
        [
          record.key,
          record.teamId,
          record.enterpriseId,
          record.orgWide,
          record.botUserId,
          record.scopes,
          record.sealed,
          record.installedAt,
        ],
      );
    },
    async get(key) {
      return recordOf((await pool.query<Row>("SELECT * FROM slack_installations WHERE key = $1", [key])).rows[0]);
    },
    async remove(key) {
      // The links go with it (ON DELETE CASCADE).
      return ((await pool.query("DELETE FROM slack_installations WHERE key = $1", [key])).rowCount ?? 0) > 0;
    },
    async linkTeam(teamId, key) {
      await pool.query(
        "INSERT INTO slack_installation_teams (team_id, installation_key) VALUES ($1, $2) ON CONFLICT (team_id) DO UPDATE SET installation_key = excluded.installation_key",
        [teamId, key],
      );
    },
    async forTeam(teamId) {
      // The workspace's own install first, then the org-wide one it belongs to.
      const found = await pool.query<Row>(
        `SELECT i.* FROM slack_installations i
         WHERE i.key = $1 OR i.key = (SELECT installation_key FROM slack_installation_teams WHERE team_id = $1)
         ORDER BY (i.key = $1) DESC LIMIT 1`,
        [teamId],
      );
      return recordOf(found.rows[0]);
    },
    close: () => pool.end(),
  };
}

function recordOf(row: Row | undefined): InstallationRecord | undefined {
  if (!row) return undefined;
  return {
    key: row.key,
    teamId: row.team_id,
    enterpriseId: row.enterprise_id,
    orgWide: row.org_wide,
    botUserId: row.bot_user_id,
    scopes: row.scopes,
    sealed: row.sealed,
    installedAt: row.installed_at,
  };
}
