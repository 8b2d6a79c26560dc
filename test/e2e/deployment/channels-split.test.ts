// Per-channel settings with ingress and a worker in processes of their own on PostgreSQL (the real
// src/main.ts, the fake Slack, the scripted model): the worker reads examples/channels.yaml, so a
// mention in #support may look an order up and one in #random may not, whichever process received it;
// a click on a two-person card through ingress is counted, and a second person's runs the call; a
// Slack user group named as approvers is looked up by ingress at the click; and a channel's budget
// spent through one worker holds in another, which reads it from the store.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it, vi } from "vitest";
import { startFakeSlack, type FakeSlack } from "../../../src/testing/fake-slack.js";
import {
  startScriptedModelServer,
  type ChatCompletionRequestBody,
  type Script,
  type ScriptedModelServer,
} from "../../../src/testing/scripted-model-server.js";
import {
  createTestDatabase,
  NEEDS_DATABASE,
  TEST_DATABASE_URL,
  type TestDatabase,
} from "../fixtures/queue-database.js";
import { fakeSlackEnvironment, startRoleProcess, type RoleProcess } from "../fixtures/role-processes.js";

const BOT = "U0FAKEBOT1";
const SECRET = "channels-split-signing-secret";
const WAIT = { timeout: 30_000, interval: 50 };
const EXAMPLE = fileURLToPath(new URL("../../../examples/channels.yaml", import.meta.url));

function lookUpThenAnswer(body: ChatCompletionRequestBody) {
  const last = body.messages.at(-1);
  if (last?.role === "tool") return { content: `tool said: ${String(last.content).slice(0, 200)}` };
  return { toolCalls: [{ name: "get_order_status", arguments: JSON.stringify({ order_id: "20240410003" }) }] };
}

describe.runIf(Boolean(TEST_DATABASE_URL))(
  `per-channel settings across ingress and a worker (${NEEDS_DATABASE})`,
  () => {
    const processes: RoleProcess[] = [];
    const cleanups: Array<() => Promise<void> | void> = [];
    afterEach(async () => {
      for (const running of processes.splice(0)) await running.kill();
      for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    }, 30_000);

    /**
     * A database of its own, the fake Slack, the scripted model and an ingress process; workers (started
     * with `startWorker`) read `settings` (a path, or the file's text written beside them); the fake
     * Slack's workspace has `userGroups`.
     */
    async function deploy(
      script: Script,
      settings: { path: string } | { text: string },
      userGroups: Record<string, string[]> = {},
    ) {
      const directory = mkdtempSync(join(tmpdir(), "glassbox-channels-split-"));
      cleanups.push(() => rmSync(directory, { recursive: true, force: true }));
      const file = "path" in settings ? settings.path : join(directory, "channels.yaml");
      if ("text" in settings) writeFileSync(file, settings.text);
      const database: TestDatabase = await createTestDatabase(TEST_DATABASE_URL as string);
      cleanups.push(() => database.drop());
      const fake: FakeSlack = await startFakeSlack({ signingSecret: SECRET, botUserId: BOT, userGroups });
      cleanups.push(() => fake.close());
      const model: ScriptedModelServer = await startScriptedModelServer({ script });
      cleanups.push(() => model.close());
      const slack = fakeSlackEnvironment(fake.apiUrl, SECRET);
      // Ingress reads the settings too: its API and pages say how their budgets stand.
      const ingress = await startRoleProcess("ingress", {
        GLASSBOX_DATABASE_URL: database.url,
        ...slack,
        GLASSBOX_CHANNELS: file,
      });
      processes.push(ingress);
      const receiving = ingress.lines.find((line) => /^ingress: receiving/.test(line.msg));
      const eventsUrl = receiving?.slack as string;
      const apiUrl = receiving?.api as string;
      const startWorker = async () => {
        const worker = await startRoleProcess("worker", {
          GLASSBOX_DATABASE_URL: database.url,
          ...slack,
          OPENAI_BASE_URL: model.url,
          OPENAI_API_KEY: "sk-test-channels-split",
          GLASSBOX_DEMO: "true",
          GLASSBOX_SHOP_DB: join(directory, "shop.db"),
          GLASSBOX_CHANNELS: file,
        });
        processes.push(worker);
        return worker;
      };
      /** A mention sent to ingress; its thread's ts. */
      const mention = async (channel: string, text: string) => {
        const ts = fake.nextTs();
        const event = { type: "app_mention", user: "U1", channel, text: `<@${BOT}> ${text}`, ts };
        expect((await fake.sendEvent(eventsUrl, event, { signingSecret: SECRET })).status).toBe(200);
        return ts;
      };
      /** The bot's message in a thread that holds `expected`, once it is there. */
      const reply = (channel: string, ts: string, expected: string) =>
        vi.waitFor(() => {
          const answer = fake.messages(channel, ts).find((message) => message.text?.includes(expected));
          if (!answer) throw new Error(`no answer in ${channel} yet`);
          return answer.text ?? "";
        }, WAIT);
      return { fake, model, eventsUrl, apiUrl, startWorker, mention, reply };
    }

    it("#support may look an order up and #random may not", async () => {
      const { startWorker, mention, reply } = await deploy(lookUpThenAnswer, { path: EXAMPLE });
      await startWorker();
      const ask = async (channel: string) =>
        reply(channel, await mention(channel, "where is order 20240410003?"), "tool said:");
      expect(await ask("C0SUPPORT")).toContain('"status":"success"');
      expect(await ask("C0RANDOM")).toContain("tool_not_found");
    }, 90_000);

    it("the two-person rule across ingress and a worker: a click through ingress is counted on the card, a second person's runs the call", async () => {
      const cancel = { order_id: "20240410003", reason: "ordered twice" };
      const text = [
        "channels:",
        "  C0FIN:",
        "    approvers: [U1, U2, U3]",
        "    requesterMayApprove: false",
        "    twoPersonRule: [cancel_order]",
        "",
      ].join("\n");
      const { fake, model, eventsUrl, startWorker, mention, reply } = await deploy(
        [
          { toolCalls: [{ name: "cancel_order", arguments: JSON.stringify(cancel) }] },
          { content: "Done: order 20240410003 is cancelled." },
        ],
        { text },
      );
      await startWorker();
      const ts = await mention("C0FIN", "cancel it");
      const card = await vi.waitFor(() => {
        const found = fake
          .messages("C0FIN", ts)
          .find((message) => JSON.stringify(message.blocks ?? []).includes("glassbox_approve"));
        if (!found) throw new Error("no approval card yet");
        return found;
      }, WAIT);
      const approvalId = /"value":"(apv_[^"]+)"/.exec(JSON.stringify(card.blocks))?.[1] ?? "";
      const clickAs = async (userId: string) => {
        const action = {
          userId,
          channel: "C0FIN",
          messageTs: card.ts,
          actionId: "glassbox_approve",
          value: approvalId,
        };
        expect((await fake.sendBlockAction(eventsUrl, action)).status).toBe(200);
      };
      await clickAs("U2");
      await vi.waitFor(() => {
        const shown = JSON.stringify(fake.messages("C0FIN", ts).find((message) => message.ts === card.ts)?.blocks);
        if (!shown.includes("1 of 2 so far, by <@U2>")) throw new Error("not counted on the card yet");
      }, WAIT);
      expect(model.requests).toHaveLength(1);
      await clickAs("U3");
      await reply("C0FIN", ts, "is cancelled");
      expect(model.requests).toHaveLength(2);
    }, 90_000);

    it("approvers by Slack user group across ingress and a worker: ingress asks Slack who is in the group at the click", async () => {
      const cancel = { order_id: "20240410003", reason: "ordered twice" };
      const text = ["channels:", "  C0FIN:", '    approvers: ["group:S0FIN"]', "    requesterMayApprove: false", ""];
      const { fake, model, eventsUrl, startWorker, mention, reply } = await deploy(
        [
          { toolCalls: [{ name: "cancel_order", arguments: JSON.stringify(cancel) }] },
          { content: "Done: order 20240410003 is cancelled." },
        ],
        { text: text.join("\n") },
        { S0FIN: ["U3"] },
      );
      await startWorker();
      const ts = await mention("C0FIN", "cancel it");
      const card = await vi.waitFor(() => {
        const found = fake
          .messages("C0FIN", ts)
          .find((message) => JSON.stringify(message.blocks ?? []).includes("glassbox_approve"));
        if (!found) throw new Error("no approval card yet");
        return found;
      }, WAIT);
      // The worker wrote the card from the channel's settings, which ingress never reads.
      expect(JSON.stringify(card.blocks)).toContain("can decide: <!subteam^S0FIN>");
      const approvalId = /"value":"(apv_[^"]+)"/.exec(JSON.stringify(card.blocks))?.[1] ?? "";
      const clickAs = async (userId: string) => {
        const action = {
          userId,
          channel: "C0FIN",
          messageTs: card.ts,
          actionId: "glassbox_approve",
          value: approvalId,
        };
        expect((await fake.sendBlockAction(eventsUrl, action)).status).toBe(200);
      };
      await clickAs("U2");
      const refusal = await fake.waitForCall("chat.postEphemeral", (call) => call.args.user === "U2", {
        timeoutMs: 30_000,
      });
      expect(refusal.args.text).toBe("This needs someone other than <@U1> to approve it: <!subteam^S0FIN>.");
      expect(model.requests).toHaveLength(1);
      await clickAs("U3");
      await reply("C0FIN", ts, "is cancelled");
      expect(model.requests).toHaveLength(2);
      expect(fake.callsTo("usergroups.users.list").map((call) => call.args.usergroup)).toEqual(["S0FIN"]);
    }, 90_000);

    it("a channel's budget spent through one worker stops the next message on another, from the store", async () => {
      const { model, apiUrl, startWorker, mention, reply } = await deploy(
        () => ({ content: "Spent.", usage: { promptTokens: 1000, completionTokens: 100 } }),
        { text: "channels:\n  C0BUDGET:\n    budget:\n      channel: { daily: { tokens: 1000 } }\n" },
      );
      const first = await startWorker();
      await reply("C0BUDGET", await mention("C0BUDGET", "go"), "Spent.");
      await first.kill();
      // Another worker, which never saw that run: what the channel spent is in the store.
      await startWorker();
      const refused = await reply(
        "C0BUDGET",
        await mention("C0BUDGET", "go"),
        "This channel has used its daily budget",
      );
      expect(refused).toContain("(1,100 tokens of 1,000 tokens)");
      expect(model.requests).toHaveLength(1);
      // Ingress, which runs no turn, says how the channel's budget stands, from the store.
      const usage = (await (await fetch(`${apiUrl}/api/usage`)).json()) as { budgets: unknown[] };
      expect(usage.budgets).toEqual([
        expect.objectContaining({
          scope: "channel",
          period: "daily",
          of: expect.stringMatching(/^slack:[^:]+:C0BUDGET$/),
          used: 1100,
          limit: 1000,
        }),
      ]);
    }, 90_000);
  },
);
