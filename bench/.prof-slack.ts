/**
 * The Slack adapter as `npm start` runs it (startSlackAdapter: the real Bolt App, the agent from
 * createAgentConfig with SQLite memory, streaming on) against the fake Slack and the scripted model
 * server, all in this process, over 127.0.0.1.
 *
 * 1. Event-to-acknowledgement latency: distinct signed app_mentions (each a new thread), timed from
 *    sending until Slack's side has the ack (HTTP 200, or the Socket Mode envelope ack). Sent one at
 *    a time while the bot answers the earlier ones in the background (instant one-step answers, at
 *    most MAX_IN_FLIGHT runs unanswered: the sender waits, untimed, when there are more), and in
 *    bursts of BURST concurrent mentions. The baseline, in the same run and alternating blocks
 *    (ABAB), is a bare Bolt App with the same receiver and a handler that does nothing.
 * 2. 100 threads at once: 100 mentions sent together, each run two steps (a current_time call, then
 *    the answer) with 200 ms of model latency per request; wall time until every thread shows its
 *    answer, against the ideal 400 ms.
 */
import { mkdtempSync, rmSync } from "node:fs";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { App, LogLevel, type Logger as BoltLogger } from "@slack/bolt";
import { pino } from "pino";
import { startSlackAdapter, type SlackAdapter } from "../src/adapters/slack/slack-adapter.js";
import type { Store } from "../src/agent/store.js";
import type { AgentConfig } from "../src/agent/run.js";
import { loadConfig, type SlackConfig } from "../src/config.js";
import type { Logger } from "../src/logger.js";
import { createAgentConfig } from "../src/setup.js";
import { startFakeSlack, type FakeSlack, type RecordedCall } from "../src/testing/fake-slack.js";
import { startScriptedModelServer, type ChatCompletionRequestBody, type ScriptedModelServer, type ScriptedReply } from "../src/testing/scripted-model-server.js";
import { collectGarbage, sig3, statsOf, type Benchmark, type Row, type Stats, type Target } from "./measure.js";

const BOT_TOKEN = "xoxb-fake-bot-token";
const APP_TOKEN = "xapp-1-fake-app-token";
const SIGNING_SECRET = "fake-signing-secret";
const BOT_USER = "U0FAKEBOT1";
const HOST = "127.0.0.1";
const CHANNEL = "C1";

// ---- 1. acknowledgement latency
const ACK_EVENTS = 500;
const ACK_WARMUP_EVENTS = 100;
/** Events per block; blocks of glassbox and the bare app alternate, taking turns going first. */
const ACK_BLOCK = 100;
const BURST = 10;
/** Runs sent but not yet answered before the sequential sender waits (untimed) for one to finish. */
const MAX_IN_FLIGHT = 10;
const TARGET_ACK_P99_MS = 50;

// ---- 2. 100 threads at once
const THREADS = 100;
const MODEL_LATENCY_MS = 200;
const STEPS_PER_RUN = 2;
const IDEAL_MS = STEPS_PER_RUN * MODEL_LATENCY_MS;
/** Median of 5 by default; BENCH_ROUNDS=15 steadies the figures on a busy machine. */
const MEASURED_ROUNDS = Number(process.env.BENCH_ROUNDS) || 5;
const TARGET_THREADS_RATIO = 1.5;

const benchmark: Benchmark = {
  name: "slack",
  title: "Slack adapter: event acknowledgement latency, 100 threads at once",
  async run() {
    const directory = mkdtempSync(join(tmpdir(), "glassbox-bench-slack-"));
    const log = countingLogger();
    try {
      const ack = await measureAcks(directory, log.logger);
      const threads = await measureThreads(directory, log.logger);
      if (log.lines.length > 0) console.error(log.lines.join("\n")); if (false) throw new Error(`the bot logged ${log.lines.length} warning(s), first: ${log.lines[0]}`);
      return {
        notes: [
          `ack: ${ACK_WARMUP_EVENTS} warm-up + ${ACK_EVENTS} measured mentions per variant, each a new thread; blocks of ${ACK_BLOCK} alternating with the bare Bolt App (ABAB); median, min and max over the events, p99 nearest rank`,
          `ack, sequential: one mention at a time while earlier runs finish in the background (model answers at once, one step; at most ${MAX_IN_FLIGHT} runs unanswered); bursts: ${BURST} mentions at once, the next burst once at most ${BURST} runs are unanswered`,
          `threads: ${THREADS} mentions sent at once, ${STEPS_PER_RUN} steps each (current_time, then the answer), ${MODEL_LATENCY_MS} ms model latency per request; 1 warm-up + ${MEASURED_ROUNDS} measured rounds; "landed" = the fake Slack received the call that completed the answer (chat.stopStream), ms clock`,
          `everything (fake Slack, model server, bot) shares this process and its event loop; the Web API calls are answered by the fake in the same process`,
        ],
        rows: [...ack.rows, ...threads.rows],
        targets: [...ack.targets, ...threads.targets],
        data: { ack: ack.data, threads: threads.data },
      };
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  },
};
export default benchmark;

// ---- shared set-up -----------------------------------------------------------------------------

/** A warn-level logger that keeps its lines: the bot should log nothing at warn or above here. */
export function countingLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const logger = pino({ level: "warn" }, { write: (line: string) => void lines.push(line.trim()) });
  return { logger, lines };
}

let databases = 0;
async function agentFor(model: ScriptedModelServer, directory: string, log: Logger) {
  databases++;
  const config = loadConfig({
    OPENAI_BASE_URL: model.url,
    LLM_MODEL: "gpt-4o-mini",
    GLASSBOX_DB: join(directory, `glassbox-${databases}.db`),
    GLASSBOX_SHOP_DB: join(directory, `shop-${databases}.db`),
  });
  return createAgentConfig(config, log);
}

function slackConfig(fake: FakeSlack, socket: boolean): SlackConfig {
  return {
    botToken: BOT_TOKEN,
    ...(socket ? { appToken: APP_TOKEN } : { signingSecret: SIGNING_SECRET }),
    port: 0,
    host: HOST,
    apiUrl: fake.apiUrl,
    allowedChannels: [],
    approvers: [],
  };
}

function startGlassbox(fake: FakeSlack, agent: AgentConfig & { store: Store }, log: Logger, socket: boolean): Promise<SlackAdapter> {
  return startSlackAdapter({ slack: slackConfig(fake, socket), agent, store: agent.store, log, approvalTtlSeconds: 3600 });
}

const quietBolt: BoltLogger = {
  debug: () => {},
  info: () => {},
  warn: (...messages) => console.warn("bare bolt:", ...messages),
  error: (...messages) => console.error("bare bolt:", ...messages),
  setLevel: () => {},
  getLevel: () => LogLevel.WARN,
  setName: () => {},
};

/** The baseline: Bolt's App with the same receiver and client options, and a handler that does nothing. */
async function startBareBolt(fake: FakeSlack, socket: boolean): Promise<{ app: App; eventsUrl?: string }> {
  const app = new App({
    token: BOT_TOKEN,
    logger: quietBolt,
    logLevel: LogLevel.WARN,
    clientOptions: { slackApiUrl: fake.apiUrl },
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

/** Nearest-rank percentile. */
function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)] as number;
}

/** Counts the fake's calls of one method as they come, without rescanning. */
function callCounter(fake: FakeSlack, method: string) {
  let cursor = fake.calls.length;
  let count = 0;
  return () => {
    for (; cursor < fake.calls.length; cursor++) if (fake.calls[cursor]?.method === method) count++;
    return count;
  };
}

// ---- 1. acknowledgement latency ------------------------------------------------------------------

type AckVariant = "glassbox" | "bare";
type AckMode = "sequential" | "burst";
type Transport = "http" | "socket";

interface AckSummary { median: number; p99: number; min: number; max: number; events: number }

function summarize(samples: number[]): AckSummary {
  const stats = statsOf(samples);
  return { median: stats.median, p99: percentile(samples, 99), min: stats.min, max: stats.max, events: samples.length };
}

export async function measureAcks(directory: string, log: Logger) {
  const fake = await startFakeSlack({ botToken: BOT_TOKEN, appToken: APP_TOKEN, signingSecret: SIGNING_SECRET });
  const model = await startScriptedModelServer({ script: () => ({ content: "Hello." }) });
  const agent = await agentFor(model, directory, log);
  const samples = new Map<string, number[]>();
  const checks: Record<string, unknown> = {};
  const inFlightAtSend: number[] = [];
  try {
    for (const transport of ["http", "socket"] as const) {
      // Socket connections are numbered in the fake by when they open: glassbox first, then the bare app.
      const glassbox = await startGlassbox(fake, agent, log, transport === "socket");
      if (transport === "socket") await fake.waitForSocket(1);
      const bare = await startBareBolt(fake, transport === "socket");
      if (transport === "socket") await fake.waitForSocket(2);
      const answered = callCounter(fake, "chat.stopStream");
      const requestsBefore = model.requests.length;
      let sentToGlassbox = 0;
      let counter = 0;

      const sendOne = async (variant: AckVariant): Promise<number> => {
        const n = ++counter;
        const event = { type: "app_mention", user: "U1", channel: variant === "glassbox" ? CHANNEL : "C2", text: `<@${BOT_USER}> hello ${transport} ${n}` };
        if (variant === "glassbox") sentToGlassbox++;
        const started = performance.now();
        if (transport === "http") {
          const sent = await fake.sendEvent((variant === "glassbox" ? glassbox.eventsUrl : bare.eventsUrl) as string, event);
          const ms = performance.now() - started;
          if (sent.status !== 200) throw new Error(`${variant} answered an event with HTTP ${sent.status}: ${sent.body}`);
          return ms;
        }
        const sent = await fake.sendSocketEvent(event, { connection: variant === "glassbox" ? 0 : 1 });
        const ms = performance.now() - started;
        if (!sent.acked) throw new Error(`${variant} did not ack a Socket Mode envelope`);
        return ms;
      };

      const block = async (variant: AckVariant, mode: AckMode, events: number): Promise<number[]> => {
        const times: number[] = [];
        const size = mode === "burst" ? BURST : 1;
        const limit = mode === "burst" ? BURST : MAX_IN_FLIGHT - 1;
        for (let sent = 0; sent < events; sent += size) {
          if (variant === "glassbox") {
            await until(() => sentToGlassbox - answered() <= limit, "earlier runs to be answered");
            inFlightAtSend.push(sentToGlassbox - answered());
          }
          times.push(...(await Promise.all(Array.from({ length: size }, () => sendOne(variant)))));
        }
        return times;
      };

      const settle = async () => {
        await until(() => answered() === sentToGlassbox, "every mention to be answered");
        await glassbox.conversations.idle();
      };

      for (const mode of ["sequential", "burst"] as const) {
        for (const variant of ["glassbox", "bare"] as const) {
          await block(variant, mode, ACK_WARMUP_EVENTS);
          await settle();
        }
      }
      for (let round = 0; round < ACK_EVENTS / ACK_BLOCK; round++) {
        const order = round % 2 === 0 ? (["glassbox", "bare"] as const) : (["bare", "glassbox"] as const);
        for (const mode of ["sequential", "burst"] as const) {
          for (const variant of order) {
            collectGarbage();
            const times = await block(variant, mode, ACK_BLOCK);
            await settle();
            const key = `${variant}/${transport}/${mode}`;
            samples.set(key, [...(samples.get(key) ?? []), ...times]);
          }
        }
      }

      await settle();
      await sleep(50); // anything a run would still send arrives now
      const requests = model.requests.length - requestsBefore;
      checks[transport] = { mentionsToGlassbox: sentToGlassbox, answers: answered(), modelRequests: requests };
      if (requests !== sentToGlassbox || answered() !== sentToGlassbox) {
        throw new Error(`${transport}: ${sentToGlassbox} mentions to glassbox, ${answered()} answers streamed, ${requests} model requests`);
      }
      model.requests.length = 0;
      await bare.app.stop();
      await glassbox.stop();
    }
  } finally {
    await fake.close();
    await model.close();
    agent.store.close();
  }

  const summaries: Record<string, AckSummary> = {};
  for (const [key, times] of samples) summaries[key] = summarize(times);
  const get = (key: string) => summaries[key] as AckSummary;
  const stats = (key: string): Stats => statsOf(samples.get(key) as number[]);
  const label = (variant: AckVariant, transport: Transport, mode: AckMode) =>
    `ack ${transport === "http" ? "HTTP" : "Socket Mode"}, ${mode === "sequential" ? "one at a time" : `bursts of ${BURST}`}: ${variant === "glassbox" ? "glassbox" : "bare Bolt"}`;

  const rows: Row[] = [];
  for (const transport of ["http", "socket"] as const) {
    for (const mode of ["sequential", "burst"] as const) {
      for (const variant of ["glassbox", "bare"] as const) {
        const key = `${variant}/${transport}/${mode}`;
        rows.push({ label: label(variant, transport, mode), value: stats(key), unit: "ms" });
        rows.push({ label: "  p99", value: get(key).p99, unit: "ms" });
      }
      rows.push({
        label: "  glassbox - bare Bolt (median)",
        value: get(`glassbox/${transport}/${mode}`).median - get(`bare/${transport}/${mode}`).median,
        unit: "ms",
      });
    }
  }
  const inFlight = statsOf(inFlightAtSend);
  rows.push({ label: "glassbox runs unanswered when a mention was sent", value: inFlight, unit: "runs" });

  const httpSequential = get("glassbox/http/sequential");
  const targets: Target[] = [
    {
      label: `ack p99 <= ${TARGET_ACK_P99_MS} ms (HTTP, one at a time, ${ACK_EVENTS} mentions)`,
      pass: httpSequential.p99 <= TARGET_ACK_P99_MS,
      detail: `p99 ${sig3(httpSequential.p99)} ms, median ${sig3(httpSequential.median)} ms (bare Bolt: p99 ${sig3(get("bare/http/sequential").p99)}, median ${sig3(get("bare/http/sequential").median)}); bursts of ${BURST}: p99 ${sig3(get("glassbox/http/burst").p99)} ms; Socket Mode: p99 ${sig3(get("glassbox/socket/sequential").p99)} ms`,
    },
  ];
  const data = {
    events: ACK_EVENTS,
    warmupEvents: ACK_WARMUP_EVENTS,
    burst: BURST,
    maxInFlight: MAX_IN_FLIGHT,
    latencyMs: summaries,
    unansweredRunsAtSend: { median: inFlight.median, min: inFlight.min, max: inFlight.max },
    checks,
  };
  return { rows, targets, data };
}

// ---- 2. 100 threads at once ----------------------------------------------------------------------

const THREAD_MARK = /\(thread (\d+)\)/;
const answerFor = (n: number) => `Thread ${n}: it is time for an answer.`;

/** Step 1 calls current_time; once the tool's result is in the request, step 2 answers. */
function threadScript(request: ChatCompletionRequestBody): ScriptedReply {
  const users = request.messages.filter((message) => message.role === "user");
  const text = users.map((message) => (typeof message.content === "string" ? message.content : "")).join("\n");
  const n = THREAD_MARK.exec(text)?.[1];
  if (n === undefined) return { error: { status: 400, message: "benchmark: no thread number in the request" } };
  if (request.messages.some((message) => message.role === "tool")) return { content: answerFor(Number(n)) };
  return { toolCalls: [{ name: "current_time", arguments: JSON.stringify({ timezone: "UTC" }) }] };
}

interface RoundResult {
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

export async function measureThreads(directory: string, log: Logger) {
  const fake = await startFakeSlack({ botToken: BOT_TOKEN, signingSecret: SIGNING_SECRET });
  const model = await startScriptedModelServer({ latencyMs: MODEL_LATENCY_MS, script: threadScript });
  const agent = await agentFor(model, directory, log);
  const slack = await startGlassbox(fake, agent, log, false);
  const url = slack.eventsUrl as string;
  const rounds: RoundResult[] = [];
  let next = 0;
  try {
    for (let round = 0; round < 1 + MEASURED_ROUNDS; round++) {
      model.requests.length = 0;
      const since = fake.calls.length;
      const threads = Array.from({ length: THREADS }, () => ({ n: ++next, ts: fake.nextTs() }));
      collectGarbage();
      if (round > 0) await (globalThis as any).__profStart();

      const startedAt = Date.now(); // the fake and the model server stamp with Date.now()
      const started = performance.now();
      const acks = await Promise.all(
        threads.map((thread) =>
          fake.sendEvent(url, { type: "app_mention", user: "U1", channel: CHANNEL, ts: thread.ts, text: `<@${BOT_USER}> what time is it? (thread ${thread.n})` }),
        ),
      );
      const acksMs = performance.now() - started;
      if (acks.some((ack) => ack.status !== 200)) throw new Error(`an event was answered with HTTP ${acks.find((ack) => ack.status !== 200)?.status}`);
      await until(() => model.requests.length >= THREADS * STEPS_PER_RUN, `${THREADS * STEPS_PER_RUN} model requests`);
      await slack.conversations.idle();
      if (round > 0) await (globalThis as any).__profStop(round);
      await sleep(100); // a stray request or call would arrive now
      const result = checkRound(fake, model, threads, since, startedAt);
      if (round > 0) rounds.push({ ...result, acksMs });
    }
  } finally {
    await slack.stop();
    await fake.close();
    await model.close();
    agent.store.close();
  }

  const of = (pick: (round: RoundResult) => number) => statsOf(rounds.map(pick));
  const wall = of((round) => round.wallMs);
  const ratio = wall.median / IDEAL_MS;
  const calls = of((round) => round.webApiCalls);
  const rows: Row[] = [
    { label: `${THREADS} threads: all answers landed`, value: wall, unit: "ms" },
    { label: `  / ideal ${IDEAL_MS} ms (${STEPS_PER_RUN} x ${MODEL_LATENCY_MS} ms model latency)`, value: ratio, unit: "x" },
    { label: `  all ${THREADS} acks back`, value: of((round) => round.acksMs), unit: "ms" },
    { label: "  step-1 model requests arrive (first)", value: of((round) => round.firstStep1Ms), unit: "ms" },
    { label: "  step-1 model requests arrive (last)", value: of((round) => round.lastStep1Ms), unit: "ms" },
    { label: "  step-2 model requests arrive (first)", value: of((round) => round.firstStep2Ms), unit: "ms" },
    { label: "  step-2 model requests arrive (last)", value: of((round) => round.lastStep2Ms), unit: "ms" },
    { label: "  answers landed (first)", value: of((round) => round.firstLandedMs), unit: "ms" },
    { label: "  answers landed (median thread)", value: of((round) => round.medianLandedMs), unit: "ms" },
    { label: `  Web API calls to the fake, all ${THREADS} threads`, value: calls, unit: "calls" },
  ];
  const last = rounds[rounds.length - 1] as RoundResult;
  const targets: Target[] = [
    {
      label: `${THREADS} threads at once <= ${TARGET_THREADS_RATIO} x ideal ${IDEAL_MS} ms`,
      pass: ratio <= TARGET_THREADS_RATIO,
      detail: `${sig3(wall.median)} ms (${sig3(ratio)} x; limit ${sig3(TARGET_THREADS_RATIO * IDEAL_MS)} ms); every thread answered once, ${THREADS * STEPS_PER_RUN} agent requests; ${sig3(calls.median)} Web API calls (${Object.entries(last.callsByMethod).map(([method, count]) => `${method} ${count}`).join(", ")})`,
    },
  ];
  const data = {
    threads: THREADS,
    modelLatencyMs: MODEL_LATENCY_MS,
    steps: STEPS_PER_RUN,
    idealMs: IDEAL_MS,
    measuredRounds: MEASURED_ROUNDS,
    wallMs: wall,
    ratioToIdeal: ratio,
    rounds,
  };
  return { rows, targets, data };
}

/**
 * Every thread shows exactly one answer, its own; the model saw one step-1 and one step-2 request
 * per thread and nothing else. Returns the round's timings, relative to when the first mention was sent.
 */
function checkRound(fake: FakeSlack, model: ScriptedModelServer, threads: Array<{ n: number; ts: string }>, since: number, startedAt: number): Omit<RoundResult, "acksMs"> {
  // The model: 2 agent requests per thread (tools offered, the system prompt first), nothing else.
  const requests = model.requests;
  if (requests.length !== THREADS * STEPS_PER_RUN) throw new Error(`the model saw ${requests.length} requests, not ${THREADS * STEPS_PER_RUN}`);
  const step1: number[] = [];
  const step2: number[] = [];
  const perThread = new Map<number, number>();
  for (const request of requests) {
    const body = request.body;
    if (!Array.isArray(body.tools) || body.tools.length === 0 || body.messages[0]?.role !== "system") throw new Error("a model request was not an agent step");
    const n = Number(THREAD_MARK.exec(JSON.stringify(body.messages.filter((message) => message.role === "user")))?.[1]);
    perThread.set(n, (perThread.get(n) ?? 0) + 1);
    const tools = body.messages.filter((message) => message.role === "tool");
    if (tools.length === 0) step1.push(request.at - startedAt);
    else {
      const envelope = JSON.parse(String(tools[0]?.content)) as { status?: string };
      if (tools.length !== 1 || envelope.status !== "success") throw new Error(`thread ${n}: step 2 carried ${tools.length} tool results, status ${envelope.status}`);
      step2.push(request.at - startedAt);
    }
  }
  for (const thread of threads) {
    if (perThread.get(thread.n) !== STEPS_PER_RUN) throw new Error(`thread ${thread.n}: the model saw ${perThread.get(thread.n) ?? 0} requests`);
  }

  // Slack: each thread has exactly one message with its answer, and no other answer.
  const calls = fake.calls.slice(since);
  const landed: number[] = [];
  for (const thread of threads) {
    const messages = fake.messages(CHANNEL, thread.ts).filter((message) => message.user === BOT_USER);
    const answers = messages.filter((message) => message.text?.includes(": it is time for an answer."));
    const expected = answerFor(thread.n);
    if (answers.length !== 1 || answers[0]?.text !== expected) {
      throw new Error(`thread ${thread.n}: ${answers.length} answers (${JSON.stringify(messages.map((message) => message.text))})`);
    }
    const answerTs = (answers[0] as { ts: string }).ts;
    // The call that completed the answer: the last one that wrote to its message.
    const writes = calls.filter((call) => writesTo(call, answerTs, thread.ts, expected));
    const at = writes[writes.length - 1]?.at;
    if (at === undefined) throw new Error(`thread ${thread.n}: no call wrote its answer`);
    landed.push(at - startedAt);
  }
  const failed = calls.filter((call) => call.method !== "assistant.threads.setStatus" && call.method.startsWith("chat.") === false);
  if (failed.length > 0) throw new Error(`unexpected Web API calls: ${failed.map((call) => call.method).join(", ")}`);

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

function writesTo(call: RecordedCall, answerTs: string, threadTs: string, expected: string): boolean {
  if (call.method === "chat.appendStream" || call.method === "chat.stopStream" || call.method === "chat.update") return call.args.ts === answerTs;
  if (call.method === "chat.postMessage" || call.method === "chat.startStream") return call.args.thread_ts === threadTs && JSON.stringify(call.args).includes(expected);
  return false;
}
