// Shared set-up for the Discord e2e tests: the one pipeline (startRoles, role "all": Discord's
// inbound handler, the in-process run queue, the worker and its Discord surface) against the fake
// Discord (REST + gateway), the real openai SDK against the scripted model server, and
// real SQLite files (the agent's store and the demo shop) in a temp dir. Waiting is done on
// recorded requests and polled state with generous timeouts, never on fixed delays.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "vitest";
import type { Client } from "discord.js";
import type { SqliteStore } from "../../src/store/sqlite-store.js";
import { loadConfig, type DiscordConfig, type GlassboxConfig } from "../../src/config.js";
import { type StartedRoles, startRoles } from "../../src/roles/start.js";
import type { GlassboxAgent } from "../../src/setup.js";
import type { Logger } from "../../src/logger.js";
import type { StorePort } from "../../src/store/port.js";
import { type SqliteAgent, sqliteAgentConfig } from "./sqlite-agent.js";
import {
  startFakeDiscord,
  type FakeDiscord,
  type FakeDiscordMessage,
  type FakeDiscordOptions,
} from "../../src/testing/fake-discord.js";
import {
  startScriptedModelServer,
  type Script,
  type ScriptedModelServer,
} from "../../src/testing/scripted-model-server.js";
import { memoryLogger, type LogLine } from "./slack.js";

export {
  CANCELLABLE_ORDER,
  cancelScript,
  memoryLogger,
  orderStatus,
  sentMessages,
  textOf,
  toolCall,
  toolResults,
  userTexts,
} from "./slack.js";

export const GUILD = "1300000000000000100";
export const CHANNEL = "1300000000000000101";
export const OTHER_CHANNEL = "1300000000000000102";
export const THREAD = "1300000000000000103";
export const DM = "1300000000000000200";
export const USER = "1300000000000000300";
export const OTHER_USER = "1300000000000000301";
export const APPROVER = "1300000000000000302";
export const WAIT = { timeout: 15_000, interval: 20 };
export const REQUEST_WAIT = { timeoutMs: 15_000 };

// Closed in this order: models first (a hanging model call ends, so adapters can go idle), then
// adapters, fakes, stores, and last the temp files.
const cleanups = {
  models: [] as ScriptedModelServer[],
  adapters: [] as Array<() => Promise<void>>,
  fakes: [] as FakeDiscord[],
  stores: [] as SqliteStore[],
  dirs: [] as string[],
};

/** Call from afterEach. */
export async function cleanUp(): Promise<void> {
  for (const model of cleanups.models.splice(0)) await model.close();
  for (const stop of cleanups.adapters.splice(0).reverse()) await stop();
  for (const fake of cleanups.fakes.splice(0)) await fake.close();
  for (const store of cleanups.stores.splice(0)) if (store.db.open) store.close();
  for (const dir of cleanups.dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
}

export async function startModel(script: Script = []): Promise<ScriptedModelServer> {
  const model = await startScriptedModelServer({ script });
  cleanups.models.push(model);
  return model;
}

/** A fake Discord with one server (a text channel, a second channel, a thread of the first) and a DM. */
export async function startFake(options: FakeDiscordOptions = {}): Promise<FakeDiscord> {
  const fake = await startFakeDiscord({
    guilds: [
      {
        id: GUILD,
        name: "Test Guild",
        channels: [
          { id: CHANNEL, name: "general" },
          { id: OTHER_CHANNEL, name: "random" },
          { id: THREAD, name: "a thread", type: 11, parent_id: CHANNEL },
        ],
      },
    ],
    dmChannels: [{ id: DM, recipientId: USER }],
    ...options,
  });
  cleanups.fakes.push(fake);
  return fake;
}

export interface Paths {
  db: string;
  shopDb: string;
}

export function tempPaths(): Paths {
  const directory = mkdtempSync(join(tmpdir(), "glassbox-discord-"));
  cleanups.dirs.push(directory);
  return { db: join(directory, "glassbox.db"), shopDb: join(directory, "shop.db") };
}

/** The agent exactly as `npm start` builds it, from environment variables, over the given files. */
export async function agentFor(
  model: ScriptedModelServer,
  paths: Paths,
  log: Logger,
  env: Record<string, string> = {},
) {
  const config = loadConfig({
    OPENAI_BASE_URL: model.url,
    LLM_MODEL: "gpt-4o-mini",
    GLASSBOX_DB: paths.db,
    GLASSBOX_SHOP_DB: paths.shopDb,
    GLASSBOX_DEMO: "true",
    ...env,
  });
  const agent = await sqliteAgentConfig(config, log);
  cleanups.stores.push(agent.store);
  return { agent, config };
}

export interface AdapterOptions {
  fake: FakeDiscord;
  agent: GlassboxAgent;
  /** The store port the pipeline is given. */
  store: StorePort;
  log: Logger;
  discord?: Partial<DiscordConfig>;
  approvalTtlSeconds?: number;
  /** The settings the agent was built from (agentFor); the Discord and web settings are set here. */
  config?: GlassboxConfig;
}

/** The pipeline as one process runs it, with Discord: what a test looks at and waits for. */
export interface DiscordPipeline {
  roles: StartedRoles;
  client: Client<true>;
  inviteUrl: string;
  /** Resolves once every event received is accepted and every turn queued so far has run. */
  idle(): Promise<void>;
  /** Whether the session has a run accepted or running. */
  busy(sessionId: string): Promise<boolean>;
  /** One approval sweep at `now`; resolves with how many approvals it expired. */
  expireApprovals(now?: Date): Promise<number>;
  stop(): Promise<void>;
}

/**
 * The one pipeline (startRoles, role "all") on the test's store, with Discord pointing at the fake;
 * stop() may be called by the test and again at clean-up (it leaves the store open).
 */
export async function startAdapter(options: AdapterOptions): Promise<DiscordPipeline> {
  const base = options.config ?? loadConfig({ LLM_MODEL: "gpt-4o-mini" });
  const config: GlassboxConfig = {
    ...base,
    discord: { token: options.fake.token, apiUrl: options.fake.apiUrl, approvers: [], ...options.discord },
    slack: undefined,
    web: { ...base.web, port: 0 },
    approvalTtlSeconds: options.approvalTtlSeconds ?? 3_600,
  };
  const roles = await startRoles({ config, role: "all", log: options.log, agent: options.agent, store: options.store });
  const discord = roles.ingress?.discord;
  const worker = roles.worker;
  if (!discord || !worker) throw new Error("the pipeline started without Discord or a worker");
  const queue = roles.deployment.queue;
  let stopped: Promise<void> | undefined;
  const stop = () => (stopped ??= roles.stop());
  cleanups.adapters.push(stop);
  return {
    roles,
    client: discord.client,
    inviteUrl: discord.inviteUrl,
    async idle() {
      await discord.idle();
      if ("idle" in queue && typeof queue.idle === "function") await queue.idle();
    },
    busy: async (sessionId) =>
      (await options.store.runsOfSession(sessionId)).some(
        (run) => run.status === "accepted" || run.status === "running",
      ),
    expireApprovals: async (now) => (await worker.sweeper.sweep(now)).length,
    stop,
  };
}

export interface Harness {
  fake: FakeDiscord;
  model: ScriptedModelServer;
  discord: DiscordPipeline;
  agent: SqliteAgent;
  paths: Paths;
  lines: LogLine[];
  log: Logger;
  /** A message in the server channel (or thread) that mentions the bot; returns its id and content. */
  mention(
    text: string,
    options?: { channelId?: string; authorId?: string; replyTo?: string },
  ): Promise<{ id: string; content: string }>;
  /** A direct message to the bot. */
  dm(text: string, options?: { authorId?: string }): Promise<{ id: string; content: string }>;
}

export interface HarnessOptions {
  script?: Script;
  fake?: FakeDiscordOptions;
  discord?: Partial<DiscordConfig>;
  env?: Record<string, string>;
  approvalTtlSeconds?: number;
  /** Changes the agent before the adapter starts (e.g. another model client). */
  agent?: (agent: SqliteAgent, model: ScriptedModelServer) => SqliteAgent;
}

export async function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  const fake = await startFake(options.fake);
  const model = await startModel(options.script ?? []);
  const paths = tempPaths();
  const { log, lines } = memoryLogger();
  const { agent: built, config } = await agentFor(model, paths, log, options.env);
  const agent = options.agent ? options.agent(built, model) : built;
  const discord = await startAdapter({
    fake,
    agent,
    store: agent.port,
    config,
    log,
    discord: options.discord,
    approvalTtlSeconds: options.approvalTtlSeconds,
  });
  return {
    fake,
    model,
    discord,
    agent,
    paths,
    lines,
    log,
    mention: (text, o = {}) =>
      fake.sendMessage({
        channelId: o.channelId ?? CHANNEL,
        guildId: GUILD,
        authorId: o.authorId ?? USER,
        content: text,
        mentionsBot: true,
        ...(o.replyTo ? { replyTo: o.replyTo } : {}),
      }),
    dm: (text, o = {}) => fake.sendMessage({ channelId: DM, authorId: o.authorId ?? USER, content: text }),
  };
}

/** What the bot posted in a channel (as a person sees it now), in order. */
export function botMessages(fake: FakeDiscord, channelId: string): FakeDiscordMessage[] {
  return fake.messages(channelId).filter((m) => m.author.id === fake.botUserId);
}

export function botTexts(fake: FakeDiscord, channelId: string): string[] {
  return botMessages(fake, channelId).map((m) => m.content);
}

/** Waits until a bot message of the channel matches, and returns it. */
export async function waitForBotMessage(
  fake: FakeDiscord,
  channelId: string,
  match: RegExp | string,
): Promise<FakeDiscordMessage> {
  const test = (text: string) => (typeof match === "string" ? text.includes(match) : match.test(text));
  let found: FakeDiscordMessage | undefined;
  await expect
    .poll(() => {
      found = botMessages(fake, channelId).find((m) => test(m.content));
      return found !== undefined;
    }, WAIT)
    .toBe(true);
  return found as FakeDiscordMessage;
}

export function messageById(fake: FakeDiscord, channelId: string, id: string): FakeDiscordMessage | undefined {
  return fake.messages(channelId).find((m) => m.id === id);
}

interface ActionRow {
  type: number;
  components?: Array<{ type: number; custom_id?: string; label?: string; style?: number }>;
}

/** The buttons of a message (none once decided). */
export function buttonsOf(
  message: FakeDiscordMessage | undefined,
): Array<{ custom_id?: string; label?: string; style?: number }> {
  return ((message?.components ?? []) as ActionRow[])
    .flatMap((row) => row.components ?? [])
    .filter((component) => component.type === 2);
}

export interface ApprovalMessage {
  channelId: string;
  message: FakeDiscordMessage;
  id: string;
  approve: string;
  deny: string;
}

/** Waits for the approval message with its buttons in the channel; the approval id is in their custom_ids. */
export async function waitForApproval(fake: FakeDiscord, channelId: string): Promise<ApprovalMessage> {
  let found: FakeDiscordMessage | undefined;
  await expect
    .poll(() => {
      found = botMessages(fake, channelId).find((m) => buttonsOf(m).length > 0);
      return found !== undefined;
    }, WAIT)
    .toBe(true);
  const message = found as FakeDiscordMessage;
  const [approve = "", deny = ""] = buttonsOf(message).map((button) => button.custom_id ?? "");
  return { channelId, message, id: approve.split(":").at(-1) ?? "", approve, deny };
}

/** Clicks a button of the approval message as `userId`. */
export function click(fake: FakeDiscord, approval: ApprovalMessage, userId: string, customId = approval.approve) {
  return fake.clickButton({ channelId: approval.channelId, userId, messageId: approval.message.id, customId });
}

/** The bodies of an interaction's calls (callback and webhooks), as `{ type?, content?, flags? }`. */
export function interactionReplies(
  fake: FakeDiscord,
  interactionId: string,
): Array<{ method: string; type?: number; content?: string; flags?: number }> {
  return fake.interactionResponses(interactionId).map((request) => {
    const body = (request.body ?? {}) as {
      type?: number;
      content?: string;
      flags?: number;
      data?: { content?: string; flags?: number };
    };
    return {
      method: request.method,
      type: body.type,
      content: body.data?.content ?? body.content,
      flags: body.data?.flags ?? body.flags,
    };
  });
}
