/**
 * Where a Slack app installed in many workspaces keeps its installations: one record per workspace
 * (or per Enterprise Grid org, for an org-wide install), in the same database as everything else —
 * PostgreSQL when GLASSBOX_DATABASE_URL is set, else the SQLite file at GLASSBOX_DB. This layer keeps
 * records and never sees a token: what must stay secret arrives already sealed (encrypted) by the
 * Slack adapter, and leaves the same way.
 */
export interface InstallationRecord {
  /** The workspace's team id (T...), or the org's enterprise id (E...) for an org-wide install. */
  key: string;
  teamId: string | null;
  enterpriseId: string | null;
  /** Installed on a whole Enterprise Grid org (then `key` is the enterprise id). */
  orgWide: boolean;
  botUserId: string;
  scopes: string[];
  /** The installation with its tokens, sealed by the adapter; opaque here. */
  sealed: string;
  /** ISO moment of the (latest) install. */
  installedAt: string;
}

export interface InstallationRecords {
  /** Adds the record, or replaces the one with its key (a reinstall, new scopes, a new token). */
  put(record: InstallationRecord): Promise<void>;
  get(key: string): Promise<InstallationRecord | undefined>;
  /** Removes the record and what links to it; false when there was none. */
  remove(key: string): Promise<boolean>;
  /** Notes that workspace `teamId` is answered by the org-wide install `key` (sessions know only their team). */
  linkTeam(teamId: string, key: string): Promise<void>;
  /** The record that answers a workspace: its own install, else the org-wide install it was linked to. */
  forTeam(teamId: string): Promise<InstallationRecord | undefined>;
  close(): Promise<void>;
}

import type { InstallationDatabase } from "../config.js";

export type { InstallationDatabase };

/** Opens the records where the store lives, creating their tables if missing. Each backend loads only when chosen. */
export async function openInstallationRecords(database: InstallationDatabase): Promise<InstallationRecords> {
  if (database.databaseUrl !== undefined) {
    const { openPostgresInstallations } = await import("./installations-postgres.js");
    return openPostgresInstallations({ url: database.databaseUrl, schema: database.databaseSchema, poolSize: 4 });
  }
  const { openSqliteInstallations } = await import("./installations-sqlite.js");
  return openSqliteInstallations(database.databasePath);
}
