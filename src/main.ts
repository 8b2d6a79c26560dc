/**
 * `npm start`: runs the bot with the adapters that are configured — Slack when SLACK_BOT_TOKEN is
 * set, Discord when DISCORD_TOKEN is — and otherwise the local web playground (chat page, trace
 * viewer, HTTP API) on the same agent loop, remembered in SQLite between starts. Without a model
 * the playground still opens and says what to set. `glassbox chat` is the terminal chat.
 *
 * With PostgreSQL (GLASSBOX_DATABASE_URL), GLASSBOX_ROLE splits the bot over processes: `ingress`
 * receives and enqueues (and serves the pages and the API's reads), `worker` runs the turns, `all`
 * does both in one process, which is what the URL alone starts (see docs/running-at-scale.md).
 */
import { startDiscordAdapter } from "./adapters/discord/discord-adapter.js";
import { startSlackAdapter, type SlackRuns } from "./adapters/slack/slack-adapter.js";
import { exampleRequests } from "./adapters/example-requests.js";
import { startWebServer } from "./adapters/web/web-server.js";
import type { StartedRoles } from "./roles/start.js";
import { assertModelConfigured, loadConfig, type GlassboxConfig, type GlassboxRole } from "./config.js";
import { createLogger, type Logger } from "./logger.js";
import { createAgentConfig } from "./setup.js";
import { openSqlitePort } from "./store/sqlite.js";

async function start(): Promise<void> {
  const config = loadConfig();
  if (config.role) return startRole(config, config.role);
  // The URL alone chooses PostgreSQL: everything in one process on it, never SQLite beside it.
  if (process.env.GLASSBOX_DATABASE_URL?.trim()) return startRole(config, "all", { chosenByUrl: true });
  if (!config.slack && !config.discord) return startPlayground(config);
  const log = createLogger({ level: "info" });
  // With several workers, each builds its own agent; this thread only needs one for Discord.
  const slackWorkers = config.slack && config.workers > 1 ? config.workers : 0;
  assertModelConfigured(config);
  const agent = !slackWorkers || config.discord ? await createAgentConfig(config, log) : undefined;
  // Claims, approvals and feedback go through the agent's store port; without an agent here (Slack's
  // workers each build their own), through a port of this thread's own on the same file.
  const store = agent?.port ?? openSqlitePort(config.databasePath, { longRunning: true });

  // Event claims only need to outlive the platforms' redeliveries (minutes); a week is plenty.
  await store.pruneClaims(new Date(Date.now() - 7 * 86_400_000));
  // Runs left `running` by a process that was killed would say so forever; they were interrupted.
  const interrupted = await store.interruptOrphanedRuns();
  if (interrupted > 0) log.info({ runs: interrupted }, "marked the runs of a stopped process interrupted");
  const stops: Array<() => Promise<void>> = [];
  if (config.slack) {
    const runs: SlackRuns =
      slackWorkers || !agent
        ? { workers: { count: slackWorkers, config, onExit: (worker, code) => stopAfterCrash(log, worker, code) } }
        : { agent, dailyLimits: config.dailyLimits, pipelines: agent.pipelines };
    const slack = await startSlackAdapter({
      slack: config.slack,
      store,
      log,
      approvalTtlSeconds: config.approvalTtlSeconds,
      hints: agent && exampleRequests(agent.toolSources),
      ...runs,
    });
    stops.push(slack.stop);
    log.info(
      {
        mode: config.slack.appToken ? "socket" : "http",
        eventsUrl: slack.eventsUrl,
        workers: slackWorkers || undefined,
      },
      "Slack connected",
    );
  }
  if (config.discord && agent) {
    const discord = await startDiscordAdapter({
      discord: config.discord,
      agent,
      store,
      log,
      approvalTtlSeconds: config.approvalTtlSeconds,
      prices: config.prices,
      dailyLimits: config.dailyLimits,
      pipelines: agent.pipelines,
      hints: exampleRequests(agent.toolSources),
    });
    stops.push(discord.stop);
    log.info({ user: discord.client.user.tag }, "Discord connected");
    process.stdout.write(`Invite the Discord bot to a server: ${discord.inviteUrl}\n`);
  }
  const shutdown = async () => {
    for (const stop of stops) await stop();
    if (agent) await agent.close();
    else await store.close();
    process.exit(0);
  };
  process.once("SIGINT", () => void shutdown());
  process.once("SIGTERM", () => void shutdown());
}

/**
 * GLASSBOX_ROLE: this process receives (ingress), runs turns (worker), or both (all), on the store
 * and run queue of openDeployment: PostgreSQL with graphile-worker, or (all) SQLite with the queue
 * in this process.
 */
async function startRole(
  config: GlassboxConfig,
  role: GlassboxRole,
  how: { chosenByUrl?: boolean } = {},
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
      log.fatal(
        { cause },
        "the worker stopped taking turns (another worker took them over, or the queue shut down); restart it",
      );
      void shutdown(1);
    },
  });
  const pages = roles.ingress?.api?.url;
  const what = how.chosenByUrl
    ? "everything in one process (GLASSBOX_DATABASE_URL is set: GLASSBOX_ROLE=all)"
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
    },
    line,
  );
  process.stdout.write(`${line} (Ctrl+C stops it)\n`);
}

/** Where the store is, without the password: "db:5432/glassbox", with its schema if one is set. */
function databaseLabel(url: string, schema: string | undefined): string {
  const parsed = URL.canParse(url) ? new URL(url) : undefined;
  const where = parsed ? `${parsed.host}${parsed.pathname}` : "the database GLASSBOX_DATABASE_URL names";
  return schema ? `${where} (schema ${schema})` : where;
}

/**
 * A worker that died of an uncaught error took its sessions' runs with it: stop, as a single-threaded
 * bot would, so a supervisor restarts the bot (and its runs show as interrupted).
 */
function stopAfterCrash(log: Logger, worker: number, exitCode: number): void {
  log.fatal({ worker, exitCode }, "a conversation worker stopped; glassbox stops too, restart it");
  process.exit(1);
}

/** The web playground; without a model it still serves the pages, which say what to set. */
async function startPlayground(config: GlassboxConfig): Promise<void> {
  const log = createLogger({ level: "warn" });
  const problem = modelProblem(config);
  const store = openSqlitePort(config.databasePath, { longRunning: true });
  await store.interruptOrphanedRuns();
  const agent = problem ? undefined : await createAgentConfig(config, log, { port: store });
  const web = await startWebServer({
    agent,
    store,
    log,
    ...config.web,
    approvalTtlSeconds: config.approvalTtlSeconds,
    prices: config.prices,
    dailyLimits: config.dailyLimits,
    pipelines: agent?.pipelines,
    modelLabel: modelLabel(config),
    problem,
    hints: agent && exampleRequests(agent.toolSources),
  });
  process.stdout.write(`glassbox playground: chat at ${web.url} and the trace at ${web.url}trace (Ctrl+C stops it)\n`);
  if (problem) process.stdout.write(`${problem}\n`);
  const shutdown = async () => {
    await web.stop();
    await agent?.close(); // leaves the port it was given open
    await store.close();
    process.exit(0);
  };
  process.once("SIGINT", () => void shutdown());
  process.once("SIGTERM", () => void shutdown());
}

/** "gpt-4o-mini", or "llama3.1 at localhost:11434" for a server of one's own. */
function modelLabel(config: GlassboxConfig): string {
  const { model, baseURL } = config.model;
  if (!baseURL) return model;
  return `${model} at ${URL.canParse(baseURL) ? new URL(baseURL).host : baseURL}`;
}

function modelProblem(config: GlassboxConfig): string | undefined {
  try {
    assertModelConfigured(config);
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
}

start().catch((error: unknown) => {
  process.stderr.write(`glassbox: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
