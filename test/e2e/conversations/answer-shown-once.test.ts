// An answer is shown at most once, even when its worker dies right after posting it: the worker
// posted the answer (with its feedback buttons) and was killed before claiming `answered:<runId>`,
// so the redelivered turn finds the run ended and the claim free. Before posting the stored answer
// it reads the conversation back (Slack conversations.replies / .history, Discord GET channel
// messages) and finds the answer there: nothing is posted, the claim is taken. A conversation it
// cannot read (a missing scope, no access) is said once, and the answer posted as before.
// The real queued turns (Conversations.runQueued), loop and store port (SQLite; PostgreSQL too when
// GLASSBOX_TEST_DATABASE_URL is set), the real WebClient and discord.js REST against the fakes.
import { Writable } from "node:stream";
import { webApi } from "@slack/bolt";
import type { WebClient } from "@slack/web-api";
import { Client } from "discord.js";
import { afterEach, describe, expect, it } from "vitest";
import { createConversations, type ChatSurface, type Conversations } from "../../../src/conversations/conversations.js";
import { runAgent, type AgentConfig, type RunResult } from "../../../src/agent/loop.js";
import { createMemory } from "../../../src/agent/memory.js";
import { createTokenCounter } from "../../../src/agent/tokens.js";
import { createTraceRecorder } from "../../../src/agent/trace.js";
import type { Message } from "../../../src/agent/types.js";
import { openDiscordSurface } from "../../../src/adapters/discord/discord-surface.js";
import { placeOf } from "../../../src/adapters/slack/slack-events.js";
import { openSlackSurface } from "../../../src/adapters/slack/slack-surface.js";
import { messageTurn, workOf, type TurnWork } from "../../../src/conversations/turns.js";
import { createLogger, type Logger } from "../../../src/logger.js";
import type { AnyStorePort } from "../../../src/store/index.js";
import { DEFAULT_GUILD, startFakeDiscord, type FakeDiscord } from "../../../src/testing/fake-discord.js";
import { startFakeSlack, type FakeSlack } from "../../../src/testing/fake-slack.js";
import { createToolRegistry } from "../../../src/tools/registry.js";
import { closeServers, startServer } from "../../helpers/agent.js";
import { testModel } from "../../helpers/memory.js";
import { runRecord, TARGETS, useContract } from "../helpers/store-targets.js";

const counter = await createTokenCounter("o200k_base");
const USER = "U1";
const TEAM = "T0FAKE0001";
const ANSWER = "The answer is 42.";
const again = { signal: new AbortController().signal, delivery: 2 };

const opened: Array<{ close(): Promise<unknown> | unknown }> = [];
afterEach(async () => {
  for (const handle of opened.splice(0).reverse()) await handle.close();
  await closeServers();
});

/** A logger whose lines the test reads. */
function recordingLogger(): { log: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split("\n").filter(Boolean))
        lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { log: createLogger({ level: "warn", destination }), lines };
}

for (const target of TARGETS) {
  describe(`an answer is shown once, on ${target.name}`, () => {
    const contract = useContract(target);

    /** The store, the agent, and the worker's conversations showing runs on `openSurface`; errors they report are kept. */
    async function setUp(openSurface: (sessionId: string, userId: string) => ChatSurface, answer = ANSWER) {
      const server = await startServer({ script: () => ({ content: answer }) });
      const store = await contract.open();
      const model = testModel(server);
      const memory = createMemory({ store, model, counter, budgetTokens: 12_000 });
      const agent: AgentConfig = {
        model,
        tools: createToolRegistry([]),
        memory,
        trace: createTraceRecorder(store, { estimateTokens: memory.estimate }),
        approve: async () => "pending",
      };
      const errors: Array<{ error: unknown; context: string }> = [];
      const conversations = createConversations(agent, store, {
        openSurface,
        onError: (error, context) => void errors.push({ error, context }),
      });
      return { server, store, agent, conversations, errors };
    }

    /** What ingress does with a message: its run accepted and its message stored; the turn it enqueues. */
    async function accept(
      store: AnyStorePort,
      sessionId: string,
      eventId: string,
    ): Promise<Extract<TurnWork, { kind: "message" }>> {
      const input = "What is six times seven?";
      const run = runRecord(`run_${eventId}`, sessionId, USER, input);
      const message = {
        message: { role: "user", content: input } as Message,
        tokens: counter.message({ role: "user", content: input }),
      };
      expect(await store.acceptEvent({ eventIds: [eventId], run, message })).toMatchObject({ kind: "accepted" });
      return workOf(messageTurn(run, [eventId])) as Extract<TurnWork, { kind: "message" }>;
    }

    /**
     * The first delivery's worker: it ran the turn to its end (committed) and died before posting, or,
     * with `post`, right after showing the run on that surface, before claiming. `cancelled`: the run was stopped.
     */
    async function diedAfterTheRun(
      agent: AgentConfig,
      work: Extract<TurnWork, { kind: "message" }>,
      post?: ChatSurface,
      options: { cancelled?: boolean } = {},
    ): Promise<RunResult> {
      const signal = options.cancelled ? AbortSignal.abort() : new AbortController().signal;
      const task = {
        runId: work.runId,
        sessionId: work.sessionId,
        userId: USER,
        input: "What is six times seven?",
        inputStored: true,
        signal,
      };
      const result = await runAgent(agent, { ...task, ...(post ? { onEvent: (event) => post.onEvent(event) } : {}) });
      expect(result.stopReason).toBe(options.cancelled ? "cancelled" : "final");
      await post?.finish(result); // no `posted`: the claim was never made
      return result;
    }

    const claimFree = async (store: AnyStorePort, runId: string) => store.claim(`answered:${runId}`);

    describe("in a Slack thread", () => {
      let fake: FakeSlack;
      let client: WebClient;
      let conversations: Conversations;
      const channel = "C1";
      let root: string;
      let sessionId: string;

      async function slackSetUp(options: { refuseReading?: boolean; answer?: string } = {}) {
        fake = await startFakeSlack({
          teamId: TEAM,
          ...(options.refuseReading ? { refuse: ["conversations.replies"] } : {}),
        });
        opened.push(fake);
        client = new webApi.WebClient("xoxb-fake-bot-token", { slackApiUrl: fake.apiUrl, retryConfig: { retries: 0 } });
        root = fake.addUserMessage(channel, { user: USER, text: "<@U0FAKEBOT1> what is six times seven?" });
        sessionId = `slack:${TEAM}:${channel}:${root}`;
        const { log } = recordingLogger();
        const openSurface = (session: string, userId: string) =>
          openSlackSurface(client, placeOf(session, userId), log);
        const set = await setUp(openSurface, options.answer);
        conversations = set.conversations;
        return { ...set, openSurface, surface: () => openSurface(sessionId, USER) };
      }
      const answers = () =>
        fake.messages(channel, root).filter((message) => message.bot_id && (message.text ?? "").includes(ANSWER));

      it("a redelivered turn whose answer its dead worker posted finds it in the thread: nothing is posted again, the claim is taken", async () => {
        const { store, agent, surface, errors } = await slackSetUp();
        const work = await accept(store, sessionId, "EvS1");
        await diedAfterTheRun(agent, work, surface());
        expect(answers()).toHaveLength(1);
        const postsBefore = fake.callsTo("chat.postMessage").length;

        expect(await conversations.runQueued(work, again)).toBeUndefined();
        expect(answers()).toHaveLength(1);
        expect(fake.callsTo("chat.postMessage")).toHaveLength(postsBefore);
        expect(fake.callsTo("conversations.replies").map((call) => call.args)).toEqual([
          expect.objectContaining({ channel, ts: root }),
        ]);
        expect(await claimFree(store, work.runId)).toBe(false);
        expect(errors).toEqual([]);

        // Delivered once more, it looks no further: the claim is taken.
        await conversations.runQueued(work, { ...again, delivery: 3 });
        expect(fake.callsTo("conversations.replies")).toHaveLength(1);
        expect(answers()).toHaveLength(1);
      });

      it("a redelivered turn whose answer was never posted finds none in the thread and posts it, once, with its feedback buttons", async () => {
        const { store, agent, server } = await slackSetUp();
        const work = await accept(store, sessionId, "EvS2");
        await diedAfterTheRun(agent, work);
        expect(answers()).toHaveLength(0);

        await conversations.runQueued(work, again);
        const posted = answers();
        expect(posted).toHaveLength(1);
        expect(JSON.stringify(posted[0]?.blocks)).toContain(`up:${work.runId}`);
        expect(await claimFree(store, work.runId)).toBe(false);
        expect(server.requests).toHaveLength(1); // the stored answer, no model call
      });

      it("a streamed answer (its buttons set when the stream stopped) is found as well", async () => {
        const long =
          `${ANSWER} ${"It follows from multiplying six by seven, which gives forty-two. ".repeat(12)}`.trim();
        const { store, agent, surface } = await slackSetUp({ answer: long });
        const work = await accept(store, sessionId, "EvS5");
        await diedAfterTheRun(agent, work, surface());
        expect(fake.callsTo("chat.startStream")).toHaveLength(1);
        expect(answers()).toHaveLength(1);

        await conversations.runQueued(work, again);
        expect(answers()).toHaveLength(1);
        expect(fake.callsTo("chat.startStream")).toHaveLength(1);
        expect(await claimFree(store, work.runId)).toBe(false);
      });

      it("an outcome without buttons (Stopped.) is not looked for: posting it again says nothing new", async () => {
        const { store, agent, surface } = await slackSetUp();
        const work = await accept(store, sessionId, "EvS6");
        await diedAfterTheRun(agent, work, surface(), { cancelled: true });
        const stopped = () => fake.messages(channel, root).filter((message) => message.text === "Stopped.");
        expect(stopped()).toHaveLength(1);

        await conversations.runQueued(work, again);
        expect(stopped()).toHaveLength(2);
        expect(fake.callsTo("conversations.replies")).toHaveLength(0);
        expect(await claimFree(store, work.runId)).toBe(false);
      });

      it("a thread it cannot read (missing_scope) is said once, naming the scope, and the answer is posted again", async () => {
        const { store, agent, surface, errors } = await slackSetUp({ refuseReading: true });
        const work = await accept(store, sessionId, "EvS3");
        await diedAfterTheRun(agent, work, surface());

        await conversations.runQueued(work, again);
        expect(answers()).toHaveLength(2); // as before: better twice than lost
        expect(await claimFree(store, work.runId)).toBe(false);
        expect(errors).toHaveLength(1);
        expect((errors[0]?.error as Error).message).toMatch(/channels:history scope/);
      });

      it("in a top-level DM it reads the channel's history and finds the answer there", async () => {
        const { store, agent, openSurface } = await slackSetUp();
        const dm = "D1";
        const dmSession = `slack:${TEAM}:${dm}:main`;
        fake.addUserMessage(dm, { user: USER, text: "what is six times seven?" });
        const work = await accept(store, dmSession, "EvS4");
        await diedAfterTheRun(agent, work, openSurface(dmSession, USER));
        const inDm = () =>
          fake.messages(dm).filter((message) => message.bot_id && (message.text ?? "").includes(ANSWER));
        expect(inDm()).toHaveLength(1);

        await conversations.runQueued(work, again);
        expect(inDm()).toHaveLength(1);
        expect(fake.callsTo("conversations.history").map((call) => call.args)).toEqual([
          expect.objectContaining({ channel: dm }),
        ]);
        expect(await claimFree(store, work.runId)).toBe(false);
      });
    });

    describe("in a Discord channel", () => {
      let fake: FakeDiscord;
      let conversations: Conversations;
      const guild = DEFAULT_GUILD.id;
      const channel = DEFAULT_GUILD.channels[0]?.id as string;
      const sessionId = `discord:${guild}:${channel}`;

      async function discordSetUp() {
        fake = await startFakeDiscord();
        opened.push(fake);
        // A worker's client: REST only, no gateway.
        const client = new Client({ intents: [], rest: { api: fake.apiUrl } });
        client.rest.setToken(fake.token);
        opened.push({ close: () => client.destroy() });
        const { log } = recordingLogger();
        const openSurface = () => openDiscordSurface(client, channel, log);
        const set = await setUp(openSurface);
        conversations = set.conversations;
        return { ...set, surface: openSurface };
      }
      const answers = () =>
        fake
          .messages(channel)
          .filter((message) => message.author.id === fake.botUserId && message.content.includes(ANSWER));
      const listings = () => fake.requestsTo("GET", `/channels/${channel}/messages`);

      it("a redelivered turn whose answer its dead worker posted finds it among the channel's messages: nothing is posted again, the claim is taken", async () => {
        const { store, agent, surface, errors } = await discordSetUp();
        await fake.sendMessage({
          channelId: channel,
          guildId: guild,
          authorId: "1100000000000000201",
          content: "<@bot> what is six times seven?",
          mentionsBot: true,
        });
        const work = await accept(store, sessionId, "EvD1");
        await diedAfterTheRun(agent, work, surface());
        expect(answers()).toHaveLength(1);

        await conversations.runQueued(work, again);
        expect(answers()).toHaveLength(1);
        expect(listings()).toHaveLength(1);
        expect(listings()[0]?.query).toMatchObject({ limit: "100", after: expect.stringMatching(/^\d+$/) });
        expect(await claimFree(store, work.runId)).toBe(false);
        expect(errors).toEqual([]);
      });

      it("a redelivered turn whose answer was never posted posts it, once, with its feedback buttons", async () => {
        const { store, agent } = await discordSetUp();
        const work = await accept(store, sessionId, "EvD2");
        await diedAfterTheRun(agent, work);

        await conversations.runQueued(work, again);
        const posted = answers();
        expect(posted).toHaveLength(1);
        expect(JSON.stringify(posted[0]?.components)).toContain(`glassbox:feedback:up:${work.runId}`);
        expect(await claimFree(store, work.runId)).toBe(false);
      });

      it("a channel it cannot read (Missing Access) is said once, and the answer is posted again", async () => {
        const { store, agent, surface, errors } = await discordSetUp();
        const work = await accept(store, sessionId, "EvD3");
        await diedAfterTheRun(agent, work, surface());
        fake.refuse("GET", `/channels/${channel}/messages`, { status: 403, code: 50001, message: "Missing Access" });

        await conversations.runQueued(work, again);
        expect(answers()).toHaveLength(2);
        expect(await claimFree(store, work.runId)).toBe(false);
        expect(errors).toHaveLength(1);
        expect((errors[0]?.error as Error).message).toMatch(/Missing Access/);
      });
    });
  });
}
