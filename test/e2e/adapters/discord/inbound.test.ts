// Discord ingress end to end: real discord.js over the fake Discord's gateway and REST, on the real
// store and run queue (SQLite with the in-process queue always; PostgreSQL when
// GLASSBOX_TEST_DATABASE_URL is set), with a worker that only records the turns it gets. "Nothing
// was enqueued" is checked by a later message of the same conversation, which would reach the
// worker second.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { startDiscordIngress, type DiscordIngress } from "../../../../src/adapters/discord/discord-inbound.js";
import { workOf } from "../../../../src/conversations/turns.js";
import type { Turn } from "../../../../src/queue/types.js";
import { startFakeDiscord, type FakeDiscord } from "../../../../src/testing/fake-discord.js";
import { startScriptedModelServer, type ScriptedModelServer } from "../../../../src/testing/scripted-model-server.js";
import { keysOf, pausedRunOf, runOf, TARGETS, WAIT, type IngressHarness } from "../../helpers/ingress.js";

const GUILD = "1300000000000000100";
const CHANNEL = "1300000000000000101";
const THREAD = "1300000000000000103";
const DM = "1300000000000000200";
const USER = "1300000000000000300";

for (const target of TARGETS) {
  describe.runIf(target.available)(`Discord ingress: ${target.name}`, () => {
    let harness: IngressHarness;
    let fake: FakeDiscord;
    let model: ScriptedModelServer;
    let ingress: DiscordIngress;

    beforeEach(async () => {
      model = await startScriptedModelServer({ script: [{ content: "an answer nobody should ask for" }] });
      harness = await target.open();
      fake = await startFakeDiscord({
        guilds: [
          {
            id: GUILD,
            name: "Test Guild",
            channels: [
              { id: CHANNEL, name: "general" },
              { id: THREAD, name: "a thread", type: 11, parent_id: CHANNEL },
            ],
          },
        ],
        dmChannels: [{ id: DM, recipientId: USER }],
      });
      ingress = await startDiscordIngress({
        store: harness.store,
        queue: harness.queue,
        discord: { token: fake.token, apiUrl: fake.apiUrl, approvers: [] },
        log: harness.log,
        counter: harness.counter,
      });
    });

    afterEach(async () => {
      await ingress?.stop();
      await fake?.close();
      await harness?.close();
      expect(model.requests).toHaveLength(0);
      await model?.close();
    });

    const mention = (text: string, channelId = CHANNEL) =>
      fake.sendMessage({
        channelId,
        guildId: GUILD,
        authorId: USER,
        content: `<@${fake.botUserId}> ${text}`,
        mentionsBot: true,
      });
    const replies = (interactionId: string) =>
      fake.interactionResponses(interactionId).map((request) => {
        const body = (request.body ?? {}) as { content?: string; data?: { content?: string } };
        return body.data?.content ?? body.content;
      });
    async function command(name: string, channelId = CHANNEL) {
      const run = await fake.runCommand({ channelId, guildId: GUILD, userId: USER, name });
      await vi.waitFor(() => expect(replies(run.interactionId).filter(Boolean)).not.toHaveLength(0), WAIT);
      return replies(run.interactionId).find(Boolean);
    }

    it("accepts each message to the bot once, in order per conversation (channel, thread, DM), and a gateway replay adds nothing, without calling the model", async () => {
      const sent: Array<{ id: string; session: string; text: string }> = [];
      for (let index = 0; index < 3; index++) {
        sent.push({
          ...(await mention(`channel ${index}`)),
          session: `discord:${GUILD}:${CHANNEL}`,
          text: `channel ${index}`,
        });
        sent.push({
          ...(await mention(`thread ${index}`, THREAD)),
          session: `discord:${GUILD}:${CHANNEL}:${THREAD}`,
          text: `thread ${index}`,
        });
      }
      const direct = await fake.sendMessage({ channelId: DM, authorId: USER, content: "a direct question" });
      await fake.sendMessage({
        channelId: CHANNEL,
        guildId: GUILD,
        authorId: USER,
        content: "people talking among themselves",
      });
      const turns = await harness.waitForTurns(7);
      for (const session of [`discord:${GUILD}:${CHANNEL}`, `discord:${GUILD}:${CHANNEL}:${THREAD}`]) {
        const mine = sent.filter((message) => message.session === session);
        expect(keysOf(turns, session)).toEqual(mine.map((message) => `discord:message:${message.id}`));
        expect((await harness.store.runsOfSession(session)).map((run) => run.input)).toEqual(
          mine.map((message) => message.text),
        );
      }
      expect(keysOf(turns, `discord:dm:${DM}`)).toEqual([`discord:message:${direct.id}`]);
      expect(
        await harness.store.run(runOf(workOf(turns.find((turn) => turn.conversation === `discord:dm:${DM}`) as Turn))),
      ).toMatchObject({ status: "accepted", userId: USER, input: "a direct question" });

      await fake.redeliver(sent[0]?.id as string); // a replay after a gateway resume
      const next = await mention("after the replay");
      await harness.waitForTurns(8);
      expect(keysOf(harness.turns, `discord:${GUILD}:${CHANNEL}`).slice(-2)).toEqual([
        `discord:message:${sent[4]?.id}`,
        `discord:message:${next.id}`,
      ]);
      expect(harness.turns).toHaveLength(8);
    });

    it("a click that readies a run enqueues one resume; a second click is told it was decided; /stop asks for a cancel; /reset is a turn in its place", async () => {
      const session = `discord:${GUILD}:${CHANNEL}`;
      const [approval] = await pausedRunOf(harness.store, "run_paused", session, USER);
      const buttons = await fake.sendMessage({
        channelId: CHANNEL,
        guildId: GUILD,
        authorId: USER,
        content: "stands in for the bot's buttons",
      });
      await harness.store.attachApprovalMessage(approval?.id ?? "", `${CHANNEL}:${buttons.id}`);
      const first = await fake.clickButton({
        channelId: CHANNEL,
        guildId: GUILD,
        userId: USER,
        messageId: buttons.id,
        customId: `glassbox:approve:${approval?.id}`,
      });
      await harness.waitForTurns(1);
      expect(workOf(harness.turns[0] as Turn)).toEqual({
        kind: "resume",
        runId: "run_paused",
        sessionId: session,
        approvalId: approval?.id,
      });
      const second = await fake.clickButton({
        channelId: CHANNEL,
        guildId: GUILD,
        userId: USER,
        messageId: buttons.id,
        customId: `glassbox:deny:${approval?.id}`,
      });
      await vi.waitFor(() => expect(replies(second.interactionId)).toContain("This was already decided."), WAIT);
      expect(replies(first.interactionId)).not.toContain("This was already decided.");
      expect((await harness.store.approval(approval?.id ?? ""))?.status).toBe("approved");

      const question = await mention("a long question");
      await harness.waitForTurns(2);
      expect(await command("stop")).toBe("Stopping.");
      expect(await harness.store.cancelRequested(runOf(workOf(harness.turns[1] as Turn)))).toBe(true);
      expect(await command("reset")).toBe("Started a new conversation here; I no longer see what was said before.");
      const after = await mention("after the reset");
      await harness.waitForTurns(4);
      const keys = keysOf(harness.turns, session);
      expect(keys[0]).toBe("resume:run_paused");
      expect(keys[1]).toBe(`discord:message:${question.id}`);
      expect(workOf(harness.turns[2] as Turn)).toMatchObject({ kind: "reset", sessionId: session });
      expect(keys[3]).toBe(`discord:message:${after.id}`);
      expect(harness.turns).toHaveLength(4);
    });
  });
}
