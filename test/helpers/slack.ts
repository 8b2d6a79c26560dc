// Shared set-up for the Slack e2e tests: the one pipeline as a process on SQLite runs it
// (startRoles, role "all": Slack ingress, the in-process queue, the worker and its Slack surface)
// against the fake Slack, the real openai SDK against the scripted model server, and real SQLite files (the agent's
// store and the demo shop) in a temp dir. Waiting is done on recorded calls and polled state with
// generous timeouts, never on fixed delays.
import type { Health } from "../../src/adapters/web/health.js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { expect } from "vitest";
import type { App } from "@slack/bolt";
import { setImmediate as nextTurn } from "node:timers/promises";
import { openShopDatabase } from "../../src/tools/builtin/shop.js";
import { loadConfig, type GlassboxConfig, type SlackConfig } from "../../src/config.js";
import type { Logger } from "../../src/logger.js";
import type { InProcessRunQueue } from "../../src/queue/in-process.js";
import { startRoles } from "../../src/roles/start.js";
import { sqliteAgentConfig, type SqliteAgent } from "./sqlite-agent.js";
import {
  startFakeSlack,
  type FakeMessage,
  type FakeSlack,
  type FakeSlackOptions,
} from "../../src/testing/fake-slack.js";
import {
  startScriptedModelServer,
  type ChatCompletionRequestBody,
  type Script,
  type ScriptedReply,
  type ScriptedModelServer,
} from "../../src/testing/scripted-model-server.js";

export const BOT = "U0FAKEBOT1";
/** The bot_id of what the bot posts (a person's message echoed by the fake has none). */
export const BOT_ID = "B0FAKEBOT1";
export const TEAM = "T0FAKE0001";
export const CHANNEL = "C1";
export const BOT_TOKEN = "xoxb-fake-bot-token";
export const APP_TOKEN = "xapp-1-fake-app-token";
export const SIGNING_SECRET = "fake-signing-secret";
export const APPROVE = "glassbox_approve";
export const DENY = "glassbox_deny";
/** A paid order of the demo shop: it can still be cancelled. */
export const CANCELLABLE_ORDER = "20240410003";
export const WAIT = { timeout: 15_000, interval: 20 };
export const CALL_WAIT = { timeoutMs: 15_000 };

const cleanups: Array<() => Promise<void> | void> = [];

/** Call from afterEach: stops adapters, closes servers and stores, removes the temp files (last started, first stopped). */
export async function cleanUp(): Promise<void> {
  for (const cleanup of cleanups.splice(0).reverse()) {
    await cleanup();
  }
}

export interface LogLine {
  level: number;
  msg: string;
  [key: string]: unknown;
}

/** A real pino logger that keeps its lines in memory, so a test can check what was logged. */
export function memoryLogger(): { log: Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const log = pino({ level: "info" }, { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) });
  return { log, lines };
}

export async function startModel(script: Script = []): Promise<ScriptedModelServer> {
  const model = await startScriptedModelServer({ script });
  cleanups.push(() => model.close());
  return model;
}

export async function startSlack(options: FakeSlackOptions = {}): Promise<FakeSlack> {
  const fake = await startFakeSlack({
    botToken: BOT_TOKEN,
    appToken: APP_TOKEN,
    signingSecret: SIGNING_SECRET,
    ...options,
  });
  cleanups.push(() => fake.close());
  return fake;
}

export function tempDir(): string {
  const directory = mkdtempSync(join(tmpdir(), "glassbox-slack-"));
  cleanups.push(() => rmSync(directory, { recursive: true, force: true }));
  return directory;
}

export interface Paths {
  db: string;
  shopDb: string;
}

export function tempPaths(): Paths {
  const directory = tempDir();
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
    GLASSBOX_WEB_PORT: "0",
    ...env,
  });
  const agent = await sqliteAgentConfig(config, log);
  cleanups.push(() => {
    if (agent.store.db.open) agent.store.close();
  });
  return { agent, config };
}

export function slackConfigFor(fake: FakeSlack, overrides: Partial<SlackConfig> = {}): SlackConfig {
  return {
    botToken: BOT_TOKEN,
    signingSecret: SIGNING_SECRET,
    port: 0,
    host: "127.0.0.1",
    apiUrl: fake.apiUrl,
    allowedChannels: [],
    approvers: [],
    ...overrides,
  };
}

/** The bot as the tests drive it: Slack's addresses, the conversations' state, and stop. */
export interface SlackAdapter {
  app: App;
  /** The Events API request URL in HTTP mode (`.../slack/events`); undefined in Socket Mode. */
  eventsUrl?: string;
  /** Installed through OAuth: where a workspace starts installing the app. */
  installUrl?: string;
  /** The web server's address (the HTTP API and the pages), when the settings start one. */
  apiUrl?: string;
  /** What /readyz reports of the process. */
  readiness: Health["readiness"];
  conversations: {
    /** Resolves once no turn waits or runs, and the replies ingress posts after acknowledging are out. */
    idle(): Promise<void>;
    /** One sweep of the worker's approval sweeper at `now`; how many approvals it expired. */
    expireApprovals(now?: Date): Promise<number>;
    /** Whether a run of the session is accepted or running (read from the SQLite file). */
    busy(sessionId: string): boolean;
  };
  stop(): Promise<void>;
}

/**
 * The one pipeline in one process (startRoles, role "all") on the agent's SQLite file, with the
 * test's agent: Slack ingress, the in-process queue, the worker and its surfaces.
 */
export async function startAdapter(options: {
  fake: FakeSlack;
  agent: SqliteAgent;
  log: Logger;
  slack?: Partial<SlackConfig>;
  approvalTtlSeconds?: number;
  /** The agent's settings (the web server, daily limits); by default loadConfig's with any free web port. */
  config?: GlassboxConfig;
}): Promise<SlackAdapter> {
  const base = options.config ?? loadConfig({ GLASSBOX_WEB_PORT: "0", OPENAI_API_KEY: "unused" });
  const config: GlassboxConfig = {
    ...base,
    slack: slackConfigFor(options.fake, options.slack),
    approvalTtlSeconds: options.approvalTtlSeconds ?? 3_600,
  };
  const roles = await startRoles({
    config,
    role: "all",
    log: options.log,
    agent: options.agent,
    store: options.agent.port,
  });
  const queue = roles.deployment.queue as InProcessRunQueue;
  const ingress = roles.ingress?.slack;
  const worker = roles.worker;
  if (!ingress || !worker) throw new Error("startRoles started no Slack ingress or no worker");
  const active = options.agent.store.db.prepare(
    "SELECT count(*) FROM runs WHERE session_id = ? AND status IN ('accepted', 'running')",
  );
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await roles.stop();
  };
  cleanups.push(stop);
  return {
    app: ingress.app,
    eventsUrl: ingress.eventsUrl,
    installUrl: ingress.installUrl,
    apiUrl: roles.ingress?.api?.url,
    readiness: () => roles.health.readiness(),
    conversations: {
      async idle() {
        // Replies after an acknowledgement go out on a later turn of the event loop; a turn may enqueue another.
        for (let quiet = 0; quiet < 3; ) {
          await nextTurn();
          await queue.idle();
          await new Promise((resolve) => setTimeout(resolve, 5));
          quiet++;
        }
      },
      async expireApprovals(now) {
        await worker.sweeper.sweep(new Date(0)); // waits out a sweep already running (the one at start)
        return (await worker.sweeper.sweep(now)).length;
      },
      busy: (sessionId) => (active.pluck().get(sessionId) as number) > 0,
    },
    stop,
  };
}

export interface Harness {
  fake: FakeSlack;
  model: ScriptedModelServer;
  slack: SlackAdapter;
  agent: SqliteAgent;
  paths: Paths;
  lines: LogLine[];
  log: Logger;
  /** POSTs a signed app_mention (or another event) to the adapter; returns the message ts. */
  mention(text: string, options?: EventOptions): Promise<{ ts: string; status: number; eventId: string }>;
  /** A direct message (a `message` event with channel_type im in a D... channel). */
  dm(text: string, options?: EventOptions): Promise<{ ts: string; status: number; eventId: string }>;
  /** Clicks a button of the approval message as `userId`. */
  click(approval: ApprovalMessage, userId: string, actionId?: string): Promise<{ status: number; body: string }>;
}

export interface EventOptions {
  channel?: string;
  user?: string;
  ts?: string;
  threadTs?: string;
  eventId?: string;
  retryNum?: number;
  extra?: Record<string, unknown>;
}

export interface HarnessOptions {
  script?: Script;
  fake?: FakeSlackOptions;
  slack?: Partial<SlackConfig>;
  env?: Record<string, string>;
  approvalTtlSeconds?: number;
  /** Changes the agent before the adapter starts (e.g. another model client). */
  agent?: (agent: SqliteAgent, model: ScriptedModelServer) => SqliteAgent;
}

export async function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  const fake = await startSlack(options.fake);
  const model = await startModel(options.script ?? []);
  const paths = tempPaths();
  const { log, lines } = memoryLogger();
  const { agent: built, config } = await agentFor(model, paths, log, options.env);
  const agent = options.agent ? options.agent(built, model) : built;
  const slack = await startAdapter({
    fake,
    agent,
    log,
    slack: options.slack,
    approvalTtlSeconds: options.approvalTtlSeconds,
    config,
  });
  const url = slack.eventsUrl as string;

  async function send(event: Record<string, unknown>, o: EventOptions) {
    const ts = o.ts ?? fake.nextTs();
    const sent = await fake.sendEvent(
      url,
      { ...event, ts, ...(o.threadTs ? { thread_ts: o.threadTs } : {}), ...o.extra },
      {
        ...(o.eventId ? { eventId: o.eventId } : {}),
        ...(o.retryNum !== undefined ? { retryNum: o.retryNum } : {}),
      },
    );
    expect(sent.status).toBe(200);
    return { ts, status: sent.status, eventId: sent.eventId };
  }

  return {
    fake,
    model,
    slack,
    agent,
    paths,
    lines,
    log,
    mention: (text, o = {}) =>
      send({ type: "app_mention", user: o.user ?? "U1", channel: o.channel ?? CHANNEL, text }, o),
    dm: (text, o = {}) =>
      send({ type: "message", channel_type: "im", user: o.user ?? "U1", channel: o.channel ?? "D1", text }, o),
    click: (approval, userId, actionId = APPROVE) =>
      fake.sendBlockAction(url, {
        userId,
        channel: approval.channel,
        messageTs: approval.ts,
        actionId,
        value: approval.id,
      }),
  };
}

/** The texts a person sees in a thread (the bot's messages only, in order). */
export function botTexts(fake: FakeSlack, channel: string, threadTs?: string): string[] {
  return fake
    .messages(channel, threadTs)
    .filter((m) => m.bot_id === BOT_ID)
    .map((m) => m.text ?? "");
}

/** Waits until a bot message of the thread matches, and returns it. */
export async function waitForBotMessage(
  fake: FakeSlack,
  channel: string,
  threadTs: string | undefined,
  match: RegExp | string,
): Promise<FakeMessage> {
  const test = (text: string) => (typeof match === "string" ? text.includes(match) : match.test(text));
  let found: FakeMessage | undefined;
  await expect
    .poll(() => {
      found = fake.messages(channel, threadTs).find((m) => m.bot_id === BOT_ID && test(m.text ?? ""));
      return found !== undefined;
    }, WAIT)
    .toBe(true);
  return found as FakeMessage;
}

export interface ApprovalMessage {
  channel: string;
  ts: string;
  id: string;
  message: FakeMessage;
}

interface ButtonBlock {
  type: string;
  elements?: Array<{ action_id?: string; value?: string }>;
}

/** The buttons of an approval message (none once decided). */
export function buttonsOf(message: FakeMessage): Array<{ action_id?: string; value?: string }> {
  return ((message.blocks ?? []) as ButtonBlock[])
    .filter((block) => block.type === "actions")
    .flatMap((block) => block.elements ?? []);
}

/** Waits for the approval message with its buttons in the thread; the approval id is the buttons' value. */
export async function waitForApproval(fake: FakeSlack, channel: string, threadTs?: string): Promise<ApprovalMessage> {
  let found: FakeMessage | undefined;
  await expect
    .poll(() => {
      found = fake.messages(channel, threadTs).find((m) => buttonsOf(m).length > 0);
      return found !== undefined;
    }, WAIT)
    .toBe(true);
  const message = found as FakeMessage;
  const id = buttonsOf(message)[0]?.value ?? "";
  return { channel, ts: message.ts, id, message };
}

/** The current state of a message (its text and blocks as a person sees them). */
export function messageAt(fake: FakeSlack, channel: string, ts: string): FakeMessage | undefined {
  return fake.messages(channel).find((m) => m.ts === ts);
}

/** The text of a message's blocks and its fallback text, as one string to match against. */
export function visibleText(message: FakeMessage | undefined): string {
  return `${message?.text ?? ""}\n${JSON.stringify(message?.blocks ?? [])}`;
}

type SentMessage = ChatCompletionRequestBody["messages"][number];

export function textOf(message: SentMessage | undefined): string {
  return typeof message?.content === "string" ? message.content : "";
}

/** The messages of the model request number `index`. */
export function sentMessages(model: ScriptedModelServer, index: number): SentMessage[] {
  const request = model.requests[index];
  if (!request) throw new Error(`no model request #${index}; the server saw ${model.requests.length}`);
  return request.body.messages;
}

/** The user messages of a request, as text. */
export function userTexts(model: ScriptedModelServer, index: number): string[] {
  return sentMessages(model, index)
    .filter((m) => m.role === "user")
    .map(textOf);
}

/** The tool messages of a request, parsed from their JSON envelopes. */
export function toolResults(
  model: ScriptedModelServer,
  index: number,
): Array<{ status: string; data?: unknown; error?: { type: string; message: string } }> {
  return sentMessages(model, index)
    .filter((m) => m.role === "tool")
    .map((m) => JSON.parse(textOf(m)) as { status: string; data?: unknown; error?: { type: string; message: string } });
}

/** The status of an order in the demo shop's SQLite file (seeded here when no tool has opened it yet: the shop opens on its first call). */
export function orderStatus(shopDb: string, orderId: string): string | undefined {
  const db = openShopDatabase(shopDb);
  try {
    return (
      (db.prepare("SELECT status FROM orders WHERE id = ?").pluck().get(orderId) as string | undefined) ?? undefined
    );
  } finally {
    db.close();
  }
}

export const toolCall = (name: string, args: unknown, id?: string) => ({
  name,
  arguments: JSON.stringify(args),
  ...(id ? { id } : {}),
});

export const cancelScript = (answer = "Done: order 20240410003 is cancelled."): ScriptedReply[] => [
  { toolCalls: [toolCall("cancel_order", { order_id: CANCELLABLE_ORDER, reason: "ordered twice" }, "call_cancel_1")] },
  { content: answer },
];
