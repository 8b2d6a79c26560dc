// Slack ingress end to end: the real Bolt app (HTTP, signed requests) against the fake Slack, on the
// real store and run queue (SQLite with the in-process queue always; PostgreSQL
// when GLASSBOX_TEST_DATABASE_URL is set), with a worker that only records the turns it gets. Every
// "nothing was enqueued" is checked by a later message of the same thread: turns of one conversation
// run in the order they were enqueued, so anything enqueued before it would have reached the worker first.
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { SlackConfig } from "../../../../src/config.js";
import { startSlackIngress, type SlackIngress } from "../../../../src/adapters/slack/slack-inbound.js";
import { workOf } from "../../../../src/conversations/turns.js";
import { startFakeSlack, type FakeSlack } from "../../../../src/testing/fake-slack.js";
import { startScriptedModelServer, type ScriptedModelServer } from "../../../../src/testing/scripted-model-server.js";
import type { Turn } from "../../../../src/queue/types.js";
import type { CancelNotice } from "../../../../src/store/index.js";
import { keysOf, runOf, TARGETS, WAIT, type IngressHarness } from "../../helpers/ingress.js";
import { pausedRun } from "../../helpers/store-targets.js";

const BOT = "U0FAKEBOT1";
const TEAM = "T0FAKE0001";
const CHANNEL = "C1";
const SIGNING_SECRET = "fake-signing-secret";
const APPROVE = "glassbox_approve";
const DENY = "glassbox_deny";

for (const target of TARGETS) {
  describe.runIf(target.available)(`Slack ingress: ${target.name}`, () => {
    let harness: IngressHarness;
    let fake: FakeSlack;
    let model: ScriptedModelServer;
    let ingress: SlackIngress;
    let url: string;
    let slack: SlackConfig;
    const savedEnv = { ...process.env };

    beforeEach(async () => {
      // A model anyone could reach from this process's settings: ingress must never call it.
      model = await startScriptedModelServer({ script: [{ content: "an answer nobody should ask for" }] });
      Object.assign(process.env, { OPENAI_BASE_URL: model.url, OPENAI_API_KEY: "sk-test", LLM_MODEL: "gpt-4o-mini" });
      harness = await target.open();
      fake = await startFakeSlack({ signingSecret: SIGNING_SECRET, botUserId: BOT, teamId: TEAM });
      slack = {
        botToken: "xoxb-fake-bot-token",
        signingSecret: SIGNING_SECRET,
        port: 0,
        host: "127.0.0.1",
        apiUrl: fake.apiUrl,
        allowedChannels: [],
        approvers: [],
      };
      ingress = await startSlackIngress({ ...harness.ingress, slack, log: harness.log, counter: harness.counter });
      url = ingress.eventsUrl as string;
    });

    afterEach(async () => {
      await ingress?.stop();
      await fake?.close();
      await harness?.close();
      expect(model.requests).toHaveLength(0);
      await model?.close();
      process.env = { ...savedEnv };
    });

    const session = (threadTs: string) => `slack:${TEAM}:${CHANNEL}:${threadTs}`;
    /** A mention in a thread (the thread's first message when ts is the thread's own); resolves with Slack's answer. */
    const mentionEvent = (text: string, ts: string, threadTs?: string) => ({
      type: "app_mention",
      user: "U1",
      channel: CHANNEL,
      text: `<@${BOT}> ${text}`,
      ts,
      ...(threadTs ? { thread_ts: threadTs } : {}),
    });
    async function mention(
      text: string,
      thread: { ts?: string; threadTs?: string },
      options: { eventId?: string; retryNum?: number; signingSecret?: string; timestamp?: number; to?: string } = {},
    ) {
      const ts = thread.ts ?? fake.nextTs();
      const sent = await fake.sendEvent(options.to ?? url, mentionEvent(text, ts, thread.threadTs), options);
      return { ...sent, ts, key: `slack:event:${sent.eventId}` };
    }

    it("accepts each of 20 events in 4 threads once, and enqueues each once, in arrival order per thread, without calling the model", async () => {
      const threads = Array.from({ length: 4 }, () => fake.nextTs());
      const sent = await Promise.all(
        threads.map(async (root, thread) => {
          const keys: string[] = [];
          for (let index = 0; index < 5; index++) {
            const delivery = await mention(
              `question ${index} of thread ${thread}`,
              index === 0 ? { ts: root } : { threadTs: root },
            );
            expect(delivery.status).toBe(200); // acknowledged only once accepted
            keys.push(delivery.key);
          }
          return keys;
        }),
      );
      const turns = await harness.waitForTurns(20);
      for (const [thread, root] of threads.entries()) {
        expect(keysOf(turns, session(root))).toEqual(sent[thread]);
        const runs = turns.filter((turn) => turn.conversation === session(root)).map((turn) => workOf(turn));
        for (const [index, work] of runs.entries()) {
          expect(work).toMatchObject({
            kind: "message",
            sessionId: session(root),
            eventIds: [sent[thread]?.[index], expect.stringMatching(/^slack:message:C1:/)],
          });
          expect(await harness.store.run(runOf(work))).toMatchObject({
            status: "accepted",
            userId: "U1",
            input: `question ${index} of thread ${thread}`,
          });
        }
        const history = await harness.store.sessionHistory(session(root));
        expect(history.messages.map((stored) => stored.message.content)).toEqual(
          [0, 1, 2, 3, 4].map((index) => `question ${index} of thread ${thread}`),
        );
      }
      // Ids only: the content is in the store.
      expect(turns.every((turn) => !JSON.stringify(turn.payload).includes("question"))).toBe(true);
      expect(harness.turns).toHaveLength(20);
    });

    it("adds nothing for a retried or duplicated delivery of an accepted event; a retry whose first delivery never arrived is accepted once", async () => {
      const root = fake.nextTs();
      const first = await mention("first", { ts: root });
      const retried = await mention("first", { ts: root }, { eventId: first.eventId, retryNum: 1 });
      const again = await mention("first", { ts: root }, { eventId: first.eventId });
      // The same message under another event id (a second delivery path): its channel and ts are claimed.
      const copy = await mention("first", { ts: root });
      const lost = await mention("second, whose first delivery was lost", { threadTs: root }, { retryNum: 2 });
      const last = await mention("third", { threadTs: root });
      for (const delivery of [first, retried, again, copy, lost, last]) expect(delivery.status).toBe(200);
      await harness.waitForTurns(3);
      expect(keysOf(harness.turns, session(root))).toEqual([first.key, lost.key, last.key]);
      expect((await harness.store.runsOfSession(session(root))).map((run) => run.input)).toEqual([
        "first",
        "second, whose first delivery was lost",
        "third",
      ]);
      expect(harness.turns).toHaveLength(3);
    });

    it("acknowledges only what it wrote: a delivery it could not accept gets a 500, and Slack's retry, reaching another ingress process, is accepted once", async () => {
      const other = await startSlackIngress({
        store: await harness.another(),
        queue: harness.queue,
        slack,
        log: harness.log,
        counter: harness.counter,
      });
      try {
        await harness.store.close(); // this process's database handle is gone
        const root = fake.nextTs();
        const failed = await mention("hello", { ts: root });
        expect(failed.status).toBe(500);
        const retried = await mention(
          "hello",
          { ts: root },
          { eventId: failed.eventId, retryNum: 1, to: other.eventsUrl },
        );
        const next = await mention("and then", { threadTs: root }, { to: other.eventsUrl });
        expect([retried.status, next.status]).toEqual([200, 200]);
        await harness.waitForTurns(2);
        expect(keysOf(harness.turns, session(root))).toEqual([failed.key, next.key]);
      } finally {
        await other.stop();
      }
    });

    it("in Socket Mode, the same event on two connections (two ingress processes) is accepted once", async () => {
      const lines: Array<{ msg: string }> = [];
      const log = pino(
        { level: "debug" },
        { write: (line: string) => void lines.push(JSON.parse(line) as { msg: string }) },
      );
      const socket: SlackConfig = { ...slack, appToken: "xapp-1-fake-app-token", signingSecret: undefined };
      const first = await startSlackIngress({ ...harness.ingress, slack: socket, log, counter: harness.counter });
      const second = await startSlackIngress({
        store: await harness.another(),
        queue: harness.queue,
        slack: socket,
        log,
        counter: harness.counter,
      });
      try {
        await fake.waitForSocket(2);
        const root = fake.nextTs();
        const delivered = await fake.sendSocketEvent(mentionEvent("over a socket", root), { connection: 0 });
        expect(delivered.acked).toBe(true);
        await harness.waitForTurns(1);
        const copy = await fake.sendSocketEvent(mentionEvent("over a socket", root), {
          eventId: delivered.eventId,
          connection: 1,
          retryAttempt: 1,
          retryReason: "timeout",
        });
        expect(copy.acked).toBe(true);
        await vi.waitFor(
          () => expect(lines.map((line) => line.msg)).toContain("Slack ingress: already accepted, nothing added"),
          WAIT,
        );
        await fake.sendSocketEvent(mentionEvent("next", fake.nextTs(), root), { eventId: "EvNEXT", connection: 1 });
        await harness.waitForTurns(2);
        expect(keysOf(harness.turns, session(root))).toEqual([
          `slack:event:${delivered.eventId}`,
          "slack:event:EvNEXT",
        ]);
      } finally {
        await first.stop();
        await second.stop();
      }
    });

    it("answers itself and enqueues nothing for an empty mention, a bot's message, or a channel it does not answer in (said once per channel)", async () => {
      const limited = await startSlackIngress({
        ...harness.ingress,
        slack: { ...slack, allowedChannels: ["C9"] },
        log: harness.log,
        counter: harness.counter,
      });
      try {
        const root = fake.nextTs();
        const empty = await mention("", { ts: root });
        await fake.waitForCall(
          "chat.postMessage",
          (call) => call.args.thread_ts === root && /^Ask me something after the mention/.test(String(call.args.text)),
          10_000,
        );
        const fromBot = await fake.sendEvent(url, {
          type: "app_mention",
          user: "U2",
          bot_id: "B0OTHER",
          channel: CHANNEL,
          text: `<@${BOT}> hi`,
          ts: fake.nextTs(),
          thread_ts: root,
        });
        const elsewhere = [
          await mention("here?", { ts: fake.nextTs() }, { to: limited.eventsUrl }),
          await mention("and here?", { ts: fake.nextTs() }, { to: limited.eventsUrl }),
        ];
        for (const delivery of [empty, fromBot, ...elsewhere]) expect(delivery.status).toBe(200);
        await fake.waitForCall(
          "chat.postMessage",
          (call) => call.args.text === "I only answer in <#C9>. Mention me there, or send me a direct message.",
          10_000,
        );
        const next = await mention("a real question", { threadTs: root });
        await harness.waitForTurns(1);
        expect(keysOf(harness.turns, session(root))).toEqual([next.key]);
        expect(harness.turns).toHaveLength(1);
        expect(
          fake.callsTo("chat.postMessage").filter((call) => String(call.args.text).startsWith("I only answer in")),
        ).toHaveLength(1);
      } finally {
        await limited.stop();
      }
    });

    it("refuses a request with a bad signature or a stale timestamp, and enqueues nothing for it", async () => {
      const root = fake.nextTs();
      const forged = await mention("forged", { ts: root }, { signingSecret: "not-the-signing-secret" });
      const stale = await mention("stale", { threadTs: root }, { timestamp: Math.floor(Date.now() / 1000) - 3_600 });
      expect(forged.status).toBe(401);
      expect(stale.status).toBe(401);
      const genuine = await mention("genuine", { threadTs: root });
      expect(genuine.status).toBe(200);
      await harness.waitForTurns(1);
      expect(keysOf(harness.turns, session(root))).toEqual([genuine.key]);
      expect((await harness.store.runsOfSession(session(root))).map((run) => run.input)).toEqual(["genuine"]);
      // The forged event's id was never claimed: delivered genuinely, it is accepted.
      const redelivered = await mention("forged", { ts: root }, { eventId: forged.eventId });
      expect(redelivered.status).toBe(200);
      await harness.waitForTurns(2);
      expect(keysOf(harness.turns, session(root))).toEqual([genuine.key, redelivered.key]);
    });

    it("enqueues exactly one resume for the click that readies a run, even when two clicks race, and none for a click that leaves an approval pending", async () => {
      const click = (approval: { id: string }, buttonsTs: string, userId = "U1", actionId = APPROVE) =>
        fake.sendBlockAction(url, { userId, channel: CHANNEL, messageTs: buttonsTs, actionId, value: approval.id });
      const paused = async (runId: string, calls: string[]) => {
        const root = fake.nextTs();
        const approvals = await pausedRun(harness.store, runId, session(root), calls);
        const buttonsTs = fake.nextTs();
        for (const approval of approvals)
          await harness.store.attachApprovalMessage(approval.id, `${CHANNEL}:${buttonsTs}`);
        return { root, approvals, buttonsTs };
      };

      // One approval, clicked twice at once (Approve and Deny): one decides, and only it resumes the run.
      const one = await paused("run_one", ["call_a"]);
      const approval = one.approvals[0] as { id: string };
      const answers = await Promise.all([
        click(approval, one.buttonsTs, "U1", APPROVE),
        click(approval, one.buttonsTs, "U1", DENY),
      ]);
      expect(answers.map((answer) => answer.status)).toEqual([200, 200]);
      const after = await mention("after the clicks", { threadTs: one.root });
      await harness.waitForTurns(2);
      expect(keysOf(harness.turns, session(one.root))).toEqual(["resume:run_one", after.key]);
      expect(workOf(harness.turns[0] as Turn)).toEqual({
        kind: "resume",
        runId: "run_one",
        sessionId: session(one.root),
        approvalId: approval.id,
      });
      expect((await harness.store.approval(approval.id))?.status).toMatch(/^(approved|denied)$/);
      await fake.waitForCall("chat.postEphemeral", (call) => call.args.text === "This was already decided.", 10_000);
      await fake.waitForCall("chat.update", (call) => call.args.ts === one.buttonsTs, 10_000);

      // Two approvals: the first decision leaves the run waiting, so nothing is enqueued; the second readies it.
      const two = await paused("run_two", ["call_1", "call_2"]);
      expect((await click(two.approvals[0] as { id: string }, two.buttonsTs)).status).toBe(200);
      const between = await mention("between the clicks", { threadTs: two.root });
      await harness.waitForTurns(3);
      expect((await click(two.approvals[1] as { id: string }, two.buttonsTs)).status).toBe(200);
      await harness.waitForTurns(4);
      expect(keysOf(harness.turns, session(two.root))).toEqual([between.key, "resume:run_two"]);

      // Two approvals of one run decided at the same moment: exactly one of the decisions resumes it.
      const three = await paused("run_three", ["call_1", "call_2"]);
      const both = await Promise.all(three.approvals.map((each) => click(each, three.buttonsTs)));
      expect(both.map((answer) => answer.status)).toEqual([200, 200]);
      const last = await mention("after both", { threadTs: three.root });
      await harness.waitForTurns(6);
      expect(keysOf(harness.turns, session(three.root))).toEqual(["resume:run_three", last.key]);
      expect(harness.turns).toHaveLength(6);
    });

    it('"stop" in a thread asks its runs to stop (heard on the database), says so, and enqueues nothing', async () => {
      const notices: CancelNotice[] = [];
      const unwatch = await harness.store.watchCancels((notice) => void notices.push(notice));
      try {
        const root = fake.nextTs();
        const question = await mention("a long question", { ts: root });
        const [turn] = await harness.waitForTurns(1);
        const runId = runOf(workOf(turn as Turn));
        const stop = await mention("stop", { threadTs: root });
        expect(stop.status).toBe(200);
        await fake.waitForCall(
          "chat.postMessage",
          (call) => call.args.text === "Stopping." && call.args.thread_ts === root,
          10_000,
        );
        expect(await harness.store.cancelRequested(runId)).toBe(true);
        await vi.waitFor(() => expect(notices).toContainEqual({ sessionId: session(root), runIds: [runId] }), WAIT);

        const quiet = fake.nextTs();
        await mention("stop!", { ts: quiet });
        await fake.waitForCall(
          "chat.postMessage",
          (call) => call.args.text === "Nothing is running here." && call.args.thread_ts === quiet,
          10_000,
        );
        const next = await mention("next question", { threadTs: root });
        await harness.waitForTurns(2);
        expect(keysOf(harness.turns, session(root))).toEqual([question.key, next.key]);
        expect(harness.turns).toHaveLength(2);
      } finally {
        await unwatch();
      }
    });
  });
}
