/**
 * `npm start`: runs the bot on one pipeline (src/roles): the platforms that are configured (Slack
 * when SLACK_BOT_TOKEN is set, Discord when DISCORD_TOKEN is) and the web server (chat page, trace
 * viewer, HTTP API; the playground when no platform is set), remembered in SQLite between starts,
 * with the run queue in this process. Without a model the playground still opens and says what to
 * set. `glassbox chat` is the terminal chat.
 *
 * With PostgreSQL (GLASSBOX_DATABASE_URL), GLASSBOX_ROLE splits the same pipeline over processes:
 * `ingress` receives and enqueues (and serves the pages and the API's reads), `worker` runs the
 * turns, `all` does both in one process, which is what the URL alone starts (docs/running-at-scale.md).
 */
import type { StartedRoles } from "./roles/start.js";
import { loadConfig, modelProblem, type GlassboxConfig, type GlassboxRole } from "./config.js";
import { createLogger } from "./logger.js";
import { loadEnvFile, unknownSettings } from "./settings.js";

async function start(): Promise<void> {
  const envFile = loadEnvFile();
  if (envFile) process.stdout.write(`glassbox: read settings from ${envFile}\n`);
  for (const sentence of unknownSettings(process.env)) process.stderr.write(`glassbox: warning: ${sentence}\n`);
  const config = loadConfig();
  if (config.role) return startRole(config, config.role);
  // The URL alone chooses PostgreSQL: everything in one process on it, never SQLite beside it.
  if (process.env.GLASSBOX_DATABASE_URL?.trim()) return startRole(config, "all", { chosenByUrl: true });
  if (!config.slack && !config.discord) return startPlayground(config);
  // One process on SQLite: the same pipeline, with the run queue in this process.
  return startRole(config, "all", { oneProcess: true });
}

/**
 * GLASSBOX_ROLE: this process receives (ingress), runs turns (worker), or both (all), on the store
 * and run queue of openDeployment: PostgreSQL with its queue table, or (all) SQLite with the queue
 * in this process.
 */
async function startRole(
  config: GlassboxConfig,
  role: GlassboxRole,
  how: { chosenByUrl?: boolean; oneProcess?: boolean } = {},
): Promise<void> {
  const log = createLogger({ level: "info" });
  const [{ storePortOptionsFromEnv }, { startRoles }] = await Promise.all([
    import("./store/index.js"),
    import("./roles/start.js"),
  ]);
  const store = storePortOptionsFromEnv();
  let roles: StartedRoles | undefined;
  const shutdown = async (code: number) => {
    await roles?.stop();
    process.exit(code);
  };
  process.once("SIGINT", () => void shutdown(0));
  process.once("SIGTERM", () => void shutdown(0));
  roles = await startRoles({
    config,
    role,
    log,
    where: store,
    onWorkerLost: (cause) => {
      log.fatal({ cause }, "the worker stopped taking turns (another worker took them over); restart it");
      void shutdown(1);
    },
  });
  const api = roles.ingress?.api;
  const pages = api?.url;
  const { slack, discord } = roles.ingress ?? {};
  if (slack && config.slack)
    log.info(
      {
        mode: config.slack.appToken ? "socket" : "http",
        eventsUrl: slack.eventsUrl,
        ...(slack.alsoAt.length ? { alsoAt: slack.alsoAt } : {}),
      },
      "Slack connected",
    );
  if (discord) {
    log.info({ user: discord.client.user.tag }, "Discord connected");
    process.stdout.write(`Invite the Discord bot to a server: ${discord.inviteUrl}\n`);
  }
  const what = how.chosenByUrl
    ? "everything in one process (GLASSBOX_DATABASE_URL is set: GLASSBOX_ROLE=all)"
    : how.oneProcess
      ? "everything in one process"
      : role === "all"
        ? "ingress and a worker in one process (GLASSBOX_ROLE=all)"
        : `as ${role} (GLASSBOX_ROLE=${role})`;
  const where = store.databaseUrl
    ? `PostgreSQL at ${databaseLabel(store.databaseUrl, store.databaseSchema)}`
    : `SQLite at ${roles.deployment.store.location}`;
  const line = `glassbox on ${where}, ${what}${pages ? `: chat at ${pages}/ and the trace at ${pages}/trace` : ""}`;
  log.info(
    {
      role,
      store: roles.deployment.store.kind === "postgres" ? "postgresql" : "sqlite",
      chat: pages && `${pages}/`,
      trace: pages && `${pages}/trace`,
      ...(api?.alsoAt.length ? { alsoAt: api.alsoAt.map((at) => `${at}/`) } : {}),
      health: roles.healthUrl && `${roles.healthUrl}/readyz`,
    },
    line,
  );
  process.stdout.write(`${line} (Ctrl+C stops it)\n`);
  if (api?.alsoAt.length) process.stdout.write(`${elsewhereLine(api.alsoAt)}\n`);
}

/** For a web server on every address: where another machine opens it (the start line names this machine's loopback). */
function elsewhereLine(alsoAt: readonly string[]): string {
  return `It listens on every address; from another machine: ${alsoAt.map((at) => `${at}/`).join(", ")}`;
}

/** Where the store is, without the password: "db:5432/glassbox", with its schema if one is set. */
function databaseLabel(url: string, schema: string | undefined): string {
  const parsed = URL.canParse(url) ? new URL(url) : undefined;
  const where = parsed ? `${parsed.host}${parsed.pathname}` : "the database GLASSBOX_DATABASE_URL names";
  return schema ? `${where} (schema ${schema})` : where;
}

/**
 * The web playground: the same pipeline in one process, with the web server alone; without a model
 * it still serves the pages, which say what to set.
 */
async function startPlayground(config: GlassboxConfig): Promise<void> {
  const log = createLogger({ level: "warn" });
  const { startRoles } = await import("./roles/start.js");
  const roles = await startRoles({ config, role: "all", log });
  const api = roles.ingress?.api;
  const url = api?.url;
  process.stdout.write(
    url
      ? `glassbox playground: chat at ${url}/ and the trace at ${url}/trace (Ctrl+C stops it)\n`
      : "glassbox playground: the web server is off (GLASSBOX_WEB=off), so there is nothing to open (Ctrl+C stops it)\n",
  );
  if (api?.alsoAt.length) process.stdout.write(`${elsewhereLine(api.alsoAt)}\n`);
  const problem = modelProblem(config);
  if (problem) process.stdout.write(`${problem}\n`);
  const shutdown = async () => {
    await roles.stop();
    process.exit(0);
  };
  process.once("SIGINT", () => void shutdown());
  process.once("SIGTERM", () => void shutdown());
}

start().catch((error: unknown) => {
  process.stderr.write(`glassbox: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
