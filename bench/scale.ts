/**
 * Running at scale, side by side in one run: the same Slack load on glassbox as `npm start` runs it
 * (SQLite, one process) and split over processes on PostgreSQL (GLASSBOX_ROLE: one ingress process
 * and 1 or 2 worker processes). Every bot is the real src/main.ts in processes of its own, against
 * the fake Slack (Events API in, Web API out) and the scripted model server in this process.
 *
 * 1. 500 threads at once: 500 mentions, each a new thread, sent as fast as the bot acknowledges
 *    them (at most SEND_IN_FLIGHT unacknowledged); each run is 2 model calls (calculator, then the
 *    answer) of 200 ms each. Wall time from the first send until every thread's answer has reached
 *    Slack, against the ideal 400 ms (every run at once, nothing but the model's time). One warm-up
 *    round of WARMUP_THREADS first, untimed, then ROUNDS timed rounds (the median is reported).
 * 2. "stop": a run whose model call never answers, then "stop" in its thread; timed from sending
 *    "stop" until "Stopped." reaches the thread (across processes: ingress records the cancel, the
 *    worker hears its NOTIFY and ends the run). Median of STOPS.
 *
 * Needs PostgreSQL for the split setups: GLASSBOX_BENCH_DATABASE_URL, or GLASSBOX_TEST_DATABASE_URL
 * as CI sets it; without one they say "not measured". BENCH_SCALE_THREADS changes the 500.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { startFakeSlack, type FakeSlack } from "../src/testing/fake-slack.js";
import { startScriptedModelServer, type ScriptedModelServer } from "../src/testing/scripted-model-server.js";
import { createTestDatabase, type TestDatabase } from "../test/e2e/fixtures/queue-database.js";
import { fakeSlackEnvironment, startRoleProcess, type RoleProcess } from "../test/e2e/fixtures/role-processes.js";
import {
  allAnswered,
  BOT,
  createAnswerWatch,
  mention as mentionIn,
  TEAM,
  twoCallReply,
  type AnswerWatch,
} from "./fixtures/slack-load.js";
import { statsOf, type Benchmark, type BenchmarkReport, type Row, type Stats, type Target } from "./measure.js";

const THREADS = Number(process.env.BENCH_SCALE_THREADS) || 500;
const WARMUP_THREADS = 50;
/** Timed rounds per setup (the median is reported); BENCH_ROUNDS changes it. */
const ROUNDS = Number(process.env.BENCH_ROUNDS) || 3;
const MODEL_LATENCY_MS = 200;
const CALLS_PER_RUN = 2;
const IDEAL_MS = CALLS_PER_RUN * MODEL_LATENCY_MS;
const CONCURRENCY = 100; // turns per worker process, as GLASSBOX_MAX_CONCURRENT_RUNS's default is runs per process
const SEND_IN_FLIGHT = 50;
const STOPS = 5;
const STOP_TARGET_MS = 1_000;
const SECRET = "bench-scale-signing-secret";
const DATABASE_URL = process.env.GLASSBOX_BENCH_DATABASE_URL ?? process.env.GLASSBOX_TEST_DATABASE_URL;

interface Setup {
  label: string;
  workers: number; // 0: everything in one process on SQLite
}

interface Measured {
  label: string;
  wallMs?: Stats;
  stopMs?: Stats;
  note?: string;
}

const SETUPS: Setup[] = [
  { label: "SQLite, one process", workers: 0 },
  { label: "PostgreSQL, 1 ingress + 1 worker", workers: 1 },
  { label: "PostgreSQL, 1 ingress + 2 workers", workers: 2 },
];

const benchmark: Benchmark = {
  name: "scale",
  title: `${THREADS} Slack threads at once and "stop", on SQLite in one process and on PostgreSQL with 1 and 2 worker processes`,
  async run() {
    const measured: Measured[] = [];
    for (const setup of SETUPS) {
      if (setup.workers > 0 && !DATABASE_URL) {
        measured.push({
          label: setup.label,
          note: "not measured: set GLASSBOX_TEST_DATABASE_URL (or GLASSBOX_BENCH_DATABASE_URL) to a PostgreSQL server",
        });
        continue;
      }
      measured.push(await measure(setup));
    }
    const rows: Row[] = [];
    const targets: Target[] = [];
    for (const result of measured) {
      if (!result.wallMs || !result.stopMs) {
        targets.push({
          label: `${result.label}: "stop" takes effect within ${STOP_TARGET_MS / 1000} s`,
          pass: false,
          detail: result.note ?? "not measured",
        });
        continue;
      }
      rows.push({ label: `${result.label}: ${THREADS} threads, wall`, value: result.wallMs, unit: "ms" });
      rows.push({
        label: `${result.label}: wall / ideal ${IDEAL_MS} ms`,
        value: result.wallMs.median / IDEAL_MS,
        unit: "x",
      });
      rows.push({ label: `${result.label}: "stop" until "Stopped."`, value: result.stopMs, unit: "ms" });
      targets.push({
        label: `${result.label}: "stop" takes effect within ${STOP_TARGET_MS / 1000} s`,
        pass: result.stopMs.max <= STOP_TARGET_MS,
        detail: `median ${result.stopMs.median.toFixed(0)} ms, slowest ${result.stopMs.max.toFixed(0)} ms of ${STOPS}`,
      });
    }
    return {
      notes: [
        `${THREADS} mentions at once (at most ${SEND_IN_FLIGHT} unacknowledged), each a new thread and a run of ${CALLS_PER_RUN} model calls of ${MODEL_LATENCY_MS} ms (calculator, then the answer); wall time from the first send until every answer reached the fake Slack; ideal ${IDEAL_MS} ms; ${ROUNDS} rounds after ${WARMUP_THREADS} warm-up threads`,
        `every bot is src/main.ts in processes of its own; the fake Slack and the model server run in the bench process; ${CONCURRENCY} runs at once per process (GLASSBOX_MAX_CONCURRENT_RUNS's default, GLASSBOX_WORKER_CONCURRENCY=${CONCURRENCY}), so ${THREADS} runs need at least ${Math.ceil(THREADS / CONCURRENCY)} rounds of ${IDEAL_MS} ms on one process`,
        `"stop": a run whose model call never answers, then "stop" in its thread, timed until "Stopped." reached the thread; ${STOPS} times`,
        ...measured.filter((result) => result.note).map((result) => `${result.label}: ${result.note}`),
      ],
      rows,
      targets,
      data: { threads: THREADS, idealMs: IDEAL_MS, concurrency: CONCURRENCY, measured },
    } satisfies BenchmarkReport;
  },
};
export default benchmark;

async function measure(setup: Setup): Promise<Measured> {
  const directory = mkdtempSync(join(tmpdir(), "glassbox-scale-"));
  const fake = await startFakeSlack({ signingSecret: SECRET, botUserId: BOT, teamId: TEAM });
  const model = await startScriptedModelServer({ script: twoCallReply(MODEL_LATENCY_MS) });
  const database: TestDatabase | undefined =
    setup.workers > 0 ? await createTestDatabase(DATABASE_URL as string) : undefined;
  const processes: RoleProcess[] = [];
  try {
    const common = {
      GLASSBOX_DB: join(directory, "glassbox.db"),
      ...fakeSlackEnvironment(fake.apiUrl, SECRET),
      LOG_LEVEL: "warn",
    };
    const withModel = {
      OPENAI_BASE_URL: model.url,
      OPENAI_API_KEY: "sk-bench-scale",
      LLM_MODEL: "gpt-4o-mini",
      GLASSBOX_BUILTIN_TOOLS: "calculator",
    };
    let eventsUrl: string;
    if (!database) {
      const bot = await startRoleProcess("none", { ...common, ...withModel, LOG_LEVEL: "info" });
      processes.push(bot);
      eventsUrl = bot.lines.find((line) => /^Slack connected/.test(line.msg))?.eventsUrl as string;
    } else {
      const shared = { ...common, GLASSBOX_DATABASE_URL: database.url };
      // Workers first: they migrate the store and the queue.
      for (let index = 0; index < setup.workers; index++) {
        processes.push(
          await startRoleProcess("worker", {
            ...shared,
            ...withModel,
            GLASSBOX_WORKER_CONCURRENCY: String(CONCURRENCY),
            LOG_LEVEL: "info",
          }),
        );
      }
      const ingress = await startRoleProcess("ingress", { ...shared, LOG_LEVEL: "info" });
      processes.push(ingress);
      eventsUrl = ingress.lines.find((line) => /^ingress: receiving/.test(line.msg))?.slack as string;
    }
    const answers = createAnswerWatch(fake);
    await threadsAtOnce(fake, eventsUrl, answers, "w", WARMUP_THREADS);
    const walls: number[] = [];
    for (let round = 0; round < ROUNDS; round++)
      walls.push(await threadsAtOnce(fake, eventsUrl, answers, `r${round}b`, THREADS));
    const stops: number[] = [];
    for (let round = 0; round < STOPS; round++) stops.push(await stopOnce(fake, model, eventsUrl, round));
    return { label: setup.label, wallMs: statsOf(walls), stopMs: statsOf(stops) };
  } finally {
    await Promise.all(processes.map((process) => process.kill()));
    await model.close();
    await fake.close();
    await database?.drop();
    rmSync(directory, { recursive: true, force: true });
  }
}

const mention = (fake: FakeSlack, eventsUrl: string, text: string, ts: string, threadTs?: string) =>
  mentionIn(fake, eventsUrl, SECRET, text, ts, threadTs);

/** Sends `count` new threads as fast as they are acknowledged; resolves with the wall time until every one is answered. */
async function threadsAtOnce(
  fake: FakeSlack,
  eventsUrl: string,
  answers: AnswerWatch,
  prefix: string,
  count: number,
): Promise<number> {
  const names = Array.from({ length: count }, (_, index) => `${prefix}${index}`);
  const started = Date.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: SEND_IN_FLIGHT }, async () => {
      for (let index = next++; index < count; index = next++)
        await mention(fake, eventsUrl, `question ${names[index]}`, fake.nextTs());
    }),
  );
  return (await allAnswered(answers, names)) - started;
}

/** One "stop": timed from sending it until "Stopped." reaches the thread. */
async function stopOnce(
  fake: FakeSlack,
  model: ScriptedModelServer,
  eventsUrl: string,
  round: number,
): Promise<number> {
  const root = fake.nextTs();
  const before = model.requests.length;
  await mention(fake, eventsUrl, `question slow${round}`, root);
  while (
    !model.requests.slice(before).some((request) => JSON.stringify(request.body.messages).includes(`slow${round}`))
  )
    await sleep(10);
  const since = fake.calls.length;
  const sent = Date.now();
  await mention(fake, eventsUrl, "stop", fake.nextTs(), root);
  const stopped = await fake.waitForCall(
    "chat.postMessage",
    (call) => call.args.thread_ts === root && call.args.text === "Stopped.",
    { since, timeoutMs: 60_000 },
  );
  return stopped.at - sent;
}
