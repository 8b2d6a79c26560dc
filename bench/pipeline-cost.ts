/**
 * What one turn of the pipeline costs, measured from outside: the same Slack burst on glassbox in one
 * process on SQLite, in one process on PostgreSQL (GLASSBOX_DATABASE_URL alone: role all) and split
 * over an ingress and 2 worker processes on PostgreSQL. Every bot is the real glassbox as `npm start`
 * runs it (dist/main.js, built by tsc first) in processes of its own; the fake Slack and the scripted
 * model server run in this process. The setups are measured in PASSES passes, each on fresh
 * processes, in alternating order (one way, then back), so that a host whose speed drifts during the
 * bench weighs on every setup alike.
 *
 * 1. CPU per turn: THREADS new threads sent at once (every event in flight together, as Slack sends
 *    a burst), each a run of two model calls and one tool call (calculator, then the answer). The CPU
 *    time of every glassbox process and of the PostgreSQL server (from /proc, see process-cpu.ts) is
 *    read before the burst and SETTLE_MS after its last answer, after a warm-up burst; divided by
 *    THREADS. The statements each process ran are counted by a preloaded module (count-queries.mjs):
 *    SQLite statement runs, PostgreSQL statements and round trips (waits for the server's answers).
 * 2. Acknowledgements: on the split setup, ACK_THREADS new threads at once; each event's time until
 *    ingress answered it, against Slack's 3 s (a later one is delivered again).
 * 3. Worker concurrency: the THREADS burst's wall time on the split setup for each of SWEEP turns
 *    per worker, beside SQLite's (every turn started, GLASSBOX_MAX_CONCURRENT_RUNS=100 runs at once).
 *
 * Needs PostgreSQL (GLASSBOX_BENCH_DATABASE_URL, or GLASSBOX_TEST_DATABASE_URL) for all but the
 * first setup, and Linux's /proc. BENCH_PIPELINE_THREADS, BENCH_ROUNDS, BENCH_PASSES and BENCH_SWEEP (e.g.
 * "8,32,100") change the defaults; BENCH_LAYOUTS (e.g. "postgres-one") measures only those setups.
 * BENCH_CPU_PROF=<directory> has every glassbox process write a V8 CPU profile there (node
 * --cpu-prof), for finding where a turn's time goes; BENCH_STATEMENTS=<n> lists a setup's n most frequent
 * statements instead of 6.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { type FakeSlack, startFakeSlack } from "../src/testing/fake-slack.js";
import { type ScriptedModelServer, startScriptedModelServer } from "../src/testing/scripted-model-server.js";
import { createTestDatabase, type TestDatabase } from "../test/e2e/fixtures/queue-database.js";
import { fakeSlackEnvironment, type Role, startRoleProcess } from "../test/e2e/fixtures/role-processes.js";
import { buildDist } from "./fixtures/build-dist.js";
import { cpuMsOf, postgresServerCpuMs } from "./fixtures/process-cpu.js";
import {
  type Counts,
  countingEnvironment,
  countsBetween,
  type QueryCounts,
  readCounts,
  totalOf,
  transactionsOf,
} from "./fixtures/query-counts.js";
import {
  allAnswered,
  type AnswerWatch,
  BOT,
  createAnswerWatch,
  mention,
  TEAM,
  twoCallReply,
} from "./fixtures/slack-load.js";
import { type Benchmark, type BenchmarkReport, type Row, type Stats, statsOf, type Target } from "./measure.js";

const THREADS = Number(process.env.BENCH_PIPELINE_THREADS) || 300;
const ACK_THREADS = Number(process.env.BENCH_ACK_THREADS) || 500;
const ACK_ROUNDS = 2;
/**
 * Bursts of THREADS before the timed ones, so that each process's compiled code and heap settle (an
 * ingress and two workers each see only a share of them).
 */
const WARMUP_BURSTS = 2;
const ROUNDS = Number(process.env.BENCH_ROUNDS) || 3;
const PASSES = Number(process.env.BENCH_PASSES) || 2;
const SWEEP_ROUNDS = 2;
const SWEEP = (process.env.BENCH_SWEEP ?? "8,16,32,64,100").split(",").filter(Boolean).map(Number); // "" for none
const MODEL_LATENCY_MS = 200;
/** After the last answer: the runs' last writes (the run's end) land. */
const SETTLE_MS = 1_000;
/** How long the idle cost of a worker concurrency is measured. */
const IDLE_MS = 5_000;
const ACK_LIMIT_MS = 3_000;
const CPU_RATIO_TARGET = 2;
const SECRET = "bench-pipeline-signing-secret";
const DATABASE_URL = process.env.GLASSBOX_BENCH_DATABASE_URL ?? process.env.GLASSBOX_TEST_DATABASE_URL;
const PROFILES = process.env.BENCH_CPU_PROF;
/** The most frequent statements listed per setup (BENCH_STATEMENTS, e.g. 40 to see a turn's every statement). */
const SHOWN_STATEMENTS = Number(process.env.BENCH_STATEMENTS) || 6;

type Layout = "sqlite" | "postgres-one" | "postgres-split";

const LABELS: Record<Layout, string> = {
  sqlite: "SQLite, one process",
  "postgres-one": "PostgreSQL, one process",
  "postgres-split": "PostgreSQL, ingress + 2 workers",
};

interface Child {
  label: string;
  pid: number;
  countsFile: string;
}

interface Deployed {
  children: Child[];
  eventsUrl: string;
  fake: FakeSlack;
  answers: AnswerWatch;
  close(): Promise<void>;
}

interface Round {
  wallMs: number;
  /** CPU time during the burst, ms: each glassbox process by label, the PostgreSQL server, this process. */
  cpuMs: Record<string, number>;
  postgresMs?: number;
  benchMs: number;
  counts: Record<string, QueryCounts>;
}

interface Measured {
  layout: Layout;
  rounds: Round[];
  acksMs?: number[];
}

const benchmark: Benchmark = {
  name: "pipeline-cost",
  title: `CPU, statements and round trips per turn of ${THREADS} Slack threads at once, on SQLite and PostgreSQL (one process, ingress + 2 workers); acknowledgements of ${ACK_THREADS} at once; worker concurrency`,
  async run() {
    const chosen = process.env.BENCH_LAYOUTS?.split(",") as Layout[] | undefined;
    const layouts = (chosen ?? (DATABASE_URL ? ["sqlite", "postgres-one", "postgres-split"] : ["sqlite"])) as Layout[];
    buildDist("main.js");
    const passes: Measured[] = [];
    for (let pass = 0; pass < PASSES; pass++)
      for (const layout of pass % 2 === 0 ? layouts : [...layouts].reverse()) passes.push(await measureCost(layout));
    const measured = layouts.map((layout): Measured => {
      const mine = passes.filter((measuredPass) => measuredPass.layout === layout);
      const acksMs = mine.flatMap((measuredPass) => measuredPass.acksMs ?? []);
      return {
        layout,
        rounds: mine.flatMap((measuredPass) => measuredPass.rounds),
        ...(acksMs.length ? { acksMs } : {}),
      };
    });
    const sweep: SweepPoint[] = [];
    if (DATABASE_URL) for (const concurrency of SWEEP) sweep.push(await measureWall(concurrency));
    return report(measured, sweep);
  },
};
export default benchmark;

/** Starts `layout`'s processes (each counting its statements) against a fake Slack and model server of their own. */
async function deploy(layout: Layout, extra: Record<string, string> = {}): Promise<Deployed> {
  const directory = mkdtempSync(join(tmpdir(), "glassbox-pipeline-"));
  const fake = await startFakeSlack({ signingSecret: SECRET, botUserId: BOT, teamId: TEAM });
  const model: ScriptedModelServer = await startScriptedModelServer({ script: twoCallReply(MODEL_LATENCY_MS) });
  const database: TestDatabase | undefined =
    layout === "sqlite" ? undefined : await createTestDatabase(DATABASE_URL as string);
  const children: Array<Child & { end(): Promise<unknown> }> = [];
  const close = async () => {
    // A profile is written as the process exits by itself (SIGTERM), not when it is killed.
    await Promise.all(children.map((child) => child.end()));
    await model.close();
    await fake.close();
    await database?.drop();
    rmSync(directory, { recursive: true, force: true });
  };
  try {
    const common = {
      GLASSBOX_DB: join(directory, "glassbox.db"),
      ...fakeSlackEnvironment(fake.apiUrl, SECRET),
      ...(database ? { GLASSBOX_DATABASE_URL: database.url } : {}),
      ...extra,
    };
    const withModel = {
      OPENAI_BASE_URL: model.url,
      OPENAI_API_KEY: "sk-bench-pipeline",
      LLM_MODEL: "gpt-4o-mini",
      GLASSBOX_BUILTIN_TOOLS: "calculator",
    };
    const start = async (label: string, role: Role, env: Record<string, string>) => {
      const countsFile = join(directory, `${label}.counts.jsonl`);
      const counting = countingEnvironment(countsFile);
      const profileDirectory = join(PROFILES ?? "", `${layout}-${label.replace(/ /g, "")}`);
      const profiling = PROFILES ? ["--cpu-prof", `--cpu-prof-dir=${profileDirectory}`] : [];
      const started = await startRoleProcess(role, { ...common, ...env, ...counting }, undefined, {
        nodeArgs: profiling,
        compiled: true,
      });
      children.push({ label, pid: started.pid, countsFile, end: () => (PROFILES ? started.stop() : started.kill()) });
      return started;
    };
    let eventsUrl: string;
    if (layout === "sqlite") {
      const bot = await start("glassbox", "none", withModel);
      eventsUrl = bot.lines.find((line) => /^Slack connected/.test(line.msg))?.eventsUrl as string;
    } else if (layout === "postgres-one") {
      const bot = await start("glassbox", "url-only", withModel);
      eventsUrl = bot.lines.find((line) => /^ingress: receiving/.test(line.msg))?.slack as string;
    } else {
      // Workers first: they migrate the store and the queue.
      await start("worker 1", "worker", withModel);
      await start("worker 2", "worker", withModel);
      const ingress = await start("ingress", "ingress", {});
      eventsUrl = ingress.lines.find((line) => /^ingress: receiving/.test(line.msg))?.slack as string;
    }
    return { children, eventsUrl, fake, answers: createAnswerWatch(fake), close };
  } catch (error) {
    await close();
    throw error;
  }
}

/** `count` new threads sent at once; the wall time until the last is answered, and each event's acknowledgement time. */
async function burst(deployed: Deployed, prefix: string, count: number): Promise<{ wallMs: number; acksMs: number[] }> {
  const { fake, eventsUrl, answers } = deployed;
  const names = Array.from({ length: count }, (_, index) => `${prefix}${index}`);
  const started = Date.now();
  const acksMs = await Promise.all(
    names.map(async (name) => {
      const sent = performance.now();
      await mention(fake, eventsUrl, SECRET, `question ${name}`, fake.nextTs());
      return performance.now() - sent;
    }),
  );
  return { wallMs: (await allAnswered(answers, names)) - started, acksMs };
}

function cpuNow(children: Child[]) {
  const usage = process.cpuUsage();
  return {
    children: Object.fromEntries(children.map((child) => [child.label, cpuMsOf(child.pid) ?? Number.NaN])),
    postgres: postgresServerCpuMs(),
    bench: (usage.user + usage.system) / 1000,
  };
}

async function countsNow(children: Child[]): Promise<Record<string, QueryCounts>> {
  const read = await Promise.all(children.map((child) => readCounts(child.pid, child.countsFile)));
  return Object.fromEntries(children.map((child, index) => [child.label, read[index] as QueryCounts]));
}

async function warmUp(deployed: Deployed): Promise<void> {
  for (let round = 0; round < WARMUP_BURSTS; round++) await burst(deployed, `w${round}t`, THREADS);
  await sleep(SETTLE_MS);
}

/** One timed burst with the CPU and the statements it took. */
async function measuredBurst(deployed: Deployed, prefix: string): Promise<Round> {
  const countsBefore = await countsNow(deployed.children);
  const before = cpuNow(deployed.children);
  const { wallMs } = await burst(deployed, prefix, THREADS);
  await sleep(SETTLE_MS);
  const after = cpuNow(deployed.children);
  const countsAfter = await countsNow(deployed.children);
  const counts: Record<string, QueryCounts> = {};
  for (const [label, was] of Object.entries(countsBefore)) {
    const now = countsAfter[label] as QueryCounts;
    counts[label] = {
      sqlite: countsBetween(was.sqlite, now.sqlite),
      postgres: countsBetween(was.postgres, now.postgres),
      postgresRoundTrips: now.postgresRoundTrips - was.postgresRoundTrips,
    };
  }
  return {
    wallMs,
    cpuMs: Object.fromEntries(
      Object.entries(after.children).map(([label, ms]) => [label, ms - (before.children[label] ?? 0)]),
    ),
    postgresMs:
      after.postgres !== undefined && before.postgres !== undefined ? after.postgres - before.postgres : undefined,
    benchMs: after.bench - before.bench,
    counts,
  };
}

async function measureCost(layout: Layout): Promise<Measured> {
  const deployed = await deploy(layout);
  try {
    await warmUp(deployed);
    const rounds: Round[] = [];
    for (let round = 0; round < ROUNDS; round++) rounds.push(await measuredBurst(deployed, `r${round}t`));
    if (layout !== "postgres-split") return { layout, rounds };
    const acksMs: number[] = [];
    for (let round = 0; round < ACK_ROUNDS; round++)
      acksMs.push(...(await burst(deployed, `a${round}t`, ACK_THREADS)).acksMs);
    return { layout, rounds, acksMs };
  } finally {
    await deployed.close();
  }
}

interface SweepPoint {
  concurrency: number;
  wallMs: Stats;
  /** While nothing comes in, after the bursts: CPU of the glassbox processes and the server, ms per second. */
  idleCpuMsPerSecond: number;
  /** And round trips per second (the run queue's idle polls, heartbeats). */
  idleRoundTripsPerSecond: number;
}

/** The burst's wall time on ingress + 2 workers running `concurrency` turns each, and what they cost while idle. */
async function measureWall(concurrency: number): Promise<SweepPoint> {
  const deployed = await deploy("postgres-split", { GLASSBOX_WORKER_CONCURRENCY: String(concurrency) });
  try {
    await warmUp(deployed);
    const walls: number[] = [];
    for (let round = 0; round < SWEEP_ROUNDS; round++)
      walls.push((await burst(deployed, `c${concurrency}r${round}t`, THREADS)).wallMs);
    await sleep(SETTLE_MS);
    const countsBefore = await countsNow(deployed.children);
    const before = cpuNow(deployed.children);
    await sleep(IDLE_MS);
    const after = cpuNow(deployed.children);
    const countsAfter = await countsNow(deployed.children);
    const cpuOf = (reading: ReturnType<typeof cpuNow>) =>
      Object.values(reading.children).reduce((sum, ms) => sum + ms, 0) + (reading.postgres ?? 0);
    const roundTrips = deployed.children.reduce(
      (sum, child) =>
        sum +
        (countsAfter[child.label]?.postgresRoundTrips ?? 0) -
        (countsBefore[child.label]?.postgresRoundTrips ?? 0),
      0,
    );
    return {
      concurrency,
      wallMs: statsOf(walls),
      idleCpuMsPerSecond: (cpuOf(after) - cpuOf(before)) / (IDLE_MS / 1000),
      idleRoundTripsPerSecond: roundTrips / (IDLE_MS / 1000),
    };
  } finally {
    await deployed.close();
  }
}

const perTurn = (values: number[]) => statsOf(values.map((value) => value / THREADS));

function percentile(values: number[], fraction: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(fraction * sorted.length) - 1)] as number;
}

type Store = "sqlite" | "postgres";

/** Every process's statements of one store in one round, summed. */
function storeCounts(round: Round, store: Store): Counts {
  const sum: Counts = {};
  for (const counts of Object.values(round.counts))
    for (const [statement, times] of Object.entries(counts[store])) sum[statement] = (sum[statement] ?? 0) + times;
  return sum;
}

function report(measured: Measured[], sweep: SweepPoint[]): BenchmarkReport {
  const rows: Row[] = [];
  const targets: Target[] = [];
  const totals = new Map<Layout, Stats>();
  const topStatements: Record<string, Array<{ perTurn: number; statement: string }>> = {};
  for (const { layout, rounds } of measured) {
    const label = LABELS[layout];
    const store: Store = layout === "sqlite" ? "sqlite" : "postgres";
    for (const process of Object.keys(rounds[0]?.cpuMs ?? {}))
      rows.push({
        label: `${label}: CPU per turn, ${process}`,
        value: perTurn(rounds.map((round) => round.cpuMs[process] as number)),
        unit: "ms",
      });
    const serverMs = rounds.map((round) => round.postgresMs);
    const server = layout !== "sqlite" && serverMs.every((ms) => ms !== undefined) ? (serverMs as number[]) : undefined;
    if (server) rows.push({ label: `${label}: CPU per turn, PostgreSQL server`, value: perTurn(server), unit: "ms" });
    const total = perTurn(
      rounds.map(
        (round, index) => Object.values(round.cpuMs).reduce((sum, ms) => sum + ms, 0) + (server?.[index] ?? 0),
      ),
    );
    totals.set(layout, total);
    rows.push({ label: `${label}: CPU per turn, total`, value: total, unit: "ms" });
    for (const process of Object.keys(rounds[0]?.counts ?? {})) {
      rows.push({
        label: `${label}: statements per turn, ${process}`,
        value: perTurn(rounds.map((round) => totalOf(round.counts[process]?.[store] ?? {}))),
        unit: "",
      });
      if (store === "postgres")
        rows.push({
          label: `${label}: round trips per turn, ${process}`,
          value: perTurn(rounds.map((round) => round.counts[process]?.postgresRoundTrips ?? 0)),
          unit: "",
        });
    }
    rows.push({
      label: `${label}: transactions per turn`,
      value: perTurn(rounds.map((round) => transactionsOf(storeCounts(round, store)))),
      unit: "",
    });
    rows.push({
      label: `${label}: wall of the burst`,
      value: statsOf(rounds.map((round) => round.wallMs)),
      unit: "ms",
    });
    rows.push({
      label: `${label}: CPU per turn of the bench process (fake Slack, model server; not counted)`,
      value: perTurn(rounds.map((round) => round.benchMs)),
      unit: "ms",
    });
    const last = rounds[rounds.length - 1];
    if (last)
      topStatements[label] = Object.entries(storeCounts(last, store))
        .map(([statement, times]) => ({ perTurn: times / THREADS, statement }))
        .sort((a, b) => b.perTurn - a.perTurn);
  }
  const sqlite = totals.get("sqlite");
  for (const layout of ["postgres-one", "postgres-split"] as const) {
    const total = totals.get(layout);
    if (!sqlite || !total) {
      targets.push({
        label: `${LABELS[layout]}: CPU per turn at most ${CPU_RATIO_TARGET}x SQLite's`,
        pass: false,
        detail: "not measured: set GLASSBOX_TEST_DATABASE_URL (or GLASSBOX_BENCH_DATABASE_URL) to a local PostgreSQL",
      });
      continue;
    }
    const ratio = total.median / sqlite.median;
    rows.push({ label: `${LABELS[layout]} / SQLite, CPU per turn (medians)`, value: ratio, unit: "x" });
    targets.push({
      label: `${LABELS[layout]}: CPU per turn at most ${CPU_RATIO_TARGET}x SQLite's`,
      pass: ratio <= CPU_RATIO_TARGET,
      detail: `${total.median.toFixed(2)} ms against ${sqlite.median.toFixed(2)} ms: ${ratio.toFixed(2)}x`,
    });
  }
  const acks = measured.find((result) => result.acksMs)?.acksMs;
  if (acks) {
    const late = acks.filter((ms) => ms > ACK_LIMIT_MS).length;
    rows.push({
      label: `${LABELS["postgres-split"]}: ${ACK_THREADS} at once, acknowledgement`,
      value: statsOf(acks),
      unit: "ms",
    });
    rows.push({ label: `  p99`, value: percentile(acks, 0.99), unit: "ms" });
    rows.push({ label: `  events acknowledged after ${ACK_LIMIT_MS / 1000} s`, value: late, unit: "" });
    targets.push({
      label: `${LABELS["postgres-split"]}: every event of ${ACK_THREADS} at once acknowledged within ${ACK_LIMIT_MS / 1000} s`,
      pass: late === 0,
      detail: `${late} of ${acks.length} later (${ACK_ROUNDS} bursts in each of ${PASSES} passes); slowest ${Math.max(...acks).toFixed(0)} ms, p99 ${percentile(acks, 0.99).toFixed(0)} ms`,
    });
  }
  const sqliteWall = measured.find((result) => result.layout === "sqlite")?.rounds.map((round) => round.wallMs);
  for (const { concurrency, wallMs, idleCpuMsPerSecond, idleRoundTripsPerSecond } of sweep) {
    const setup = `${LABELS["postgres-split"]}, GLASSBOX_WORKER_CONCURRENCY=${concurrency}`;
    rows.push({ label: `${setup}: wall of the burst`, value: wallMs, unit: "ms" });
    if (sqliteWall)
      rows.push({ label: `  / SQLite's wall (medians)`, value: wallMs.median / statsOf(sqliteWall).median, unit: "x" });
    rows.push({ label: `  idle: CPU of glassbox and the server`, value: idleCpuMsPerSecond, unit: "ms/s" });
    rows.push({ label: `  idle: round trips`, value: idleRoundTripsPerSecond, unit: "per s" });
  }
  for (const [label, statements] of Object.entries(topStatements))
    for (const { perTurn: times, statement } of statements.slice(0, SHOWN_STATEMENTS))
      rows.push({
        label: `${label}: ${statement.slice(0, SHOWN_STATEMENTS > 6 ? 160 : 90)}`,
        value: times,
        unit: "per turn",
      });
  return {
    notes: [
      `${THREADS} new threads sent at once (every event in flight together), each a run of 2 model calls of ${MODEL_LATENCY_MS} ms and one calculator call; ${PASSES} passes over the setups in alternating order, each on fresh processes with ${ROUNDS} timed bursts after ${WARMUP_BURSTS} untimed ones; CPU read from /proc before each burst and ${SETTLE_MS} ms after its last answer, divided by ${THREADS}`,
      "every glassbox process is dist/main.js (built by tsc first, as npm start runs it) with the default settings; the fake Slack and the model server run in the bench process; the PostgreSQL server's CPU is the sum over its processes (the postmaster's own and reaped children's time, and its living children's), on a server nobody else uses during the bench",
      "statements and round trips are counted inside each glassbox process by a preloaded module (bench/fixtures/count-queries.mjs): SQLite statement runs, pg queries, and pg round trips (a query sent while its connection awaits no answer starts one; one sent behind others waits in theirs); transactions are the BEGINs among them",
      `acknowledgements: ${ACK_THREADS} new threads at once, ${ACK_ROUNDS} times in each pass, on the PostgreSQL ingress + 2 workers above; each event from its send until ingress answered it`,
      `worker concurrency: the ${THREADS}-thread burst on fresh ingress + 2 workers for each GLASSBOX_WORKER_CONCURRENCY, ${SWEEP_ROUNDS} bursts each after a warm-up; then ${IDLE_MS / 1000} s with nothing coming in (a worker with room for a turn looks for one once a second)`,
    ],
    rows,
    targets,
    data: { threads: THREADS, ackThreads: ACK_THREADS, measured, sweep, topStatements },
  };
}
