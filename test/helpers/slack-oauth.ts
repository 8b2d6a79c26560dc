// Set-up for the multi-workspace Slack tests: the one pipeline (startRoles, Slack ingress with OAuth) against
// the fake Slack with workspaces that can install it, the real openai SDK against the scripted model
// server, installations in a real SQLite file or a PostgreSQL schema of their own, and a "browser"
// that walks Slack's OAuth redirects with plain HTTP requests, carrying the state cookie as a browser does.
import { randomBytes } from "node:crypto";
import { freePort } from "./http.js";
import pg from "pg";
import { pino } from "pino";
import { DEFAULT_SLACK_SCOPES, type SlackConfig, type SlackOAuthConfig } from "../../src/config.js";
import type { InstallationDatabase } from "../../src/store/installations.js";
import type { FakeSlack } from "../../src/testing/fake-slack.js";
import type { FakeWorkspace } from "../../src/testing/fake-slack-oauth.js";
import type { ChatCompletionRequestBody } from "../../src/testing/scripted-model-server.js";
import { agentFor, startAdapter, startModel, startSlack, tempPaths, type LogLine, type SlackAdapter } from "./slack.js";

export const CLIENT_ID = "1111111111.2222222222";
export const CLIENT_SECRET = "fake-client-secret-3f9a0c";
export const STATE_SECRET = "fake-state-secret-8d41e7b2";

export const TEAM_A: FakeWorkspace = {
  teamId: "T0TEAMA001",
  teamName: "Team A",
  botToken: "xoxb-team-a-0001-secret",
  botUserId: "U0BOTA0001",
  botId: "B0BOTA0001",
};
export const TEAM_B: FakeWorkspace = {
  teamId: "T0TEAMB002",
  teamName: "Team B",
  botToken: "xoxb-team-b-0002-secret",
  botUserId: "U0BOTB0002",
  botId: "B0BOTB0002",
};
/** A workspace of an Enterprise Grid org that installed the app org-wide. */
export const ORG_WORKSPACE: FakeWorkspace = {
  teamId: "T0ORGWS003",
  botToken: "xoxb-org-e-0003-secret",
  botUserId: "U0BOTE0003",
  botId: "B0BOTE0003",
  enterpriseId: "E0ORG00001",
  orgWide: true,
};
export const WORKSPACES = [TEAM_A, TEAM_B, ORG_WORKSPACE];

export const TEST_DATABASE_URL = process.env.GLASSBOX_TEST_DATABASE_URL?.trim() || undefined;

/** Where the installations are kept in one test: a SQLite file, or a fresh schema of the test database. */
export interface InstallationBackend {
  name: string;
  available: boolean;
  fresh(sqlitePath: string): Promise<{
    database: InstallationDatabase;
    rows(): Promise<Array<Record<string, unknown>>>;
    drop(): Promise<void>;
  }>;
}

export const SQLITE: InstallationBackend = {
  name: "SQLite",
  available: true,
  async fresh(sqlitePath) {
    const { default: Database } = await import("better-sqlite3");
    return {
      database: { databasePath: sqlitePath },
      async rows() {
        const db = new Database(sqlitePath, { readonly: true });
        try {
          return db.prepare("SELECT * FROM slack_installations").all() as Array<Record<string, unknown>>;
        } finally {
          db.close();
        }
      },
      drop: async () => {},
    };
  },
};

export const POSTGRES: InstallationBackend = {
  name: "PostgreSQL (needs GLASSBOX_TEST_DATABASE_URL)",
  available: TEST_DATABASE_URL !== undefined,
  async fresh() {
    const url = TEST_DATABASE_URL as string;
    const schema = `slack_oauth_${randomBytes(6).toString("hex")}`;
    const query = async (text: string) => {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        return (await client.query(text)).rows as Array<Record<string, unknown>>;
      } finally {
        await client.end();
      }
    };
    return {
      database: { databaseUrl: url, databaseSchema: schema, databasePath: "unused.db" },
      rows: () => query(`SELECT * FROM ${schema}.slack_installations`),
      drop: async () => void (await query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)),
    };
  },
};

export function newKey(): string {
  return randomBytes(32).toString("base64");
}

/** A real pino logger at debug level keeping its lines, with no redaction of its own: what the code writes is what it keeps. */
export function debugLogger() {
  const lines: LogLine[] = [];
  const log = pino({ level: "debug" }, { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) });
  return { log, lines, text: () => lines.map((line) => JSON.stringify(line)).join("\n") };
}

/** The model answers every turn with the words it was asked, so an answer shows which conversation it belongs to. */
export function echoScript(request: ChatCompletionRequestBody) {
  const last = [...request.messages].reverse().find((message) => message.role === "user");
  const text = typeof last?.content === "string" ? last.content : "";
  return { content: `You said: ${text.slice(0, 200)}` };
}

export interface InstalledBot {
  fake: FakeSlack;
  slack: SlackAdapter & { stop(): Promise<void> };
  oauth: SlackOAuthConfig;
  lines: LogLine[];
  logText(): string;
  dbPath: string;
  rows(): Promise<Array<Record<string, unknown>>>;
  store: Awaited<ReturnType<typeof agentFor>>["agent"]["store"];
  model: Awaited<ReturnType<typeof startModel>>;
}

export interface InstalledBotOptions {
  backend?: InstallationBackend;
  socket?: boolean;
  env?: Record<string, string>;
  slack?: Partial<SlackConfig>;
  /** Over the OAuth settings the bot starts with (SLACK_ALLOWED_WORKSPACES, say). */
  oauth?: Partial<SlackOAuthConfig>;
}

/** Start it, then install workspaces with `install`. Call `stop` before cleanUp(): the adapter stops before the fakes close. */
export async function startInstalledBot(
  options: InstalledBotOptions = {},
): Promise<InstalledBot & { stop(): Promise<void>; drop(): Promise<void> }> {
  const fake = await startSlack({
    oauth: { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, workspaces: WORKSPACES },
  });
  const model = await startModel(echoScript);
  const paths = tempPaths();
  const { log, lines, text } = debugLogger();
  const { agent, config } = await agentFor(model, paths, log, options.env);
  const backend = await (options.backend ?? SQLITE).fresh(paths.db);
  const oauth: SlackOAuthConfig = {
    clientId: CLIENT_ID,
    clientSecret: CLIENT_SECRET,
    stateSecret: STATE_SECRET,
    scopes: DEFAULT_SLACK_SCOPES,
    encryptionKey: newKey(),
    authorizeUrl: (fake.oauth as NonNullable<FakeSlack["oauth"]>).authorizeUrl,
    database: backend.database,
    ...options.oauth,
  };
  const mode: Partial<SlackConfig> = options.socket
    ? { signingSecret: undefined, appToken: "xapp-1-fake-app-token", port: await freePort() }
    : {};
  const settings: Partial<SlackConfig> = { botToken: undefined, oauth, ...mode, ...options.slack };
  const slack = await startAdapter({ fake, agent, log, slack: settings, config });
  // The redirect URL the app's settings page lists at Slack.
  fake.oauth?.setRedirectUrl(new URL("/slack/oauth_redirect", slack.installUrl).toString());
  return {
    fake,
    slack,
    oauth,
    lines,
    logText: text,
    dbPath: paths.db,
    rows: backend.rows,
    stop: () => slack.stop(),
    drop: backend.drop,
    store: agent.store,
    model,
  };
}

export interface InstallResult {
  status: number;
  page: string;
}

/**
 * What a person's browser does: opens the install link (Bolt sets the state cookie and sends it to
 * Slack), approves on Slack's page for `teamId`, and follows Slack back to the redirect URL with the
 * cookie. `cookieFrom` replaces the cookie with another browser session's, as a forged link would.
 */
export async function install(
  installUrl: string,
  teamId: string,
  options: { cookie?: string | null } = {},
): Promise<InstallResult> {
  const { cookie, authorizeUrl } = await openInstallLink(installUrl);
  const back = await consent(authorizeUrl, teamId);
  return followRedirect(back, options.cookie === undefined ? cookie : options.cookie);
}

export async function openInstallLink(installUrl: string): Promise<{ cookie: string; authorizeUrl: string }> {
  const response = await fetch(installUrl, { redirect: "manual" });
  if (response.status !== 302)
    throw new Error(`the install link answered ${response.status}: ${await response.text()}`);
  const cookie = response.headers
    .getSetCookie()
    .map((header) => header.split(";")[0] ?? "")
    .join("; ");
  return { cookie, authorizeUrl: response.headers.get("location") ?? "" };
}

/** Slack's consent page, approved for the workspace: the address Slack sends the browser back to. */
export async function consent(authorizeUrl: string, teamId: string): Promise<string> {
  const response = await fetch(`${authorizeUrl}&team=${teamId}`, { redirect: "manual" });
  if (response.status !== 302)
    throw new Error(`Slack's authorize page answered ${response.status}: ${await response.text()}`);
  return response.headers.get("location") ?? "";
}

export async function followRedirect(url: string, cookie: string | null): Promise<InstallResult> {
  const response = await fetch(url, { redirect: "manual", headers: cookie ? { cookie } : {} });
  return { status: response.status, page: await response.text() };
}
