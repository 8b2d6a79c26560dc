/**
 * GLASSBOX_ROLE=ingress: this process receives Slack (HTTP or Socket Mode), Discord (the gateway)
 * and the HTTP API's writes, and turns each into a stored, enqueued turn for the worker processes;
 * its HTTP server also serves the chat page, the trace viewer and the API's reads, from the store.
 * It opens no model client: nothing here needs OPENAI_API_KEY or OPENAI_BASE_URL. It needs
 * PostgreSQL, which carries the turns to the workers (an in-process queue would keep them here).
 */
import { createNameBook } from "../adapters/names.js";
import { priceOf } from "../agent/cost.js";
import { redactUrl } from "../redact.js";
import { createTokenCounter, encodingForModel } from "../agent/tokens.js";
import type { GlassboxConfig } from "../config.js";
import type { Logger } from "../logger.js";
import type { StorePort } from "../store/port.js";
import type { Deployment } from "./deployment.js";
import { startDiscordIngress, type DiscordIngress } from "../adapters/discord/discord-inbound.js";
import { startHttpIngress, type HttpIngress } from "../adapters/web/web-inbound.js";
import { startSlackIngress, type SlackIngress } from "../adapters/slack/slack-inbound.js";
import type { ReplayOnModel } from "../adapters/web/web-replay.js";
import type { ExamplePrompt } from "../adapters/example-requests.js";
import type { UploadShelf } from "../adapters/web/web-uploads.js";
import type { Health } from "../adapters/web/health.js";
import { budgetStandings } from "../conversations/channel-budget.js";
import { watchChannelSettings, type LiveChannelSettings } from "../conversations/channel-settings.js";

export interface IngressRole {
  /** The store this process accepts into (the deployment's). */
  store: StorePort;
  slack?: SlackIngress;
  discord?: DiscordIngress;
  /** The chat page, the trace viewer and the HTTP API; absent with GLASSBOX_WEB=off. */
  api?: HttpIngress;
  /** Stops receiving; the deployment's store and queue stay open. */
  stop(): Promise<void>;
}

export async function startIngressRole(options: {
  config: GlassboxConfig;
  /** The store and the run queue (openDeployment); the role leaves them open when it stops. */
  deployment: Deployment;
  log: Logger;
  /** What an empty mention suggests asking. */
  hints?: string[];
  /** Replays for the trace viewer and the tools' names for the pages, when this process runs a worker too (`all`). */
  replay?: ReplayOnModel;
  toolNames?: string[];
  /** Slack's suggested prompts from the worker's tools, when one runs here too; else made from the hints. */
  prompts?: ExamplePrompt[];
  /** Where the web server keeps uploaded files for a worker in this process (`all`); without it, it takes none. */
  uploads?: UploadShelf;
  /** Which model answers, as the pages show it; by default the configured one ("gpt-4o-mini at host"). */
  modelLabel?: string;
  /** Why no run can start here (no model configured, and no worker): the pages say it, POST /api/runs answers it. */
  problem?: string;
  /** The process's readiness: the platforms add theirs, and the web server serves it. */
  health?: Health;
  /** The channel settings a worker in this process follows; otherwise read here (GLASSBOX_CHANNELS). */
  channels?: LiveChannelSettings;
}): Promise<IngressRole> {
  const { config, log } = options;
  const { store, queue } = options.deployment;
  const started: Array<{ stop(): Promise<void> }> = [];
  try {
    // Messages are stored with their token count in the model's encoding; counting needs no model call.
    const counter = await createTokenCounter(config.encoding ?? encodingForModel(config.model.model));
    const offered = await followOffers(store, options, log);
    started.push(offered);
    const common = { store, queue, log, counter, hints: offered.hints };
    const slack = config.slack
      ? await startSlackIngress({ ...common, slack: config.slack, prompts: options.prompts })
      : undefined;
    if (slack) {
      started.push(slack);
      options.health?.set("slack", slack.notReady);
    }
    const discord = config.discord
      ? await startDiscordIngress({
          ...common,
          discord: config.discord,
          model: { name: config.model.model, prices: config.prices },
        })
      : undefined;
    if (discord) {
      started.push(discord);
      options.health?.set("discord", discord.notReady);
    }
    // The pages and the API show how the settings' budgets stand; a mistake in the file stops the start.
    const channels =
      options.channels ?? (config.channelsFile ? watchChannelSettings(config.channelsFile, log) : undefined);
    if (channels && !options.channels) started.push({ stop: async () => channels.stop() });
    const trace = {
      store,
      ...(channels ? { budgets: (userId?: string) => budgetStandings(store, channels.current(), userId) } : {}),
      // Without a model the label would name the default one, which is not there.
      modelLabel: options.problem ? null : (options.modelLabel ?? modelLabelOf(config)),
      priced: !options.problem && priceOf(config.model.model, config.prices) !== null,
      names: createNameBook(config, log, slack?.installations),
      evalDir: config.evalDir,
    };
    const api = config.web.enabled
      ? await startHttpIngress({
          ...common,
          ...config.web,
          trace,
          replay: options.replay,
          toolNames: offered.tools,
          problem: options.problem,
          uploads: options.uploads,
          health: options.health,
        })
      : undefined;
    if (api) started.push(api);
    log.info(
      {
        slack: slack?.eventsUrl ?? (slack ? "socket mode" : null),
        discord: discord ? discord.client.user.tag : null,
        discordInvite: discord?.inviteUrl,
        api: api?.url ?? null,
        trace: api ? `${api.url}/trace` : null,
        ...(api?.alsoAt.length ? { alsoAt: api.alsoAt } : {}),
      },
      "ingress: receiving; workers run the turns",
    );
    return {
      store,
      slack,
      discord,
      api,
      async stop() {
        for (const part of started.reverse()) await part.stop();
      },
    };
  } catch (error) {
    for (const part of started.reverse()) await part.stop().catch(() => {});
    throw error;
  }
}

/** The workers' model as the pages show it: "gpt-4o-mini", or "llama3.1 at localhost:11434". */
function modelLabelOf(config: GlassboxConfig): string {
  const { model, baseURL } = config.model;
  if (!baseURL) return model;
  return `${model} at ${URL.canParse(baseURL) ? new URL(baseURL).host : redactUrl(baseURL)}`;
}

/** How often ingress alone reads what the live workers offer. */
const OFFERS_EVERY_MS = 5_000;

/**
 * The tools' names and the suggestions the pages and an empty mention show: the worker's in the same
 * process (`all`), or else those the live workers recorded (StorePort.toolsOffered), read at start and
 * every OFFERS_EVERY_MS into the same two arrays, which the parts read at each use.
 */
async function followOffers(
  store: StorePort,
  given: { hints?: string[]; toolNames?: string[] },
  log: Logger,
): Promise<{ tools: string[]; hints: string[]; stop(): Promise<void> }> {
  if (given.hints || given.toolNames)
    return { tools: given.toolNames ?? [], hints: given.hints ?? [], stop: async () => {} };
  const offered = { tools: [] as string[], hints: [] as string[] };
  const read = async () => {
    try {
      const { tools, hints } = await store.toolsOffered();
      offered.tools.splice(0, offered.tools.length, ...tools);
      offered.hints.splice(0, offered.hints.length, ...hints);
    } catch (error) {
      log.warn(
        { error: (error as Error).message },
        "ingress: reading what the workers offer failed; the pages keep what they showed",
      );
    }
  };
  await read();
  const timer = setInterval(() => void read(), OFFERS_EVERY_MS);
  timer.unref();
  return { ...offered, stop: async () => clearInterval(timer) };
}
