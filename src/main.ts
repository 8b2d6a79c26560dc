/**
 * `npm start`: runs the bot with the adapters that are configured — Slack when SLACK_BOT_TOKEN is
 * set, Discord when DISCORD_TOKEN is — and otherwise the local web playground (chat page, trace
 * viewer, HTTP API) on the same agent loop, remembered in SQLite between starts. Without a model
 * the playground still opens and says what to set. `glassbox chat` is the terminal chat.
 */
import { startDiscordAdapter } from "./adapters/discord/discord-adapter.js";
import { startSlackAdapter, type SlackRuns } from "./adapters/slack/slack-adapter.js";
import { exampleRequests } from "./adapters/example-requests.js";
import { startWebServer } from "./adapters/web/web-server.js";
import { openStore } from "./agent/store.js";
import { assertModelConfigured, loadConfig, type GlassboxConfig } from "./config.js";
import { createLogger, type Logger } from "./logger.js";
import { createAgentConfig } from "./setup.js";

async function start(): Promise<void> {
  const config = loadConfig();
  if (!config.slack && !config.discord) return startPlayground(config);
  const log = createLogger({ level: "info" });
  // With several workers, each builds its own agent; this thread only needs one for Discord.
  const slackWorkers = config.slack && config.workers > 1 ? config.workers : 0;
  assertModelConfigured(config);
  const agent = !slackWorkers || config.discord ? await createAgentConfig(config, log) : undefined;
  const store = agent?.store ?? openStore(config.databasePath, { checkpointInBackground: true });

  // Event claims only need to outlive the platforms' redeliveries (minutes); a week is plenty.
  store.pruneClaims(new Date(Date.now() - 7 * 86_400_000));
  // Runs left `running` by a process that was killed would say so forever; they were interrupted.
  const interrupted = store.interruptOrphanedRuns();
  if (interrupted > 0) log.info({ runs: interrupted }, "marked the runs of a stopped process interrupted");
  const stops: Array<() => Promise<void>> = [];
  if (config.slack) {
    const runs: SlackRuns =
      slackWorkers || !agent
        ? { workers: { count: slackWorkers, config, onExit: (worker, code) => stopAfterCrash(log, worker, code) } }
        : { agent, dailyLimits: config.dailyLimits, pipelines: agent.pipelines };
    const slack = await startSlackAdapter({ slack: config.slack, store, log, approvalTtlSeconds: config.approvalTtlSeconds, hints: agent && exampleRequests(agent.toolSources), ...runs });
    stops.push(slack.stop);
    log.info({ mode: config.slack.appToken ? "socket" : "http", eventsUrl: slack.eventsUrl, workers: slackWorkers || undefined }, "Slack connected");
  }
  if (config.discord && agent) {
    const discord = await startDiscordAdapter({ discord: config.discord, agent, store, log, approvalTtlSeconds: config.approvalTtlSeconds, prices: config.prices, dailyLimits: config.dailyLimits, pipelines: agent.pipelines, hints: exampleRequests(agent.toolSources) });
    stops.push(discord.stop);
    log.info({ user: discord.client.user.tag }, "Discord connected");
    process.stdout.write(`Invite the Discord bot to a server: ${discord.inviteUrl}\n`);
  }
  const shutdown = async () => {
    for (const stop of stops) await stop();
    if (agent) await agent.close();
    else store.close();
    process.exit(0);
  };
  process.once("SIGINT", () => void shutdown());
  process.once("SIGTERM", () => void shutdown());
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
  const store = openStore(config.databasePath, { checkpointInBackground: true });
  store.interruptOrphanedRuns();
  const agent = problem ? undefined : await createAgentConfig(config, log, { store });
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
    await agent?.mcp.close();
    store.close();
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
