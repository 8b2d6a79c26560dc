/**
 * `npm start`: runs the bot with the adapters that are configured — Slack when SLACK_BOT_TOKEN is
 * set, Discord when DISCORD_TOKEN is — and otherwise an interactive chat in this terminal on the same agent loop, remembered in
 * SQLite between starts.
 */
import { startDiscordAdapter } from "./adapters/discord/discord-adapter.js";
import { startSlackAdapter } from "./adapters/slack/slack-adapter.js";
import { startTerminalChat } from "./adapters/terminal.js";
import { loadConfig } from "./config.js";
import { createLogger } from "./logger.js";
import { createAgentConfig } from "./setup.js";

async function start(): Promise<void> {
  const config = loadConfig();
  const chatPlatforms = Boolean(config.slack || config.discord);
  const log = createLogger({ level: chatPlatforms ? "info" : "warn" });
  const agent = await createAgentConfig(config, log);

  if (!chatPlatforms) {
    const sessionId = "cli:terminal";
    await startTerminalChat(agent, { input: process.stdin, output: process.stdout, sessionId, reset: () => agent.store.resetSession(sessionId) });
    agent.store.close();
    return;
  }

  const stops: Array<() => Promise<void>> = [];
  if (config.slack) {
    const slack = await startSlackAdapter({ slack: config.slack, agent, store: agent.store, log, approvalTtlSeconds: config.approvalTtlSeconds });
    stops.push(slack.stop);
    log.info({ mode: config.slack.appToken ? "socket" : "http", eventsUrl: slack.eventsUrl }, "Slack connected");
  }
  if (config.discord) {
    const discord = await startDiscordAdapter({ discord: config.discord, agent, store: agent.store, log, approvalTtlSeconds: config.approvalTtlSeconds, prices: config.prices });
    stops.push(discord.stop);
    log.info({ user: discord.client.user.tag }, "Discord connected");
    process.stdout.write(`Invite the Discord bot to a server: ${discord.inviteUrl}\n`);
  }
  const shutdown = async () => {
    for (const stop of stops) await stop();
    agent.store.close();
    process.exit(0);
  };
  process.once("SIGINT", () => void shutdown());
  process.once("SIGTERM", () => void shutdown());
}

start().catch((error: unknown) => {
  process.stderr.write(`glassbox: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
