// Slash commands and startup on Discord, end to end through the one pipeline: /reset, /stop, /usage and
// /what-can-you-do registered at startup
// (to the server in DISCORD_GUILD_ID, else globally) and run through the fake's interactions; a bad
// token or a missing privileged intent stops startup with one sentence saying what to fix.
import { MessageFlags, PermissionFlagsBits } from "discord.js";
import { afterEach, describe, expect, it } from "vitest";
import {
  agentFor,
  CHANNEL,
  cleanUp,
  DM,
  GUILD,
  interactionReplies,
  memoryLogger,
  REQUEST_WAIT,
  startAdapter,
  startFake,
  startHarness,
  startModel,
  tempPaths,
  USER,
  userTexts,
  WAIT,
  waitForBotMessage,
} from "../../../helpers/discord.js";

afterEach(cleanUp);

const CHANNEL_MESSAGE = 4;
const names = (commands: unknown[]) => (commands as Array<{ name: string }>).map((command) => command.name).sort();

/** Runs a slash command and waits for its reply; returns what the reply said. */
async function runCommand(h: Awaited<ReturnType<typeof startHarness>>, name: string, channelId = CHANNEL) {
  const run = await h.fake.runCommand({
    channelId,
    ...(channelId === DM ? {} : { guildId: GUILD }),
    userId: USER,
    name,
  });
  await h.fake.waitForRequest(
    "POST",
    `/interactions/${run.interactionId}/${run.token}/callback`,
    undefined,
    REQUEST_WAIT,
  );
  const [reply] = interactionReplies(h.fake, run.interactionId);
  return reply;
}

describe("Discord slash commands", () => {
  it("registers /reset, /stop and /usage to DISCORD_GUILD_ID when set", async () => {
    const h = await startHarness({ discord: { guildId: GUILD } });
    expect(names(h.fake.commands(GUILD))).toEqual(["reset", "stop", "usage", "what-can-you-do"]);
    expect(h.fake.commands("global")).toEqual([]);
  });

  it("registers them globally otherwise", async () => {
    const h = await startHarness();
    expect(names(h.fake.commands("global"))).toEqual(["reset", "stop", "usage", "what-can-you-do"]);
    expect(h.fake.commands(GUILD)).toEqual([]);
  });

  it("/reset: the next message does not see the old conversation", async () => {
    const h = await startHarness({
      script: [{ content: "Nice to meet you, Ada." }, { content: "I don't know your name." }],
    });
    await h.dm("my name is Ada");
    await waitForBotMessage(h.fake, DM, "Nice to meet you, Ada.");
    await h.discord.idle();

    const reply = await runCommand(h, "reset", DM);
    expect(reply).toMatchObject({
      type: CHANNEL_MESSAGE,
      content: expect.stringContaining("Started a new conversation"),
    });
    await h.dm("what is my name?");
    await waitForBotMessage(h.fake, DM, "I don't know your name.");
    await h.discord.idle();
    expect(userTexts(h.model, 1)).toEqual(["what is my name?"]);
    expect(JSON.stringify(h.model.requests[1]?.body.messages)).not.toContain("Ada");
  });

  it("/usage: an ephemeral reply with the session's runs, tokens and cost", async () => {
    const h = await startHarness({
      script: [
        { content: "One.", usage: { promptTokens: 1_000, completionTokens: 200 } },
        { content: "Two.", usage: { promptTokens: 3_000, completionTokens: 800 } },
      ],
    });
    await h.mention("first");
    await waitForBotMessage(h.fake, CHANNEL, "One.");
    await h.mention("second");
    await waitForBotMessage(h.fake, CHANNEL, "Two.");
    await h.discord.idle();

    const reply = await runCommand(h, "usage");
    expect(reply?.flags).toBe(MessageFlags.Ephemeral);
    // gpt-4o-mini: $0.15 per million input tokens, $0.60 per million output tokens.
    const dollars = (4_000 * 0.15 + 1_000 * 0.6) / 1_000_000;
    expect(reply?.content).toBe(
      `This conversation: 2 runs, 4000 prompt + 1000 completion tokens, about $${dollars.toFixed(4)}.`,
    );

    // Another channel is another conversation, with nothing spent yet.
    const other = await runCommand(h, "usage", DM);
    expect(other?.content).toMatch(/^This conversation: 0 runs, 0 prompt \+ 0 completion tokens/);
  });

  it("/what-can-you-do: answered in the channel for the person asking, without a model call", async () => {
    const h = await startHarness({ script: [] });
    const reply = await runCommand(h, "what-can-you-do");
    expect(reply).toMatchObject({ flags: MessageFlags.Ephemeral, content: "Answering here in a moment." });
    const answer = await waitForBotMessage(h.fake, CHANNEL, "Here is what I can do here, for you:");
    expect(answer.content).toContain("Tools I use on my own:");
    expect(answer.content).toContain("glassbox erase --user");
    expect(h.model.requests).toHaveLength(0);
  });

  it("/usage says the cost is unknown for a model without a price", async () => {
    const h = await startHarness({ script: [{ content: "Hi." }], env: { LLM_MODEL: "my-local-model" } });
    await h.mention("hi");
    await waitForBotMessage(h.fake, CHANNEL, "Hi.");
    await h.discord.idle();
    const reply = await runCommand(h, "usage");
    expect(reply?.content).toMatch(
      /^This conversation: 1 run, \d+ prompt \+ \d+ completion tokens, cost unknown \(no price for my-local-model\)\.$/,
    );
    expect(reply?.content).not.toContain("$");
  });

  it("/stop while a run hangs: 'Stopping.', the run ends with 'Stopped.'; with nothing running it says so", async () => {
    const h = await startHarness({ script: [{ hang: true }] });
    const session = `discord:${GUILD}:${CHANNEL}`;
    await h.mention("do something that takes forever");
    await expect.poll(() => h.model.requests.length, WAIT).toBe(1);
    expect(await h.discord.busy(session)).toBe(true);

    expect(await runCommand(h, "stop")).toMatchObject({ type: CHANNEL_MESSAGE, content: "Stopping." });
    await waitForBotMessage(h.fake, CHANNEL, "Stopped.");
    await h.discord.idle();
    expect(await h.discord.busy(session)).toBe(false);
    expect(h.model.requests).toHaveLength(1);

    expect(await runCommand(h, "stop")).toMatchObject({ content: "Nothing is running here." });
  });
});

describe("Discord startup", () => {
  async function setUp(fakeOptions: Parameters<typeof startFake>[0] = {}) {
    const fake = await startFake(fakeOptions);
    const model = await startModel();
    const { log } = memoryLogger();
    const { agent } = await agentFor(model, tempPaths(), log);
    return { fake, agent, log };
  }

  it("an invalid token stops startup with one sentence about DISCORD_TOKEN", async () => {
    const { fake, agent, log } = await setUp();
    const failure = await startAdapter({
      fake,
      agent,
      store: agent.port,
      log,
      discord: { token: "not-the-token" },
    }).then(
      () => undefined,
      (error: unknown) => error as Error & { code?: string },
    );
    expect(failure?.code).toBe("configuration");
    expect(failure?.message).toMatch(/DISCORD_TOKEN/);
    expect(failure?.message.split(/[.;] [A-Z]/)).toHaveLength(1); // one sentence
    expect(fake.connections()).toBe(0);
  });

  it("an unreachable DISCORD_API_URL stops startup with one sentence naming it", async () => {
    const { fake, agent, log } = await setUp();
    const discord = { token: "any", apiUrl: "http://127.0.0.1:9/api" };
    const failure = await startAdapter({ fake, agent, store: agent.port, log, discord }).then(
      () => undefined,
      (error: unknown) => error as Error & { code?: string },
    );
    expect(failure?.code).toBe("configuration");
    expect(failure?.message).toBe(
      "I can't reach Discord at http://127.0.0.1:9/api; check DISCORD_API_URL (or leave it unset) and the network.",
    );
  });

  it("a missing Message Content intent stops startup with one sentence saying where to turn it on", async () => {
    const { fake, agent, log } = await setUp({ missingIntents: true });
    const failure = await startAdapter({ fake, agent, store: agent.port, log }).then(
      () => undefined,
      (error: unknown) => error as Error & { code?: string },
    );
    expect(failure?.code).toBe("configuration");
    expect(failure?.message).toMatch(/Message Content intent/);
    expect(failure?.message).toMatch(/Privileged Gateway Intents/);
    expect(fake.connections()).toBe(0);
  });

  it("the invite URL asks for the bot and applications.commands scopes and the permissions it needs", async () => {
    const h = await startHarness();
    const url = new URL(h.discord.inviteUrl);
    expect(url.origin + url.pathname).toBe("https://discord.com/oauth2/authorize"); // even with DISCORD_API_URL pointing elsewhere
    expect(url.searchParams.get("client_id")).toBe(h.fake.applicationId);
    expect(url.searchParams.get("scope")?.split(" ").sort()).toEqual(["applications.commands", "bot"]);
    const permissions = BigInt(url.searchParams.get("permissions") ?? "0");
    for (const needed of [
      PermissionFlagsBits.ViewChannel,
      PermissionFlagsBits.SendMessages,
      PermissionFlagsBits.SendMessagesInThreads,
      PermissionFlagsBits.ReadMessageHistory,
    ]) {
      expect(permissions & needed).toBe(needed);
    }
    // Nothing it does not need.
    expect(permissions & PermissionFlagsBits.Administrator).toBe(0n);
    expect(h.discord.client.isReady()).toBe(true);
    expect((await h.fake.identified()).intents).toBe(1 | (1 << 9) | (1 << 12) | (1 << 15)); // Guilds, GuildMessages, DirectMessages, MessageContent
  });
});
