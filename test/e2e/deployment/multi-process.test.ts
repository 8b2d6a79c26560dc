// glassbox split over processes, end to end: one ingress process and three worker processes (the
// real src/main.ts with GLASSBOX_ROLE) on real PostgreSQL, the fake Slack (Events API in, Web API
// out) and the scripted model server. 200 threads of two messages each, some events retried and
// some delivered twice, while a worker is killed with SIGKILL every few seconds and restarted.
//
// Checked: every accepted event gets exactly one answer (also when the worker that posted it was
// killed before recording that it had: the turn, run again elsewhere, finds the answer in the thread
// through conversations.replies and posts nothing); the runs of a thread never
// overlap and keep their order (the model server sees each thread's calls, and no call of a
// thread's second message comes while its first is in flight or before the first's answer is
// posted); an approval clicked while the worker that asked for it is dead resumes on another;
// "stop" in a thread ends its run cancelled; a user with a daily cap spends at most the cap and one
// call, across workers, and is not held up by the calls of a killed worker.
// Runs only when GLASSBOX_TEST_DATABASE_URL is set. To look into a failure, MULTI_PROCESS_LOG=<file>
// writes every process's log lines there and keeps the database (its URL is printed).
import { setTimeout as sleep } from "node:timers/promises";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { startFakeSlack, type FakeMessage, type FakeSlack } from "../../../src/testing/fake-slack.js";
import {
  startScriptedModelServer,
  type ChatCompletionRequestBody,
  type ScriptedModelServer,
  type ScriptedReply,
} from "../../../src/testing/scripted-model-server.js";
import { seeded } from "../../../src/testing/seeded-random.js";
import { openStorePort, type AnyStorePort } from "../../../src/store/index.js";
import {
  createTestDatabase,
  NEEDS_DATABASE,
  TEST_DATABASE_URL,
  type TestDatabase,
} from "../fixtures/queue-database.js";
import { fakeSlackEnvironment, startRoleProcess, type RoleProcess } from "../fixtures/role-processes.js";

const BOT = "U0FAKEBOT1";
const TEAM = "T0FAKE0001";
const CHANNEL = "C1";
const SECRET = "multi-process-signing-secret";
const THREADS = 200;
const HEAVY_THREADS = 20; // the first threads are one user's, who has a daily cap
const HEAVY_USER = "UHEAVY";
const CALL_MS = 40; // each model call
/** The capped user's calls take longer, so that some are in flight in a worker when it is killed. */
const HEAVY_CALL_MS = 1_000;
const CALL_TOKENS = { promptTokens: 100, completionTokens: 20 };
/**
 * The daily token cap: about twenty of the capped user's forty runs. Far above what the others spend.
 * A call reserves its prompt and 1,000 tokens until it answers; a worker killed mid-call never
 * settles, and its reservation holds no room once its process is gone, so a takeover near the cap
 * does not wait for it.
 */
const CAP = 5_000;
const KILL_EVERY_MS = 3_000;
/** Liveness in a second instead of 21 s, so that a killed worker's turns are taken over within the test. */
const TIMINGS = { heartbeatMs: 200, deadAfterMs: 1_000, sweepMs: 200, pollIntervalMs: 250 };
const WAIT = { timeout: 60_000, interval: 100 };

const tag = (thread: string, message: number) => `${thread}-m${message}`;
const answerOf = (thread: string, message: number) => `answer to ${tag(thread, message)}.`;

interface ModelCall {
  thread: string;
  message: number;
  at: number;
}

describe.runIf(Boolean(TEST_DATABASE_URL))(
  `glassbox as 1 ingress and 3 worker processes on PostgreSQL (${NEEDS_DATABASE})`,
  () => {
    let database: TestDatabase;
    let fake: FakeSlack;
    let model: ScriptedModelServer;
    let store: AnyStorePort;
    let ingress: RoleProcess;
    let directory: string;
    const workers: RoleProcess[] = [];
    const gone: RoleProcess[] = []; // killed workers, whose logs may explain a failure
    const calls: ModelCall[] = [];
    const overlaps: string[] = [];
    const inFlight = new Map<string, Map<number, number>>(); // thread -> message -> calls in flight
    let slowCalls = 0;

    /** The scripted model: two calls per run (calculator, then the answer); the approval thread asks for a dangerous call; the slow thread never answers. */
    async function reply(body: ChatCompletionRequestBody): Promise<ScriptedReply> {
      const lastUser = [...body.messages].reverse().find((message) => message.role === "user");
      const found = /\b(t\d+|approval|slow)-m(\d+)\b/.exec(
        typeof lastUser?.content === "string" ? lastUser.content : "",
      );
      if (!found) return { content: "I did not understand.", usage: CALL_TOKENS };
      const [, thread = "", number = "0"] = found;
      const message = Number(number);
      const last = body.messages.at(-1);
      const toolResult = last?.role === "tool" && typeof last.content === "string" ? last.content : undefined;
      if (thread === "slow") {
        slowCalls++;
        return { hang: true }; // until the run is cancelled and its request aborted
      }
      const flights = inFlight.get(thread) ?? new Map<number, number>();
      inFlight.set(thread, flights);
      for (const [other, count] of flights)
        if (count > 0 && other !== message)
          overlaps.push(`${thread}: a call of m${message} while m${other} was in flight`);
      flights.set(message, (flights.get(message) ?? 0) + 1);
      calls.push({ thread, message, at: Date.now() });
      await sleep(/^t\d+$/.test(thread) && Number(thread.slice(1)) < HEAVY_THREADS ? HEAVY_CALL_MS : CALL_MS);
      flights.set(message, (flights.get(message) ?? 1) - 1);
      if (thread === "approval") {
        if (!toolResult) return { toolCalls: [{ name: "whoami", arguments: "{}" }], usage: CALL_TOKENS };
        if (!toolResult.includes("wiped"))
          return { toolCalls: [{ name: "wipe_cache", arguments: "{}" }], usage: CALL_TOKENS };
        return { content: answerOf(thread, message), usage: CALL_TOKENS };
      }
      if (!toolResult)
        return { toolCalls: [{ name: "calculator", arguments: '{"expression":"6*7"}' }], usage: CALL_TOKENS };
      return { content: answerOf(thread, message), usage: CALL_TOKENS };
    }

    function environment(): Record<string, string> {
      return {
        GLASSBOX_DATABASE_URL: database.url,
        GLASSBOX_QUEUE_TIMINGS: JSON.stringify(TIMINGS),
        GLASSBOX_DB: join(directory, "unused.db"),
        ...fakeSlackEnvironment(fake.apiUrl, SECRET),
        GLASSBOX_USER_DAILY_TOKENS: String(CAP),
      };
    }
    const workerEnvironment = () => ({
      ...environment(),
      OPENAI_BASE_URL: model.url,
      OPENAI_API_KEY: "sk-test-multi-process",
      LLM_MODEL: "gpt-4o-mini",
      GLASSBOX_WORKER_CONCURRENCY: "8",
      GLASSBOX_TOOLS: new URL("../fixtures/worker-tools.ts", import.meta.url).pathname,
      GLASSBOX_BUILTIN_TOOLS: "calculator",
    });

    beforeAll(async () => {
      directory = mkdtempSync(join(tmpdir(), "glassbox-multi-"));
      database = await createTestDatabase(TEST_DATABASE_URL as string);
      if (process.env.MULTI_PROCESS_LOG) console.log(`database: ${database.url}`);
      fake = await startFakeSlack({ signingSecret: SECRET, botUserId: BOT, teamId: TEAM });
      model = await startScriptedModelServer({ script: (body) => reply(body) });
      // The workers first: they migrate the store and the queue; ingress has no model settings at all.
      workers.push(...(await Promise.all([0, 1, 2].map(() => startRoleProcess("worker", workerEnvironment())))));
      ingress = await startRoleProcess("ingress", environment());
      store = await openStorePort({ databaseUrl: database.url, databasePath: "unused.db", poolSize: 4 });
    }, 120_000);

    afterAll(async () => {
      if (process.env.MULTI_PROCESS_LOG) {
        const { writeFileSync } = await import("node:fs");
        const all = [ingress, ...workers, ...gone]
          .filter(Boolean)
          .flatMap((child) => child.lines.map((line) => ({ pid: child.pid, role: child.role, ...line })));
        writeFileSync(process.env.MULTI_PROCESS_LOG, all.map((line) => JSON.stringify(line)).join("\n"));
      }
      await Promise.all([ingress, ...workers].map((process) => process?.kill()));
      await store?.close();
      await model?.close();
      await fake?.close();
      if (!process.env.MULTI_PROCESS_LOG) await database?.drop();
      else await database?.pool.end();
      if (directory) rmSync(directory, { recursive: true, force: true });
    }, 60_000);

    const eventsUrl = () => (ingress.lines.find((line) => /^ingress: receiving/.test(line.msg))?.slack as string) ?? "";
    const session = (root: string) => `slack:${TEAM}:${CHANNEL}:${root}`;
    const botMessages = (root: string): FakeMessage[] =>
      fake.messages(CHANNEL, root).filter((message) => message.bot_id !== undefined);
    const countIn = (root: string, text: string) =>
      botMessages(root).filter((message) => (message.text ?? "").includes(text)).length;

    async function mention(
      user: string,
      text: string,
      ts: string,
      threadTs?: string,
      options: { eventId?: string; retryNum?: number } = {},
    ) {
      const event = {
        type: "app_mention",
        user,
        channel: CHANNEL,
        text: `<@${BOT}> ${text}`,
        ts,
        ...(threadTs ? { thread_ts: threadTs } : {}),
      };
      const sent = await fake.sendEvent(eventsUrl(), event, {
        signingSecret: SECRET,
        ...options,
        ...(options.retryNum ? { retryReason: "http_timeout" } : {}),
      });
      expect(sent.status).toBe(200); // acknowledged only once accepted
      return sent;
    }

    /** Workers are replaced one at a time: by the killer, or by the approval scenario. */
    let replacing: Promise<unknown> = Promise.resolve();
    function replaceWorker(
      pick: (alive: RoleProcess[]) => RoleProcess | undefined,
      meanwhile: () => Promise<void> = async () => {},
    ): Promise<number | undefined> {
      const done = replacing.then(async () => {
        const victim = pick(workers);
        if (!victim) {
          await meanwhile(); // the one meant is dead already (the killer got there first)
          return undefined;
        }
        await victim.kill();
        workers.splice(workers.indexOf(victim), 1);
        gone.push(victim);
        await meanwhile(); // while it is dead
        workers.push(await startRoleProcess("worker", workerEnvironment()));
        return victim.pid;
      });
      replacing = done.catch(() => {});
      return done;
    }

    it("answers every accepted event exactly once (also when its worker died right after posting), in order per thread, while workers are killed", async () => {
      const random = seeded(16);
      const roots = Array.from({ length: THREADS }, () => fake.nextTs());
      let sending = true;
      let kills = 0;
      const sendThreads = (indexes: number[]) => {
        let next = 0;
        return Promise.all(
          Array.from({ length: 16 }, async () => {
            for (let at = next++; at < indexes.length; at = next++) {
              const index = indexes[at] as number;
              const root = roots[index] as string;
              const user = index < HEAVY_THREADS ? HEAVY_USER : `U${index}`;
              const first = await mention(user, `question ${tag(`t${index}`, 1)}`, root);
              if (index % 10 === 3)
                await mention(user, `question ${tag(`t${index}`, 1)}`, root, undefined, {
                  eventId: first.eventId,
                  retryNum: 1,
                });
              if (index % 10 === 7) await mention(user, `question ${tag(`t${index}`, 1)}`, root); // the same message under another event id
              await mention(user, `and then ${tag(`t${index}`, 2)}`, fake.nextTs(), root);
            }
          }),
        );
      };
      const openRuns = async () =>
        (
          await database.pool.query(
            "select id, session_id, input, status from runs where parent_run_id is null and status in ('accepted', 'running', 'awaiting_approval')",
          )
        ).rows;

      const killer = (async () => {
        while (sending || kills < 3) {
          await sleep(KILL_EVERY_MS);
          await replaceWorker((alive) => alive[Math.floor(random() * alive.length)]);
          kills++;
        }
      })();

      // An approval asked by one worker, clicked while that worker is dead.
      const approvalRoot = fake.nextTs();
      const approval = (async () => {
        await mention("U1", `clean the cache ${tag("approval", 1)}`, approvalRoot);
        const buttons = await vi.waitFor(() => {
          const posted = botMessages(approvalRoot).find((message) =>
            JSON.stringify(message.blocks ?? []).includes("glassbox_approve"),
          );
          if (!posted) throw new Error("no approval buttons yet");
          return posted;
        }, WAIT);
        const askedBy = pidIn(
          model.requests.map((request) => request.body),
          "approval",
          false,
        );
        const approvalId = /"value":"([^"]+)"/.exec(JSON.stringify(buttons.blocks))?.[1] as string;
        const killed = await replaceWorker(
          (alive) => alive.find((worker) => worker.pid === askedBy),
          async () => {
            const clicked = await fake.sendBlockAction(
              eventsUrl(),
              {
                userId: "U1",
                channel: CHANNEL,
                messageTs: buttons.ts,
                actionId: "glassbox_approve",
                value: approvalId,
              },
              { signingSecret: SECRET },
            );
            expect(clicked.status).toBe(200);
          },
        );
        return { askedBy, killed };
      })();

      // A run that would never end by itself, stopped from the thread.
      const slowRoot = fake.nextTs();
      const stopped = (async () => {
        await mention("U2", `think very hard ${tag("slow", 1)}`, slowRoot);
        await vi.waitFor(() => expect(slowCalls).toBeGreaterThan(0), WAIT);
        await mention("U2", "stop", fake.nextTs(), slowRoot);
      })();

      // Two messages per thread, the second sent once the first is accepted; some retried, some twice.
      // The capped user's threads are spread among the others, so that workers are killed while that
      // user's calls race for the last room under the cap, on three workers.
      const sendingAt = (index: number) => (index < HEAVY_THREADS ? index * (THREADS / HEAVY_THREADS) + 0.5 : index);
      await sendThreads(
        Array.from({ length: THREADS }, (_, index) => index).sort((a, b) => sendingAt(a) - sendingAt(b)),
      );
      sending = false;
      await Promise.all([approval, stopped]);

      // Everything ends: 2 runs per thread, the approval's and the stopped one.
      await vi.waitFor(async () => expect(await openRuns()).toEqual([]), { ...WAIT, timeout: 120_000 });
      await killer;
      await vi.waitFor(() => {
        for (const [index, root] of roots.entries())
          if (index >= HEAVY_THREADS)
            for (const message of [1, 2]) expect(countIn(root, answerOf(`t${index}`, message))).toBeGreaterThan(0);
      }, WAIT);
      await sleep(500); // an answer posted twice would show by now

      // Exactly once: one run per accepted event, and one answer per run, also where the worker that
      // posted it was killed before it could record that it had: the turn runs again elsewhere, finds
      // the answer not recorded as shown, reads the thread back, finds it there and posts nothing.
      const runs = await database.pool.query<{
        session_id: string;
        input: string;
        status: string;
        output: string | null;
        pid: number | null;
      }>(
        "select r.session_id, r.input, r.status, r.output, i.pid from runs r left join instances i on i.id = r.owner where r.parent_run_id is null order by r.seq",
      );
      const runsOf = (root: string) => runs.rows.filter((run) => run.session_id === session(root));
      for (const [index, root] of roots.entries()) {
        const own = runsOf(root);
        expect(own.map((run) => run.input)).toEqual([
          `question ${tag(`t${index}`, 1)}`,
          `and then ${tag(`t${index}`, 2)}`,
        ]);
        for (const [position, run] of own.entries()) {
          if (run.status === "final") {
            const where = `thread ${index}, message ${position + 1}, ended by ${run.pid}`;
            expect(countIn(root, answerOf(`t${index}`, position + 1)), where).toBe(1);
          } else {
            // Only the capped user's runs may be refused, and the refusal is said once.
            expect(index < HEAVY_THREADS, `thread ${index}: ${run.status} ${run.output}`).toBe(true);
            expect(run.status).toBe("error");
            const said = (run.output ?? "").slice(0, 40);
            expect(countIn(root, said)).toBe(own.filter((other) => (other.output ?? "").startsWith(said)).length);
          }
        }
      }

      // Order and no overlap: each thread's model calls are of m1, then m2; m2 starts after m1's answer is posted.
      expect(overlaps).toEqual([]);
      for (const [index, _root] of roots.entries()) {
        const own = calls.filter((call) => call.thread === `t${index}`);
        const messages = own.map((call) => call.message);
        expect(messages, `thread ${index}`).toEqual([...messages].sort((a, b) => a - b));
        const firstAnswer = fake.calls.find((call) => String(call.args.text ?? "").includes(answerOf(`t${index}`, 1)));
        const secondStart = own.find((call) => call.message === 2);
        if (firstAnswer && secondStart)
          expect(secondStart.at, `thread ${index}`).toBeGreaterThanOrEqual(firstAnswer.at);
      }

      // The approval resumed on another worker than the one that asked, which was dead at the click.
      const { askedBy, killed } = await approval;
      expect(askedBy).toBeDefined();
      // Killed for the click, or by the killer just before: either way dead when clicked.
      expect(killed === askedBy || gone.some((worker) => worker.pid === askedBy)).toBe(true);
      await vi.waitFor(() => expect(countIn(approvalRoot, answerOf("approval", 1))).toBe(1), WAIT);
      const resumedIn = pidIn(
        model.requests.map((request) => request.body),
        "approval",
        true,
      );
      expect(resumedIn).toBeDefined();
      expect(resumedIn).not.toBe(askedBy);

      // "stop" ended the slow run cancelled.
      const slow = (await store.runsOfSession(session(slowRoot))).map((run) => run.status);
      expect(slow).toEqual(["cancelled"]);
      await vi.waitFor(() => expect(countIn(slowRoot, "Stopped.")).toBe(1), WAIT);

      // The cap held across workers: at most one call over it, and it did refuse some runs.
      const today = new Date(new Date().toISOString().slice(0, 10));
      const spent = await store.userUsageSince(HEAVY_USER, today);
      expect(spent.promptTokens + spent.completionTokens).toBeLessThanOrEqual(
        CAP + CALL_TOKENS.promptTokens + CALL_TOKENS.completionTokens,
      );
      expect(runs.rows.filter((run) => run.status === "error").length).toBeGreaterThan(0);
      expect(kills).toBeGreaterThanOrEqual(3);
      if (process.env.MULTI_PROCESS_LOG) {
        // Left unsettled: the capped user's calls in flight in a worker when it was killed.
        const left = await database.pool.query(
          "select count(*)::int as count from quota_reservations where user_id = $1",
          [HEAVY_USER],
        );
        const lookedUp = fake.callsTo("conversations.replies").length;
        console.log(
          `kills: ${kills}; threads read back before posting a stored answer: ${lookedUp}; the capped user's reservations left by killed workers: ${left.rows[0]?.count}`,
        );
      }

      // A worker stopped with SIGTERM finishes and exits 0.
      const leaving = workers.shift() as RoleProcess;
      expect(await leaving.stop()).toBe(0);
    }, 240_000);
  },
);

/** The pid a tool reported in the approval thread: whoami's (before the pause), or wipe_cache's (after the click). */
function pidIn(bodies: ChatCompletionRequestBody[], thread: string, afterApproval: boolean): number | undefined {
  for (const body of bodies) {
    const lastUser = [...body.messages].reverse().find((message) => message.role === "user");
    if (typeof lastUser?.content !== "string" || !lastUser.content.includes(`${thread}-m`)) continue;
    for (const message of body.messages) {
      if (message.role !== "tool" || typeof message.content !== "string") continue;
      if (message.content.includes("wiped") !== afterApproval) continue;
      const pid = /"pid":(\d+)/.exec(message.content)?.[1];
      if (pid) return Number(pid);
    }
  }
  return undefined;
}
