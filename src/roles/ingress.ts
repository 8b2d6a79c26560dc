/**
 * GLASSBOX_ROLE=ingress: this process receives Slack (HTTP or Socket Mode), Discord (the gateway)
 * and the HTTP API's writes, and turns each into a stored, enqueued turn for the worker processes;
 * its HTTP server also serves the chat page, the trace viewer and the API's reads, from the store.
 * It opens no model client: nothing here needs OPENAI_API_KEY or OPENAI_BASE_URL. It needs
 * PostgreSQL, which carries the turns to the workers (an in-process queue would keep them here).
 */
import { priceOf } from "../agent/cost.js";
import { configurationError } from "../agent/errors.js";
import { createTokenCounter, encodingForModel } from "../agent/tokens.js";
import type { GlassboxConfig } from "../config.js";
import type { Logger } from "../logger.js";
import { openPostgresRunQueue, type PostgresQueueOptions } from "../queue/postgres.js";
import { openStorePort, type PostgresPort, type StorePortOptions } from "../store/index.js";
import { startDiscordIngress, type DiscordIngress } from "../adapters/discord/discord-inbound.js";
import { startHttpIngress, type HttpIngress } from "../adapters/web/web-inbound.js";
import { startSlackIngress, type SlackIngress } from "../adapters/slack/slack-inbound.js";
import type { ReplayOnModel } from "../adapters/web/web-replay.js";

export interface IngressRole {
  /** The PostgreSQL store this process accepts into (its own handle). */
  store: PostgresPort;
  slack?: SlackIngress;
  discord?: DiscordIngress;
  api: HttpIngress;
  /** Stops receiving, then closes the queue and the store. */
  stop(): Promise<void>;
}

export async function startIngressRole(options: {
  config: GlassboxConfig;
  /** Where the store is (storePortOptionsFromEnv): it must name PostgreSQL. */
  store: StorePortOptions;
  /** The run queue's own settings (its schema, timings); the connection is the store's database. */
  queue?: Omit<PostgresQueueOptions, "connectionString" | "logger">;
  log: Logger;
  /** What an empty mention suggests asking. */
  hints?: string[];
  /** Replays for the trace viewer and the tools' names for the pages, when this process runs a worker too (`all`). */
  replay?: ReplayOnModel;
  toolNames?: string[];
}): Promise<IngressRole> {
  const { config, log } = options;
  const databaseUrl = options.store.databaseUrl;
  if (!databaseUrl) {
    throw configurationError(
      "GLASSBOX_ROLE=ingress needs GLASSBOX_DATABASE_URL (PostgreSQL), which carries the work to the worker processes; unset GLASSBOX_ROLE to run everything in one process.",
    );
  }
  const store = (await openStorePort({ ...options.store, longRunning: true })) as PostgresPort;
  const started: Array<{ stop(): Promise<void> }> = [];
  try {
    const queue = await openPostgresRunQueue({ ...options.queue, connectionString: databaseUrl, logger: log });
    started.push({ stop: () => queue.close() });
    // Messages are stored with their token count in the model's encoding; counting needs no model call.
    const counter = await createTokenCounter(config.encoding ?? encodingForModel(config.model.model));
    const offered = await followOffers(store, options, log);
    started.push(offered);
    const common = { store, queue, log, counter, hints: offered.hints };
    const slack = config.slack ? await startSlackIngress({ ...common, slack: config.slack }) : undefined;
    if (slack) started.push(slack);
    const discord = config.discord
      ? await startDiscordIngress({
          ...common,
          discord: config.discord,
          model: { name: config.model.model, prices: config.prices },
        })
      : undefined;
    if (discord) started.push(discord);
    const trace = {
      store,
      modelLabel: modelLabelOf(config),
      priced: priceOf(config.model.model, config.prices) !== null,
    };
    const api = await startHttpIngress({
      ...common,
      ...config.web,
      trace,
      replay: options.replay,
      toolNames: offered.tools,
    });
    started.push(api);
    log.info(
      {
        slack: slack?.eventsUrl ?? (slack ? "socket mode" : null),
        discord: Boolean(discord),
        api: api.url,
        trace: `${api.url}/trace`,
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
        await store.close();
      },
    };
  } catch (error) {
    for (const part of started.reverse()) await part.stop().catch(() => {});
    await store.close();
    throw error;
  }
}

/** The workers' model as the pages show it: "gpt-4o-mini", or "llama3.1 at localhost:11434". */
function modelLabelOf(config: GlassboxConfig): string {
  const { model, baseURL } = config.model;
  if (!baseURL) return model;
  return `${model} at ${URL.canParse(baseURL) ? new URL(baseURL).host : baseURL}`;
}

/** How often ingress alone reads what the live workers offer. */
const OFFERS_EVERY_MS = 5_000;

/**
 * The tools' names and the suggestions the pages and an empty mention show: the worker's in the same
 * process (`all`), or else those the live workers recorded (StorePort.toolsOffered), read at start and
 * every OFFERS_EVERY_MS into the same two arrays, which the parts read at each use.
 */
async function followOffers(
  store: PostgresPort,
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
