/**
 * The Slack bot as one process on SQLite runs it (startRoles, role "all": Slack ingress with the real
 * Bolt App, the in-process run queue, the worker with its Slack surface; the agent from
 * createAgentConfig with SQLite memory, streaming on) against the fake Slack and the scripted model
 * server over 127.0.0.1.
 *
 * 1. Event-to-acknowledgement latency: distinct signed app_mentions (each a new thread), timed from
 *    sending until the sender has the ack (HTTP 200, or the Socket Mode envelope ack). Sent one at a
 *    time while the bot answers earlier ones in the background (the model answers at once, one step;
 *    the sender waits, untimed, while MAX_IN_FLIGHT runs are unanswered), and in bursts of BURST at
 *    once. Baseline in the same run, in alternating blocks (ABAB): a bare Bolt App with the same
 *    receiver and a handler that does nothing.
 * 2. 100 threads at once: 100 mentions sent together, each run two steps (a current_time call, then
 *    the answer) with 200 ms of model latency per request; wall time until every thread shows its
 *    answer, against the ideal 400 ms. glassbox runs with SQLite's default worker concurrency
 *    (GLASSBOX_WORKER_CONCURRENCY unset: every turn starts, its run bounded by
 *    GLASSBOX_MAX_CONCURRENT_RUNS) and with PostgreSQL's (8).
 *
 * Both run twice, with the harness (fake Slack, model server and the event sender) placed
 * differently; the bot runs on the main thread:
 *  - "shared loop": the harness on the bot's own event loop, as a test would set it up. Every Web API
 *    call and model request is served, and every event sent, by the same thread that runs the bot,
 *    and the sender only sees an ack once the bot's event loop lets it read the reply.
 *  - "own thread": the harness in a worker thread of this process, with its own event loop, as the
 *    real Slack and model are somewhere else: the bot's event loop holds only the bot.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import { App, LogLevel, type Logger as BoltLogger } from "@slack/bolt";
import type { WebClient } from "@slack/web-api";
import OpenAI from "openai";
import type { ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions";
import { pino } from "pino";
import type { InProcessRunQueue } from "../src/queue/in-process.js";
import { startRoles } from "../src/roles/start.js";
import { DEFAULT_SYSTEM_PROMPT } from "../src/agent/loop.js";
import type { AgentConfig } from "../src/agent/run.js";
import { loadConfig, type GlassboxConfig, type SlackConfig } from "../src/config.js";
import type { Logger } from "../src/logger.js";
import { createAgentConfig } from "../src/setup.js";
import { describeTime } from "../src/tools/builtin/current-time.js";
import type { ToolSpec } from "../src/tools/types.js";
import { undiciFetch } from "../src/undici-fetch.js";
import { startFakeSlack, type FakeSlack, type RecordedCall } from "../src/testing/fake-slack.js";
import {
  startScriptedModelServer,
  type ChatCompletionRequestBody,
  type ScriptedModelServer,
  type ScriptedReply,
} from "../src/testing/scripted-model-server.js";
import { collectGarbage, sig3, statsOf, type Benchmark, type Row, type Stats, type Target } from "./measure.js";

const BOT_TOKEN = "xoxb-fake-bot-token";
const APP_TOKEN = "xapp-1-fake-app-token";
const SIGNING_SECRET = "fake-signing-secret";
const BOT_USER = "U0FAKEBOT1";
const HOST = "127.0.0.1";
const CHANNEL = "C1";
const BARE_CHANNEL = "C2";

// ---- 1. acknowledgement latency
const ACK_EVENTS = 500;
const ACK_WARMUP_EVENTS = 50;
/** Events per block; glassbox and bare Bolt blocks alternate, taking turns going first. */
const ACK_BLOCK = 100;
const BURST = 10;
/** Unanswered glassbox runs at most, one at a time; with bursts, at most BURST before the next burst. */
const MAX_IN_FLIGHT = 10;
const HELLO = "Hello.";
const TARGET_ACK_P99_MS = 50;

// ---- 2. 100 threads at once
const THREADS = 100;
const MODEL_LATENCY_MS = 200;
const STEPS_PER_RUN = 2;
const IDEAL_MS = STEPS_PER_RUN * MODEL_LATENCY_MS;
/** Median of 5 by default; BENCH_ROUNDS=15 steadies the figures on a busy machine. */
const MEASURED_ROUNDS = Number(process.env.BENCH_ROUNDS) || 5;
const TARGET_THREADS_RATIO = 1.5;
/**
 * Rounds before the measured ones: V8 keeps optimising the bots' code for several rounds (each
 * round's CPU falls until about the fourth), and a live bot meets a burst with its code warm.
 */
const WARMUP_ROUNDS = 3;

type Placement = "shared" | "worker";
/** BENCH_SLACK_PLACEMENTS=worker and BENCH_SLACK_PARTS=threads narrow a run while working on one figure. */
const PLACEMENTS = (process.env.BENCH_SLACK_PLACEMENTS?.split(",") ?? ["shared", "worker"]) as Placement[];
const PARTS = process.env.BENCH_SLACK_PARTS?.split(",") ?? ["ack", "threads"];
const PLACED: Record<Placement, string> = { shared: "shared loop", worker: "own thread" };

const benchmark: Benchmark = {
  name: "slack",
  title: "Slack adapter: event acknowledgement latency, 100 threads at once",
  async run() {
    const loadBefore = loadavg()[0] ?? 0;
    const directory = mkdtempSync(join(tmpdir(), "glassbox-bench-slack-"));
    const log = keptLogger();
    const a: Array<Awaited<ReturnType<typeof measureAcks>> & { placement: Placement }> = [];
    const t: Array<Awaited<ReturnType<typeof measureThreads>> & { placement: Placement }> = [];
    try {
      for (const placement of PLACEMENTS) {
        if (PARTS.includes("ack")) a.push({ placement, ...(await measureAcks(placement, directory, log.logger)) });
        if (PARTS.includes("threads"))
          t.push({ placement, ...(await measureThreads(placement, directory, log.logger)) });
      }
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
    const load = `load average ${loadBefore.toFixed(1)} at the start, ${(loadavg()[0] ?? 0).toFixed(1)} at the end, on ${cpus().length} cores`;
    const warnings = log.lines.map((line) => (JSON.parse(line) as { msg?: string }).msg ?? line);
    return {
      notes: [
        `${load}: a machine busy with other work makes the wall-clock figures (not the CPU ones) slower and noisier`,
        `harness = fake Slack + scripted model server + event sender; "${PLACED.shared}": on the bot's event loop (as a test would run it), "${PLACED.worker}": in a worker thread (like a remote Slack and model); the bot and bare Bolt always on the main thread`,
        `ack: ${ACK_WARMUP_EVENTS} warm-up + ${ACK_EVENTS} measured mentions per variant, each a new thread, in blocks of ${ACK_BLOCK} alternating with the bare Bolt App (ABAB); median, min, max over the events; p99 nearest rank`,
        `ack, one at a time: the next mention as soon as the ack is back, with earlier runs still going (model answers at once, one step; at most ${MAX_IN_FLIGHT} unanswered, else the sender waits, untimed); bursts: ${BURST} at once, the next once at most ${BURST} runs are unanswered`,
        `threads: ${THREADS} mentions at once, ${STEPS_PER_RUN} steps each (current_time, then the answer), ${MODEL_LATENCY_MS} ms model latency per request; ${WARMUP_ROUNDS} warm-up + ${MEASURED_ROUNDS} measured rounds per bot, the three bots taking turns going first, no forced GC between rounds; an answer has landed when the fake received the call completing it; times from the first send, ms clock`,
        `threads target: judged with the harness in its own thread (Slack and the model elsewhere, as in use); on the shared loop the harness's own work shares the bot's thread, so that figure is reported beside the bare loop's, not judged`,
        `bare loop: Bolt + WebClient + openai SDK making the same Slack calls and streamed model requests (same tools) per mention, and nothing else; main thread busy = event-loop utilization x wall time over a round (includes waiting for a core on a busy machine); main thread CPU = its user + system time (Linux)`,
        ...(warnings.length > 0
          ? [`the bot logged ${warnings.length} warning(s) or error(s), first: ${warnings.slice(0, 3).join(" | ")}`]
          : []),
      ],
      rows: [...a, ...t].flatMap((part) => part.rows),
      targets: [...a, ...t].flatMap((part) => (part.target ? [part.target] : [])),
      data: {
        ack: Object.fromEntries(a.map((part) => [part.placement, part.data])),
        threads: Object.fromEntries(t.map((part) => [part.placement, part.data])),
        botWarnings: warnings,
      },
    };
  },
};
export default benchmark;

// ---- the harness: fake Slack, scripted model server, event sender ---------------------------------

type ScriptName = "hello" | "threads";

interface AckBlock {
  /** HTTP mode: the Events API URL; Socket Mode: the fake's connection number. */
  url?: string;
  connection?: number;
  channel: string;
  events: number;
  /** Events sent at once. */
  burst: number;
  /** Sent to glassbox: each mention is a run to wait for (the bare app answers nothing). */
  runs: boolean;
  /** Before each send, wait until at most this many runs are unanswered. */
  unansweredAtMost: number;
}

interface ThreadTimings {
  wallMs: number;
  acksMs: number;
  firstStep1Ms: number;
  lastStep1Ms: number;
  firstStep2Ms: number;
  lastStep2Ms: number;
  firstLandedMs: number;
  medianLandedMs: number;
  webApiCalls: number;
  callsByMethod: Record<string, number>;
}

/** What the bot's side asks of the harness; the same in this thread and through a worker. */
interface HarnessApi {
  urls(): Promise<{ apiUrl: string; modelUrl: string }>;
  waitForSockets(count: number): Promise<void>;
  waitForSocketsClosed(): Promise<void>;
  /** Sends a block of mentions; the ack latency of each, and the unanswered runs at each send. */
  ackBlock(block: AckBlock): Promise<{ times: number[]; unanswered: number[] }>;
  /** Waits until every run of the mentions sent so far has answered; returns how many. */
  allAnswered(): Promise<{ runs: number; answers: number; modelRequests: number }>;
  /** Sends `count` mentions at once to `url`, each a new thread; resolves once their acks are back and the model has seen every step. */
  sendThreads(url: string, count: number): Promise<{ acksMs: number }>;
  /** After the bot is idle: checks the round and returns its timings. */
  checkThreads(): Promise<Omit<ThreadTimings, "acksMs">>;
  close(): Promise<void>;
}

class Harness implements HarnessApi {
  private cursor = 0;
  private answers = 0;
  private runsSent = 0;
  private counter = 0;
  private round?: { threads: Array<{ n: number; ts: string }>; since: number; startedAt: number };

  private constructor(
    private readonly fake: FakeSlack,
    private readonly model: ScriptedModelServer,
  ) {}

  static async start(script: ScriptName): Promise<Harness> {
    const fake = await startFakeSlack({ botToken: BOT_TOKEN, appToken: APP_TOKEN, signingSecret: SIGNING_SECRET });
    const model = await startScriptedModelServer(
      script === "hello"
        ? { script: () => ({ content: HELLO }) }
        : { script: threadScript, latencyMs: MODEL_LATENCY_MS },
    );
    return new Harness(fake, model);
  }

  async urls() {
    return { apiUrl: this.fake.apiUrl, modelUrl: this.model.url };
  }

  waitForSockets(count: number) {
    return this.fake.waitForSocket(count, 10_000);
  }

  waitForSocketsClosed() {
    return until(() => this.fake.socketConnections() === 0, "the socket connections to close", 10_000);
  }

  /** Answers so far: each run ends with chat.stopStream (or a posted or edited answer). */
  private answered(): number {
    const calls = this.fake.calls;
    for (; this.cursor < calls.length; this.cursor++) {
      const call = calls[this.cursor] as RecordedCall;
      if (
        call.method === "chat.stopStream" ||
        ((call.method === "chat.postMessage" || call.method === "chat.update") && call.args.text === HELLO)
      )
        this.answers++;
    }
    return this.answers;
  }

  async ackBlock(block: AckBlock) {
    collectGarbage();
    const times: number[] = [];
    const unanswered: number[] = [];
    for (let sent = 0; sent < block.events; sent += block.burst) {
      if (block.runs) {
        await until(() => this.runsSent - this.answered() <= block.unansweredAtMost, "earlier runs to be answered");
        unanswered.push(this.runsSent - this.answered());
        this.runsSent += block.burst;
      }
      times.push(...(await Promise.all(Array.from({ length: block.burst }, () => this.sendMention(block)))));
    }
    return { times, unanswered };
  }

  private async sendMention(block: AckBlock): Promise<number> {
    const event = {
      type: "app_mention",
      user: "U1",
      channel: block.channel,
      text: `<@${BOT_USER}> hello ${++this.counter}`,
    };
    const started = performance.now();
    if (block.url) {
      const sent = await this.fake.sendEvent(block.url, event);
      const ms = performance.now() - started;
      if (sent.status !== 200) throw new Error(`an event was answered with HTTP ${sent.status}: ${sent.body}`);
      return ms;
    }
    const sent = await this.fake.sendSocketEvent(event, { connection: block.connection ?? 0 });
    const ms = performance.now() - started;
    if (!sent.acked) throw new Error(`Socket Mode connection ${block.connection} did not ack an envelope`);
    return ms;
  }

  async allAnswered() {
    await until(() => this.answered() >= this.runsSent, "every mention to be answered");
    await sleep(50); // anything a run would still send arrives now
    return { runs: this.runsSent, answers: this.answered(), modelRequests: this.model.requests.length };
  }

  async sendThreads(url: string, count: number) {
    this.model.requests.length = 0;
    const since = this.fake.calls.length;
    const threads = Array.from({ length: count }, () => ({ n: ++this.counter, ts: this.fake.nextTs() }));
    const startedAt = Date.now(); // the fake and the model server stamp with Date.now()
    this.round = { threads, since, startedAt };
    const started = performance.now();
    const acks = await Promise.all(
      threads.map((thread) =>
        this.fake.sendEvent(url, {
          type: "app_mention",
          user: "U1",
          channel: CHANNEL,
          ts: thread.ts,
          text: `<@${BOT_USER}> what time is it? (thread ${thread.n})`,
        }),
      ),
    );
    const acksMs = performance.now() - started;
    const refused = acks.find((ack) => ack.status !== 200);
    if (refused) throw new Error(`an event was answered with HTTP ${refused.status}: ${refused.body}`);
    await until(() => this.model.requests.length >= count * STEPS_PER_RUN, `${count * STEPS_PER_RUN} model requests`);
    return { acksMs };
  }

  async checkThreads() {
    if (!this.round) throw new Error("checkThreads before sendThreads");
    await sleep(100); // a stray request or call would arrive now
    return checkRound(this.fake, this.model, this.round.threads, this.round.since, this.round.startedAt);
  }

  async close() {
    await this.fake.close();
    await this.model.close();
  }
}

/** The harness in this thread: its calls run on the bot's event loop. */
function sharedHarness(script: ScriptName): Promise<HarnessApi> {
  return Harness.start(script);
}

const HARNESS_ROLE = "glassbox-bench-slack-harness";
type HarnessRequest = { id: number; method: keyof HarnessApi; args: unknown[] };
type HarnessReply = { id: number; result?: unknown; error?: string };

/** The harness in a worker thread of this process, with its own event loop; calls go by message. */
async function workerHarness(script: ScriptName): Promise<HarnessApi> {
  // The worker loads this very file through tsx, as `npm run bench` loads it here.
  const api = import.meta.resolve("tsx/esm/api");
  const code = `import(${JSON.stringify(api)}).then(({ tsImport }) => tsImport(${JSON.stringify(import.meta.url)}, ${JSON.stringify(import.meta.url)}))`;
  const worker = new Worker(code, { eval: true, workerData: { role: HARNESS_ROLE, script } });
  const pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  let nextId = 0;
  let failure: Error | undefined;
  const failAll = (error: Error) => {
    failure ??= error;
    for (const waiter of pending.values()) waiter.reject(error);
    pending.clear();
  };
  worker.on("message", (reply: HarnessReply) => {
    const waiter = pending.get(reply.id);
    pending.delete(reply.id);
    if (reply.error !== undefined) waiter?.reject(new Error(`harness worker: ${reply.error}`));
    else waiter?.resolve(reply.result);
  });
  worker.on("error", (error) => failAll(error));
  worker.on("exit", (code) => failAll(new Error(`the harness worker exited (code ${code})`)));
  const call = <T>(method: HarnessRequest["method"], ...args: unknown[]): Promise<T> => {
    if (failure) return Promise.reject(failure);
    const id = nextId++;
    return new Promise<T>((resolve, reject) => {
      pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      worker.postMessage({ id, method, args } satisfies HarnessRequest);
    });
  };
  await call("urls"); // started
  return {
    urls: () => call("urls"),
    waitForSockets: (count) => call("waitForSockets", count),
    waitForSocketsClosed: () => call("waitForSocketsClosed"),
    ackBlock: (block) => call("ackBlock", block),
    allAnswered: () => call("allAnswered"),
    sendThreads: (url, count) => call("sendThreads", url, count),
    checkThreads: () => call("checkThreads"),
    async close() {
      try {
        await call("close");
      } finally {
        await worker.terminate();
      }
    },
  };
}

if (!isMainThread && (workerData as { role?: string } | null)?.role === HARNESS_ROLE) {
  const port = parentPort as NonNullable<typeof parentPort>;
  const started = Harness.start((workerData as { script: ScriptName }).script);
  port.on("message", (request: HarnessRequest) => {
    void (async (): Promise<HarnessReply> => {
      try {
        const harness = await started;
        const method = harness[request.method] as (...args: unknown[]) => Promise<unknown>;
        return { id: request.id, result: await method.apply(harness, request.args) };
      } catch (error) {
        return { id: request.id, error: error instanceof Error ? (error.stack ?? error.message) : String(error) };
      }
    })().then((reply) => port.postMessage(reply));
  });
}

const startHarness = (placement: Placement, script: ScriptName) =>
  placement === "shared" ? sharedHarness(script) : workerHarness(script);

// ---- the bot's side ----------------------------------------------------------------------------

/** A warn-level logger that keeps its lines: the bot should log nothing at warn or above here. */
function keptLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const logger = pino({ level: "warn" }, { write: (line: string) => void lines.push(line.trim()) });
  return { logger, lines };
}

let databases = 0;
/** The configuration `npm start` would read for this harness, over fresh files; `env` adds settings. */
function configFor(modelUrl: string, directory: string, env: Record<string, string> = {}): GlassboxConfig {
  databases++;
  return loadConfig({
    OPENAI_BASE_URL: modelUrl,
    LLM_MODEL: "gpt-4o-mini",
    GLASSBOX_DB: join(directory, `glassbox-${databases}.db`),
    GLASSBOX_SHOP_DB: join(directory, `shop-${databases}.db`),
    GLASSBOX_DEMO: "true",
    GLASSBOX_WEB_PORT: "0",
    ...env,
  });
}

interface Glassbox {
  /** The Events API request URL in HTTP mode. */
  eventsUrl?: string;
  /** Resolves once no turn waits or runs. */
  idle(): Promise<void>;
  agent: AgentConfig;
  stop(): Promise<void>;
}

/** The Slack bot as one process on SQLite runs it: the one pipeline (startRoles, role "all"). */
async function startGlassbox(apiUrl: string, config: GlassboxConfig, log: Logger, socket: boolean): Promise<Glassbox> {
  const slack: SlackConfig = {
    botToken: BOT_TOKEN,
    ...(socket ? { appToken: APP_TOKEN } : { signingSecret: SIGNING_SECRET }),
    port: 0,
    host: HOST,
    apiUrl,
    allowedChannels: [],
    approvers: [],
  };
  const agent = await createAgentConfig(config, log);
  const roles = await startRoles({ config: { ...config, slack }, role: "all", log, agent, store: agent.port });
  const queue = roles.deployment.queue as InProcessRunQueue;
  return {
    eventsUrl: roles.ingress?.slack?.eventsUrl,
    idle: () => queue.idle(),
    agent,
    stop: async () => (await roles.stop(), await agent.close()),
  };
}

/** Bolt's warnings and errors go to the kept log. */
function boltLogger(log: Logger, component: string): BoltLogger {
  const child = log.child({ component });
  return {
    debug: () => {},
    info: () => {},
    warn: (...messages) => child.warn(messages.map(String).join(" ")),
    error: (...messages) => child.error(messages.map(String).join(" ")),
    setLevel: () => {},
    getLevel: () => LogLevel.WARN,
    setName: () => {},
  };
}

/** The baseline: Bolt's App with the same receiver and client options, and a handler that does nothing. */
async function startBareBolt(apiUrl: string, log: Logger, socket: boolean): Promise<{ app: App; eventsUrl?: string }> {
  const app = new App({
    token: BOT_TOKEN,
    logger: boltLogger(log, "bare bolt"),
    logLevel: LogLevel.WARN,
    clientOptions: { slackApiUrl: apiUrl },
    ...(socket ? { appToken: APP_TOKEN, socketMode: true } : { signingSecret: SIGNING_SECRET }),
  });
  app.event("app_mention", async () => {});
  const server = (await (socket ? app.start() : app.start({ port: 0, host: HOST }))) as unknown;
  if (socket) return { app };
  const address = (server as Server).address() as AddressInfo;
  return { app, eventsUrl: `http://${HOST}:${address.port}/slack/events` };
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function until(condition: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!condition()) {
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(1);
  }
}

/** CPU time of the calling thread (Linux: /proc/thread-self/stat, 10 ms ticks); undefined elsewhere. */
function mainThreadCpuMs(): number | undefined {
  return cpuTicksMs("/proc/thread-self/stat");
}

function cpuTicksMs(statFile: string): number | undefined {
  try {
    const stat = readFileSync(statFile, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" "); // from field 3 (state) on
    return (Number(fields[11]) + Number(fields[12])) * 10; // utime + stime, at CLK_TCK 100
  } catch {
    return undefined;
  }
}

/** CPU time of the whole process, every thread (Linux: /proc/self/stat); undefined elsewhere. */
function processCpuMs(): number | undefined {
  return cpuTicksMs("/proc/self/stat");
}

/** Nearest-rank percentile. */
function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)] as number;
}

// ---- 1. acknowledgement latency ------------------------------------------------------------------

type Variant = "glassbox" | "bare";
type Mode = "sequential" | "burst";
type Transport = "http" | "socket";
const TRANSPORTS: Transport[] = ["http", "socket"];
const MODES: Mode[] = ["sequential", "burst"];
const VARIANTS: Variant[] = ["glassbox", "bare"];

interface AckFigures {
  median: number;
  p99: number;
  min: number;
  max: number;
  events: number;
}

async function measureAcks(placement: Placement, directory: string, log: Logger) {
  const harness = await startHarness(placement, "hello");
  const samples = new Map<string, number[]>();
  const unanswered: number[] = [];
  /** Main-thread CPU per mention of each block (glassbox: the ack and the whole run it starts). */
  const cpuPerMention = new Map<string, number[]>();
  const checks: Record<string, unknown> = {};
  try {
    const { apiUrl, modelUrl } = await harness.urls();
    const config = configFor(modelUrl, directory);
    for (const transport of TRANSPORTS) {
      const socket = transport === "socket";
      // The fake numbers socket connections as they open: glassbox is 0, the bare app 1.
      const glassbox = await startGlassbox(apiUrl, config, log, socket);
      if (socket) await harness.waitForSockets(1);
      const bare = await startBareBolt(apiUrl, log, socket);
      if (socket) await harness.waitForSockets(2);
      const block = (variant: Variant, mode: Mode, events: number) => {
        const target =
          variant === "glassbox"
            ? socket
              ? { connection: 0 }
              : { url: glassbox.eventsUrl as string }
            : socket
              ? { connection: 1 }
              : { url: bare.eventsUrl };
        const burst = mode === "burst" ? BURST : 1;
        return harness.ackBlock({
          ...target,
          channel: variant === "glassbox" ? CHANNEL : BARE_CHANNEL,
          events,
          burst,
          runs: variant === "glassbox",
          unansweredAtMost: mode === "burst" ? BURST : MAX_IN_FLIGHT - 1,
        });
      };
      // Every run answered and the bot idle before the next block, so no block pays for another's runs.
      const settle = async () => {
        await harness.allAnswered();
        await glassbox.idle();
      };
      try {
        for (const mode of MODES) {
          for (const variant of VARIANTS) {
            await block(variant, mode, ACK_WARMUP_EVENTS);
            await settle();
          }
        }
        for (let round = 0; round < ACK_EVENTS / ACK_BLOCK; round++) {
          const order: Variant[] = round % 2 === 0 ? ["glassbox", "bare"] : ["bare", "glassbox"];
          for (const mode of MODES) {
            for (const variant of order) {
              collectGarbage();
              const cpu = mainThreadCpuMs();
              const result = await block(variant, mode, ACK_BLOCK);
              await settle();
              if (cpu !== undefined)
                cpuPerMention.set(`${variant}/${transport}`, [
                  ...(cpuPerMention.get(`${variant}/${transport}`) ?? []),
                  ((mainThreadCpuMs() as number) - cpu) / ACK_BLOCK,
                ]);
              const key = `${variant}/${transport}/${mode}`;
              samples.set(key, [...(samples.get(key) ?? []), ...result.times]);
              unanswered.push(...result.unanswered);
            }
          }
        }
        const counts = await harness.allAnswered();
        checks[transport] = counts;
        if (counts.answers !== counts.runs || counts.modelRequests !== counts.runs) {
          throw new Error(
            `${transport}: ${counts.runs} mentions to glassbox, ${counts.answers} answers, ${counts.modelRequests} model requests`,
          );
        }
      } finally {
        await bare.app.stop();
        await glassbox.stop();
        if (socket) await harness.waitForSocketsClosed();
      }
    }
  } finally {
    await harness.close();
  }

  const figures: Record<string, AckFigures> = {};
  for (const [key, times] of samples) {
    const stats = statsOf(times);
    figures[key] = {
      median: stats.median,
      p99: percentile(times, 99),
      min: stats.min,
      max: stats.max,
      events: times.length,
    };
  }
  const get = (variant: Variant, transport: Transport, mode: Mode) =>
    figures[`${variant}/${transport}/${mode}`] as AckFigures;
  const stats = (variant: Variant, transport: Transport, mode: Mode): Stats =>
    statsOf(samples.get(`${variant}/${transport}/${mode}`) as number[]);

  const rows: Row[] = [];
  for (const transport of TRANSPORTS) {
    for (const mode of MODES) {
      const how = `${transport === "http" ? "HTTP" : "Socket Mode"}, ${mode === "sequential" ? "one at a time" : `bursts of ${BURST}`}`;
      rows.push({
        label: `ack ${how} [${PLACED[placement]}]: glassbox`,
        value: stats("glassbox", transport, mode),
        unit: "ms",
      });
      rows.push({ label: "  glassbox p99", value: get("glassbox", transport, mode).p99, unit: "ms" });
      rows.push({ label: "  bare Bolt", value: stats("bare", transport, mode), unit: "ms" });
      rows.push({ label: "  bare Bolt p99", value: get("bare", transport, mode).p99, unit: "ms" });
    }
  }
  for (const transport of TRANSPORTS) {
    for (const variant of VARIANTS) {
      const cpu = cpuPerMention.get(`${variant}/${transport}`);
      const what = variant === "glassbox" ? "glassbox (ack + its run)" : "bare Bolt (ack)";
      if (cpu)
        rows.push({
          label: `  main thread CPU a mention, ${transport === "http" ? "HTTP" : "Socket Mode"}: ${what}${placement === "shared" ? " + harness" : ""}`,
          value: statsOf(cpu),
          unit: "ms",
        });
    }
  }
  const waiting = statsOf(unanswered);
  rows.push({ label: `  glassbox runs unanswered at a send [${PLACED[placement]}]`, value: waiting, unit: "runs" });

  const main = get("glassbox", "http", "sequential");
  const target: Target = {
    label: `ack p99 <= ${TARGET_ACK_P99_MS} ms, HTTP one at a time [${PLACED[placement]}]`,
    pass: main.p99 <= TARGET_ACK_P99_MS,
    detail:
      `p99 ${sig3(main.p99)} ms, median ${sig3(main.median)} (bare Bolt p99 ${sig3(get("bare", "http", "sequential").p99)}); ` +
      `bursts of ${BURST} p99 ${sig3(get("glassbox", "http", "burst").p99)}; Socket Mode p99 ${sig3(get("glassbox", "socket", "sequential").p99)}, bursts ${sig3(get("glassbox", "socket", "burst").p99)}`,
  };
  const data = {
    events: ACK_EVENTS,
    warmupEvents: ACK_WARMUP_EVENTS,
    block: ACK_BLOCK,
    burst: BURST,
    maxInFlight: MAX_IN_FLIGHT,
    latencyMs: figures,
    unansweredRunsAtSend: { median: waiting.median, min: waiting.min, max: waiting.max },
    mainThreadCpuPerMentionMs: Object.fromEntries(
      [...cpuPerMention].map(([key, values]) => [key, statsOf(values).median]),
    ),
    checks,
  };
  return { rows, target, data };
}

// ---- 2. 100 threads at once ----------------------------------------------------------------------

const THREAD_MARK = /\(thread (\d+)\)/;
const ANSWER_TAIL = ": it is time for an answer.";
const answerFor = (n: number) => `Thread ${n}${ANSWER_TAIL}`;

/** Step 1 calls current_time; once the tool's result is in the request, step 2 answers. */
function threadScript(request: ChatCompletionRequestBody): ScriptedReply {
  const users = request.messages.filter((message) => message.role === "user");
  const n = THREAD_MARK.exec(
    users.map((message) => (typeof message.content === "string" ? message.content : "")).join("\n"),
  )?.[1];
  if (n === undefined) return { error: { status: 400, message: "benchmark: no thread number in the request" } };
  if (request.messages.some((message) => message.role === "tool")) return { content: answerFor(Number(n)) };
  return { toolCalls: [{ name: "current_time", arguments: JSON.stringify({ timezone: "UTC" }) }] };
}

/** glassbox with SQLite's default worker concurrency, with PostgreSQL's, and the baseline. */
const POSTGRES_WORKER_CONCURRENCY = 8;
type ThreadVariant = "glassbox" | "glassbox, other placement" | "bare loop";
const THREAD_VARIANTS: ThreadVariant[] = ["glassbox", "glassbox, other placement", "bare loop"];
type ThreadRound = ThreadTimings & { busyMs: number; cpuMs?: number; processCpuMs?: number };

interface Bot {
  eventsUrl: string;
  /** Resolves once every run the bot has started is over. */
  idle(): Promise<void>;
  stop(): Promise<void>;
}

const botOf = (glassbox: Glassbox): Bot => ({
  eventsUrl: glassbox.eventsUrl as string,
  idle: glassbox.idle,
  stop: glassbox.stop,
});

async function measureThreads(placement: Placement, directory: string, log: Logger) {
  const harness = await startHarness(placement, "threads");
  const rounds: Record<ThreadVariant, ThreadRound[]> = {
    glassbox: [],
    "glassbox, other placement": [],
    "bare loop": [],
  };
  const defaults = configFor("", directory);
  // The other placement: the worker concurrency PostgreSQL's workers default to.
  const otherWorkers = POSTGRES_WORKER_CONCURRENCY;
  const placed = (concurrency: number) => `${concurrency} turns at once`;
  const named = (variant: ThreadVariant) =>
    variant === "glassbox"
      ? `glassbox as npm start (${placed(defaults.workerConcurrency)})`
      : variant === "bare loop"
        ? variant
        : `glassbox, ${placed(otherWorkers)}`;
  try {
    const { apiUrl, modelUrl } = await harness.urls();
    const bots: Partial<Record<ThreadVariant, Bot>> = {};
    try {
      const glassbox = await startGlassbox(apiUrl, configFor(modelUrl, directory), log, false);
      const other = await startGlassbox(
        apiUrl,
        configFor(modelUrl, directory, { GLASSBOX_WORKER_CONCURRENCY: String(otherWorkers) }),
        log,
        false,
      );
      bots.glassbox = botOf(glassbox);
      bots["glassbox, other placement"] = botOf(other);
      const tools = (glassbox.agent ?? other.agent) as AgentConfig;
      bots["bare loop"] = await startBareLoop(apiUrl, modelUrl, tools.tools.specs(), log);
      // Warm-up rounds, then the variants take turns going first. No forced collection between
      // rounds: a full GC drops optimised code that holds dead objects (V8's trace-deopt shows about
      // a hundred such deopts a round), and recompiling it cost each round 150-200 ms of CPU that a
      // bot meeting a burst does not pay.
      for (let round = 0; round < WARMUP_ROUNDS + MEASURED_ROUNDS; round++) {
        const order = THREAD_VARIANTS.map(
          (_, index) => THREAD_VARIANTS[(index + round) % THREAD_VARIANTS.length] as ThreadVariant,
        );
        for (const variant of order) {
          const bot = bots[variant] as Bot;
          const busy = performance.eventLoopUtilization();
          const cpu = mainThreadCpuMs();
          const allCpu = processCpuMs();
          const { acksMs } = await harness.sendThreads(bot.eventsUrl, THREADS);
          await bot.idle();
          const busyMs = performance.eventLoopUtilization(busy).active;
          const cpuMs = cpu === undefined ? undefined : (mainThreadCpuMs() as number) - cpu;
          const processCpu = allCpu === undefined ? undefined : (processCpuMs() as number) - allCpu;
          const timings = await harness.checkThreads();
          if (round >= WARMUP_ROUNDS)
            rounds[variant].push({
              ...timings,
              acksMs,
              busyMs,
              ...(cpuMs === undefined ? {} : { cpuMs }),
              ...(processCpu === undefined ? {} : { processCpuMs: processCpu }),
            });
        }
      }
    } finally {
      for (const bot of Object.values(bots)) await bot.stop();
    }
  } finally {
    await harness.close();
  }

  const of = (variant: ThreadVariant, pick: (round: ThreadRound) => number): Stats =>
    statsOf(rounds[variant].map(pick));
  const withCpu = THREAD_VARIANTS.flatMap((variant) => rounds[variant]).every(
    (round) => round.cpuMs !== undefined && round.processCpuMs !== undefined,
  );
  const wall = of("glassbox", (round) => round.wallMs);
  const ratio = wall.median / IDEAL_MS;
  const calls = of("glassbox", (round) => round.webApiCalls);
  const where = PLACED[placement];
  const harnessToo = placement === "shared" ? " + harness" : "";
  const rows: Row[] = [
    ...THREAD_VARIANTS.flatMap((variant, index): Row[] => [
      {
        label: `${index === 0 ? `${THREADS} threads at once [${where}]: ` : "  "}${named(variant)}, all answered`,
        value: of(variant, (round) => round.wallMs),
        unit: "ms",
      },
      {
        label: `  ${named(variant)} / ideal ${IDEAL_MS} ms`,
        value: of(variant, (round) => round.wallMs).median / IDEAL_MS,
        unit: "x",
      },
    ]),
    ...THREAD_VARIANTS.flatMap((variant): Row[] => [
      {
        label: `  main thread busy, ${named(variant)}${harnessToo}`,
        value: of(variant, (round) => round.busyMs),
        unit: "ms",
      },
      ...(withCpu
        ? [
            {
              label: `  main thread CPU, ${named(variant)}${harnessToo}`,
              value: of(variant, (round) => round.cpuMs as number),
              unit: "ms",
            },
            {
              label: `  process CPU (every thread, harness too), ${named(variant)}`,
              value: of(variant, (round) => round.processCpuMs as number),
              unit: "ms",
            },
          ]
        : []),
    ]),
    { label: `  glassbox: all ${THREADS} acks back`, value: of("glassbox", (round) => round.acksMs), unit: "ms" },
    {
      label: "  glassbox: step-1 model requests in, last",
      value: of("glassbox", (round) => round.lastStep1Ms),
      unit: "ms",
    },
    {
      label: "  glassbox: step-2 model requests in, first",
      value: of("glassbox", (round) => round.firstStep2Ms),
      unit: "ms",
    },
    {
      label: "  glassbox: step-2 model requests in, last",
      value: of("glassbox", (round) => round.lastStep2Ms),
      unit: "ms",
    },
    { label: "  glassbox: answers landed, first", value: of("glassbox", (round) => round.firstLandedMs), unit: "ms" },
    {
      label: "  glassbox: answers landed, median thread",
      value: of("glassbox", (round) => round.medianLandedMs),
      unit: "ms",
    },
    { label: "  glassbox: Web API calls to the fake", value: calls, unit: "calls" },
  ];
  const byMethod = (rounds.glassbox[rounds.glassbox.length - 1] as ThreadTimings).callsByMethod;
  const medianOf = (variant: ThreadVariant, pick: (round: ThreadRound) => number) => sig3(of(variant, pick).median);
  // The target is the bot's: with Slack and the model elsewhere (the harness in its own thread).
  // On the shared loop the harness's own work sits on the bot's thread too, so that figure is shown
  // (with the bare loop's beside it), not judged.
  const target: Target | undefined =
    placement === "shared"
      ? undefined
      : {
          label: `${THREADS} threads at once <= ${TARGET_THREADS_RATIO} x ideal ${IDEAL_MS} ms [${where}]`,
          pass: ratio <= TARGET_THREADS_RATIO,
          detail:
            `${sig3(wall.median)} ms, ${sig3(ratio)} x as npm start runs it, on ${placed(defaults.workerConcurrency)} (limit ${sig3(TARGET_THREADS_RATIO * IDEAL_MS)} ms; ` +
            `on ${placed(otherWorkers)} ${medianOf("glassbox, other placement", (round) => round.wallMs)} ms; bare loop ${medianOf("bare loop", (round) => round.wallMs)} ms)` +
            (withCpu
              ? `; process CPU ${medianOf("glassbox", (round) => round.processCpuMs as number)} ms a round (${placed(otherWorkers)} ${medianOf("glassbox, other placement", (round) => round.processCpuMs as number)}, bare loop ${medianOf("bare loop", (round) => round.processCpuMs as number)})`
              : "") +
            `; every thread answered once, ${THREADS * STEPS_PER_RUN} agent requests a round; ` +
            `${sig3(calls.median)} Web API calls a round (${Object.entries(byMethod)
              .map(([method, count]) => `${method} ${count}`)
              .join(", ")})`,
        };
  const data = {
    threads: THREADS,
    modelLatencyMs: MODEL_LATENCY_MS,
    steps: STEPS_PER_RUN,
    idealMs: IDEAL_MS,
    measuredRounds: MEASURED_ROUNDS,
    workerConcurrency: defaults.workerConcurrency,
    otherWorkerConcurrency: otherWorkers,
    wallMs: wall,
    ratioToIdeal: ratio,
    rounds,
  };
  return { rows, target, data };
}

/**
 * The baseline bot: Bolt, the same WebClient and the openai SDK (over glassbox's transport) making
 * the same calls per mention as glassbox (the assistant status, two streamed model requests with the
 * same tools, the short answer in one message), and nothing else: no claims, store, memory, traces,
 * token counting, validation or events.
 */
async function startBareLoop(apiUrl: string, modelUrl: string, tools: ToolSpec[], log: Logger): Promise<Bot> {
  // glassbox's transport for both, so the comparison is of everything else.
  const app = new App({
    token: BOT_TOKEN,
    signingSecret: SIGNING_SECRET,
    logger: boltLogger(log, "bare loop"),
    logLevel: LogLevel.WARN,
    clientOptions: { slackApiUrl: apiUrl, fetch: undiciFetch },
  });
  const openai = new OpenAI({
    baseURL: modelUrl,
    apiKey: "not-needed",
    timeout: 60_000,
    maxRetries: 3,
    fetch: undiciFetch,
  });
  const running = new Set<Promise<void>>();

  async function answer(client: WebClient, channel: string, threadTs: string, text: string): Promise<void> {
    await client.assistant.threads.setStatus({ channel_id: channel, thread_ts: threadTs, status: "is thinking…" });
    const messages: ChatCompletionMessageParam[] = [
      { role: "system", content: DEFAULT_SYSTEM_PROMPT },
      { role: "user", content: text.replace(`<@${BOT_USER}>`, "").trim() },
    ];
    for (let step = 0; step < 8; step++) {
      const stream = await openai.chat.completions.create({
        model: "gpt-4o-mini",
        messages,
        tools: tools as ChatCompletionTool[],
        stream: true,
        stream_options: { include_usage: true },
      });
      let content = "";
      const calls: Array<{ id: string; name: string; arguments: string }> = [];
      for await (const chunk of stream) {
        const delta = chunk.choices[0]?.delta;
        if (delta?.content) content += delta.content;
        for (const part of delta?.tool_calls ?? []) {
          const call = (calls[part.index] ??= { id: "", name: "", arguments: "" });
          if (part.id) call.id = part.id;
          call.name += part.function?.name ?? "";
          call.arguments += part.function?.arguments ?? "";
        }
      }
      if (calls.length === 0) {
        // A short answer, as glassbox posts it: one message (a longer one would be streamed).
        await client.chat.postMessage({ channel, thread_ts: threadTs, text: content });
        return;
      }
      messages.push({
        role: "assistant",
        content: content || null,
        tool_calls: calls.map((call) => ({
          id: call.id,
          type: "function" as const,
          function: { name: call.name, arguments: call.arguments },
        })),
      });
      // The status would name a call only if the run were still going a second after "is thinking…".
      for (const call of calls) {
        const args = JSON.parse(call.arguments) as { timezone?: string };
        const data = describeTime(new Date(), args.timezone ?? "UTC");
        messages.push({ role: "tool", tool_call_id: call.id, content: JSON.stringify({ status: "success", data }) });
      }
    }
  }

  app.event("app_mention", async ({ event, client }) => {
    const run = answer(client, event.channel, event.ts, event.text).catch((error: unknown) =>
      log.error({ error: (error as Error).message }, "bare loop: a run failed"),
    );
    running.add(run);
    void run.finally(() => running.delete(run));
  });
  const server = (await app.start({ port: 0, host: HOST })) as Server;
  const address = server.address() as AddressInfo;
  return {
    eventsUrl: `http://${HOST}:${address.port}/slack/events`,
    async idle() {
      while (running.size > 0) await Promise.all(running);
    },
    async stop() {
      await app.stop();
    },
  };
}

/**
 * Every thread shows exactly one answer, its own, and the model saw exactly one step-1 and one
 * step-2 agent request per thread. Returns the round's timings from when the first mention was sent.
 */
function checkRound(
  fake: FakeSlack,
  model: ScriptedModelServer,
  threads: Array<{ n: number; ts: string }>,
  since: number,
  startedAt: number,
): Omit<ThreadTimings, "acksMs"> {
  const requests = model.requests;
  if (requests.length !== threads.length * STEPS_PER_RUN)
    throw new Error(`the model saw ${requests.length} requests, not ${threads.length * STEPS_PER_RUN}`);
  const step1: number[] = [];
  const step2: number[] = [];
  const perThread = new Map<number, number>();
  for (const request of requests) {
    const body = request.body;
    if (!Array.isArray(body.tools) || body.tools.length === 0 || body.messages[0]?.role !== "system")
      throw new Error("a model request was not an agent step");
    const n = Number(THREAD_MARK.exec(JSON.stringify(body.messages.filter((message) => message.role === "user")))?.[1]);
    perThread.set(n, (perThread.get(n) ?? 0) + 1);
    const results = body.messages.filter((message) => message.role === "tool");
    if (results.length === 0) {
      step1.push(request.at - startedAt);
      continue;
    }
    const envelope = JSON.parse(String(results[0]?.content)) as { status?: string };
    if (results.length !== 1 || envelope.status !== "success")
      throw new Error(`thread ${n}: step 2 carried ${results.length} tool results, the first ${envelope.status}`);
    step2.push(request.at - startedAt);
  }
  for (const thread of threads) {
    if (perThread.get(thread.n) !== STEPS_PER_RUN)
      throw new Error(`thread ${thread.n}: the model saw ${perThread.get(thread.n) ?? 0} requests for it`);
  }

  const calls = fake.calls.slice(since);
  const landed: number[] = [];
  for (const thread of threads) {
    const mine = fake.messages(CHANNEL, thread.ts).filter((message) => message.user === BOT_USER);
    const answers = mine.filter((message) => message.text?.includes(ANSWER_TAIL));
    if (answers.length !== 1 || answers[0]?.text !== answerFor(thread.n)) {
      throw new Error(
        `thread ${thread.n}: ${answers.length} answers; the bot's messages there: ${JSON.stringify(mine.map((message) => message.text))}`,
      );
    }
    const answerTs = (answers[0] as { ts: string }).ts;
    // The answer landed with the last call that wrote to its message.
    const at = calls.findLast((call) => writesTo(call, answerTs, thread.ts, answerFor(thread.n)))?.at;
    if (at === undefined) throw new Error(`thread ${thread.n}: no call wrote its answer`);
    landed.push(at - startedAt);
  }

  const callsByMethod: Record<string, number> = {};
  for (const call of calls) callsByMethod[call.method] = (callsByMethod[call.method] ?? 0) + 1;
  return {
    wallMs: Math.max(...landed),
    firstStep1Ms: Math.min(...step1),
    lastStep1Ms: Math.max(...step1),
    firstStep2Ms: Math.min(...step2),
    lastStep2Ms: Math.max(...step2),
    firstLandedMs: Math.min(...landed),
    medianLandedMs: statsOf(landed).median,
    webApiCalls: calls.length,
    callsByMethod,
  };
}

function writesTo(call: RecordedCall, answerTs: string, threadTs: string, answer: string): boolean {
  if (call.method === "chat.appendStream" || call.method === "chat.stopStream" || call.method === "chat.update")
    return call.args.ts === answerTs;
  if (call.method === "chat.postMessage" || call.method === "chat.startStream")
    return call.args.thread_ts === threadTs && JSON.stringify(call.args).includes(answer);
  return false;
}
