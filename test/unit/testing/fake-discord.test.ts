// Drives the REAL discord.js Client (with @discordjs/rest and @discordjs/ws) against the fake
// Discord, so the fake is checked against the library's own expectations: the REST base URL and
// version, the gateway handshake, sequence numbers and RESUME, the shapes it needs to build
// messages, channels and interactions, and the routes it calls to answer them.
import { once } from "node:events";
import {
  ActionRowBuilder,
  ButtonBuilder,
  ButtonStyle,
  ChannelType,
  Client,
  type ClientEvents,
  type ClientOptions,
  DiscordAPIError,
  Events,
  GatewayIntentBits,
  type Message,
  MessageFlags,
  Options,
  Partials,
} from "discord.js";
import { afterEach, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { type FakeDiscord, type FakeDiscordOptions, startFakeDiscord } from "../../../src/testing/fake-discord.js";

const GUILD = "1200000000000000100";
const CHANNEL = "1200000000000000101";
const THREAD = "1200000000000000102";
const DM = "1200000000000000200";
const USER = "1200000000000000300";
const OTHER_USER = "1200000000000000301";
const INTENTS = [
  GatewayIntentBits.Guilds,
  GatewayIntentBits.GuildMessages,
  GatewayIntentBits.DirectMessages,
  GatewayIntentBits.MessageContent,
];
const INTENT_BITS = INTENTS.reduce((bits, intent) => bits | intent, 0);

let fake: FakeDiscord | undefined;
const clients: Client[] = [];

afterEach(async () => {
  // Destroy clients first: a client whose gateway vanishes keeps trying to resume.
  for (const c of clients.splice(0)) await c.destroy();
  await fake?.close();
  fake = undefined;
});

async function startFake(options: FakeDiscordOptions = {}): Promise<FakeDiscord> {
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
    ...options,
  });
  return fake;
}

function newClient(f: FakeDiscord, options: Partial<ClientOptions> = {}): Client {
  const client = new Client({ intents: INTENTS, partials: [Partials.Channel], rest: { api: f.apiUrl }, ...options });
  clients.push(client);
  return client;
}

/** Logs in and waits for 'clientReady' (registered first: it can come before login() resolves). */
async function loggedIn(f: FakeDiscord, options: Partial<ClientOptions> = {}): Promise<Client<true>> {
  const client = newClient(f, options);
  const ready = nextEvent(client, Events.ClientReady);
  await client.login(f.token);
  await ready;
  return client as Client<true>;
}

/** The next time `event` fires (and `filter` accepts it); rejects after 5 s so a miss fails fast. */
function nextEvent<K extends keyof ClientEvents>(
  client: Client,
  event: K,
  filter: (...args: ClientEvents[K]) => boolean = () => true,
): Promise<ClientEvents[K]> {
  return new Promise((resolve, reject) => {
    const listener = (...args: ClientEvents[K]) => {
      if (!filter(...args)) return;
      clearTimeout(timer);
      client.off(event, listener);
      resolve(args);
    };
    const timer = setTimeout(() => {
      client.off(event, listener);
      reject(new Error(`no ${String(event)} within 5 s`));
    }, 5000);
    client.on(event, listener);
  });
}

/** Every messageCreate from now on, in arrival order. */
function collectMessages(client: Client): Message[] {
  const seen: Message[] = [];
  client.on(Events.MessageCreate, (m) => void seen.push(m));
  return seen;
}

/** The ids of every MESSAGE_CREATE packet the client receives, before discord.js filters anything. */
function rawMessageIds(client: Client): string[] {
  const ids: string[] = [];
  client.on(Events.Raw, (packet: { t?: string; d?: { id?: string } }) => {
    if (packet.t === "MESSAGE_CREATE" && packet.d?.id) ids.push(packet.d.id);
  });
  return ids;
}

const fromUser = (id: string) => (m: Message) => m.author.id === USER && m.id === id;

describe("fake Discord: login", () => {
  it("reaches clientReady with the guilds and channels from GUILD_CREATE", async () => {
    const f = await startFake();
    const client = await loggedIn(f);

    expect((await f.identified()).intents).toBe(INTENT_BITS);
    expect(client.user.id).toBe(f.botUserId);
    expect(client.user.bot).toBe(true);
    expect(client.application.id).toBe(f.applicationId);
    expect(client.guilds.cache.get(GUILD)?.name).toBe("Test Guild");
    expect(client.channels.cache.get(CHANNEL)?.isTextBased()).toBe(true);
    const thread = client.channels.cache.get(THREAD);
    expect(thread?.isThread() && thread.parentId).toBe(CHANNEL);
    // @discordjs/rest put "/v10" after the api option; @discordjs/ws added the version and encoding.
    expect(f.requestsTo("GET", "/gateway/bot")[0]?.status).toBe(200);
    expect(f.gatewayUrls).toEqual(["/gateway?v=10&encoding=json"]);
    expect(f.connections()).toBe(1);
  });

  it("answers heartbeats, which discord.js acknowledges", async () => {
    const f = await startFake({ heartbeatIntervalMs: 100 });
    const client = newClient(f);
    const acked = new Promise<void>((resolve) =>
      client.on(Events.Debug, (m) => {
        if (m.includes("Heartbeat acknowledged")) resolve();
      }),
    );
    await client.login(f.token);
    // The first beat may go out before IDENTIFY (its delay is interval × random), with d = null.
    const beat = await f.waitForGatewayPayload(1, { since: f.gatewayPayloads.length });
    expect(beat.d).toBeGreaterThanOrEqual(1); // the last sequence number seen: READY is 1
    await acked;
  });

  it("rejects login with TokenInvalid when REST answers 401, before any gateway connection", async () => {
    const f = await startFake();
    const client = newClient(f);
    const failure = await client.login("not-the-token").catch((e: unknown) => e);
    expect(failure).toMatchObject({ code: "TokenInvalid" });
    expect(f.requestsTo("GET", "/gateway/bot").map((r) => r.status)).toEqual([401]);
    expect(f.gatewayUrls).toEqual([]);

    const res = await fetch(`${f.apiUrl}/v10/users/@me`, { headers: { Authorization: "Bot not-the-token" } });
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({ message: "401: Unauthorized", code: 0 });
  });

  it("closes the gateway with 4004 on IDENTIFY with a wrong token", async () => {
    const f = await startFake();
    const ws = new WebSocket(`${f.gatewayUrl}?v=10&encoding=json`);
    const [hello] = (await once(ws, "message")) as [Buffer];
    expect(JSON.parse(hello.toString())).toMatchObject({ op: 10, d: { heartbeat_interval: 41_250 } });
    ws.send(JSON.stringify({ op: 2, d: { token: "wrong", intents: 0, properties: {} } }));
    const [code] = (await once(ws, "close")) as [number];
    expect(code).toBe(4004);
  });

  it("with missingIntents, closes with 4014 and login rejects; without privileged intents it works", async () => {
    const f = await startFake({ missingIntents: true });
    const client = newClient(f);
    const disconnected = nextEvent(client, Events.ShardDisconnect);
    const failure = await client.login(f.token).catch((e: unknown) => e);
    // @discordjs/ws rejects with a plain Error (no code); the close code is on shardDisconnect.
    expect(failure).toBeInstanceOf(Error);
    expect((failure as Error).message).toBe("Used disallowed intents");
    expect((await disconnected)[0].code).toBe(4014);
    expect((await f.identified()).intents & GatewayIntentBits.MessageContent).toBe(GatewayIntentBits.MessageContent);

    const withoutContent = await loggedIn(f, { intents: [GatewayIntentBits.Guilds, GatewayIntentBits.GuildMessages] });
    expect(withoutContent.isReady()).toBe(true);
  });
});

describe("fake Discord: messages", () => {
  it("delivers a guild mention and a thread message, and keeps them in messages()", async () => {
    const f = await startFake();
    const client = await loggedIn(f);

    const received = nextEvent(client, Events.MessageCreate);
    const sent = await f.sendMessage({ channelId: CHANNEL, authorId: USER, content: "what is up?", mentionsBot: true });
    const [message] = await received;
    expect(message.id).toBe(sent.id);
    expect(message.content).toBe(`<@${f.botUserId}> what is up?`);
    expect(message.guildId).toBe(GUILD);
    expect(message.mentions.users.has(f.botUserId)).toBe(true);
    expect(message.author.bot).toBe(false);

    const inThread = nextEvent(client, Events.MessageCreate);
    const threadMessage = await f.sendMessage({ channelId: THREAD, authorId: USER, content: "in the thread" });
    const [threaded] = await inThread;
    expect(threaded.id).toBe(threadMessage.id);
    expect(threaded.channel.isThread() && threaded.channel.parentId).toBe(CHANNEL);
    expect(f.messages(CHANNEL).map((m) => [m.author.id, m.content])).toEqual([[USER, `<@${f.botUserId}> what is up?`]]);
  });

  it("hides content from a client without the Message Content intent, except for mentions and DMs", async () => {
    const f = await startFake();
    const client = await loggedIn(f, {
      intents: [GatewayIntentBits.Guilds, GatewayIntentBits.GuildMessages, GatewayIntentBits.DirectMessages],
    });
    const seen = collectMessages(client);

    const plain = await f.sendMessage({ channelId: CHANNEL, authorId: USER, content: "just chatting" });
    const mention = await f.sendMessage({ channelId: CHANNEL, authorId: USER, content: "hi", mentionsBot: true });
    const direct = await f.sendMessage({ channelId: DM, authorId: USER, content: "a secret" });
    await nextEvent(client, Events.MessageCreate, (m) => m.id === direct.id);
    const contentOf = (id: string) => seen.find((m) => m.id === id)?.content;
    expect(contentOf(plain.id)).toBe("");
    expect(contentOf(mention.id)).toBe(`<@${f.botUserId}> hi`);
    expect(contentOf(direct.id)).toBe("a secret");
  });

  it("delivers a DM on a partial channel; send and reply post through REST and come back", async () => {
    const f = await startFake();
    const client = await loggedIn(f);

    expect(client.channels.cache.has(DM)).toBe(false); // Discord sends no CHANNEL_CREATE for DMs
    const received = nextEvent(client, Events.MessageCreate);
    const sent = await f.sendMessage({ channelId: DM, authorId: USER, content: "hello bot" });
    const [message] = await received;
    expect(message.id).toBe(sent.id);
    expect(message.channel.type).toBe(ChannelType.DM); // made from the partial: id, channel_type and author
    expect(message.channel.isDMBased() && message.channel.recipientId).toBe(USER);
    expect(message.content).toBe("hello bot");

    // Discord sends the bot its own messages too; a bot must ignore them.
    const echoed = nextEvent(
      client,
      Events.MessageCreate,
      (m) => m.author.id === f.botUserId && m.content === "plain answer",
    );
    const posted = await message.channel.send("plain answer");
    expect((await echoed)[0].id).toBe(posted.id);
    const reply = await message.reply("a reply");
    expect(reply.reference?.messageId).toBe(sent.id);

    const posts = f.requestsTo("POST", `/channels/${DM}/messages`);
    expect(posts.map((r) => r.body)).toMatchObject([
      { content: "plain answer" },
      { content: "a reply", message_reference: { message_id: sent.id } },
    ]);
    expect(
      f.messages(DM).map((m) => ({ author: m.author.id, content: m.content, replyTo: m.referencedMessageId })),
    ).toEqual([
      { author: USER, content: "hello bot", replyTo: undefined },
      { author: f.botUserId, content: "plain answer", replyTo: undefined },
      { author: f.botUserId, content: "a reply", replyTo: sent.id },
    ]);

    // A partial DM channel is fetched with GET /channels/{id}; a new DM is opened with POST /users/@me/channels.
    const fetched = await client.channels.fetch(DM, { force: true });
    expect(fetched?.type).toBe(ChannelType.DM);
    expect(f.requestsTo("GET", `/channels/${DM}`).map((r) => r.status)).toEqual([200]);
    const opened = await client.users.createDM(OTHER_USER);
    await opened.send("hi there");
    expect(opened.recipientId).toBe(OTHER_USER);
    expect(f.messages(opened.id).map((m) => m.content)).toEqual(["hi there"]);
  });

  it("records typing, edits the bot's messages and refuses to edit someone else's", async () => {
    const f = await startFake();
    const client = await loggedIn(f);
    const channel = client.channels.cache.get(CHANNEL);
    if (!channel?.isSendable()) throw new Error("channel is not sendable");

    await channel.sendTyping();
    expect(f.requestsTo("POST", `/channels/${CHANNEL}/typing`).map((r) => r.status)).toEqual([204]);

    const progress = await channel.send("⏳ working");
    const edited = await progress.edit("✅ done");
    expect(edited.editedTimestamp).not.toBeNull();
    expect(f.requestsTo("PATCH", `/channels/${CHANNEL}/messages/${progress.id}`)[0]?.body).toMatchObject({
      content: "✅ done",
    });
    expect(f.messages(CHANNEL).map((m) => m.content)).toEqual(["✅ done"]);

    const theirs = await f.sendMessage({ channelId: CHANNEL, authorId: USER, content: "mine" });
    const refused = await channel.messages.edit(theirs.id, "changed").catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(DiscordAPIError);
    expect((refused as DiscordAPIError).code).toBe(50005);
    const tooLong = await channel.send("x".repeat(2001)).catch((e: unknown) => e);
    expect((tooLong as DiscordAPIError).code).toBe(50035);
    const unknown = await client.channels.fetch("1200000000000000999").catch((e: unknown) => e);
    expect((unknown as DiscordAPIError).code).toBe(10003);
  });

  it("answers with generous rate-limit headers, and refuse() makes a route fail", async () => {
    const f = await startFake();
    const res = await fetch(`${f.apiUrl}/v10/users/@me`, { headers: { Authorization: `Bot ${f.token}` } });
    expect(res.status).toBe(200);
    expect(Number(res.headers.get("x-ratelimit-remaining"))).toBeGreaterThan(0);
    expect(res.headers.get("x-ratelimit-bucket")).toBeTruthy();
    expect(Number(res.headers.get("x-ratelimit-reset-after"))).toBeGreaterThan(0);

    const client = await loggedIn(f);
    f.refuse("POST", `/channels/${CHANNEL}/messages`, {
      status: 403,
      code: 50013,
      message: "Missing Permissions",
      times: 1,
    });
    const channel = client.channels.cache.get(CHANNEL);
    if (!channel?.isSendable()) throw new Error("channel is not sendable");
    expect(await channel.send("first").catch((e: unknown) => (e as DiscordAPIError).code)).toBe(50013);
    await channel.send("second");
    expect(f.messages(CHANNEL).map((m) => m.content)).toEqual(["second"]);
  });
});

describe("fake Discord: interactions", () => {
  it("delivers a button click; reply (ephemeral) and update go to the callback route", async () => {
    const f = await startFake();
    const client = await loggedIn(f);
    const channel = client.channels.cache.get(CHANNEL);
    if (!channel?.isSendable()) throw new Error("channel is not sendable");
    const buttons = new ActionRowBuilder<ButtonBuilder>().addComponents(
      new ButtonBuilder().setCustomId("glassbox:approve:a1").setLabel("Approve").setStyle(ButtonStyle.Success),
      new ButtonBuilder().setCustomId("glassbox:deny:a1").setLabel("Deny").setStyle(ButtonStyle.Danger),
    );
    const question = await channel.send({ content: "Run it?", components: [buttons] });
    expect(f.messages(CHANNEL)[0]?.components).toMatchObject([
      { type: 1, components: [{ custom_id: "glassbox:approve:a1" }, { custom_id: "glassbox:deny:a1" }] },
    ]);

    const clicked = nextEvent(client, Events.InteractionCreate);
    const click = await f.clickButton({
      channelId: CHANNEL,
      userId: USER,
      messageId: question.id,
      customId: "glassbox:deny:a1",
    });
    const [interaction] = await clicked;
    if (!interaction.isButton()) throw new Error(`expected a button, got type ${interaction.type}`);
    expect(interaction.id).toBe(click.interactionId);
    expect(interaction.customId).toBe("glassbox:deny:a1");
    expect(interaction.user.id).toBe(USER);
    expect(interaction.guildId).toBe(GUILD);
    expect(interaction.channelId).toBe(CHANNEL);
    expect(interaction.message.id).toBe(question.id);
    expect(interaction.component.type).toBe(2); // found in the message the interaction carried

    await interaction.reply({ content: "Only the requester can decide.", flags: MessageFlags.Ephemeral });
    expect(f.interactionResponses(click.interactionId).map((r) => [r.method, r.status, r.body])).toEqual([
      [
        "POST",
        204,
        {
          type: 4,
          data: expect.objectContaining({ content: "Only the requester can decide.", flags: MessageFlags.Ephemeral }),
        },
      ],
    ]);
    expect(f.messages(CHANNEL).map((m) => m.content)).toEqual(["Run it?"]); // ephemeral: nobody else sees it
    // Discord accepts one initial response per interaction.
    const again = await fetch(`${f.apiUrl}/v10/interactions/${click.interactionId}/${click.token}/callback`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ type: 4, data: { content: "again" } }),
    });
    expect(again.status).toBe(400);
    expect(await again.json()).toMatchObject({ code: 40060 });

    const secondClick = nextEvent(client, Events.InteractionCreate);
    const approve = await f.clickButton({
      channelId: CHANNEL,
      userId: USER,
      messageId: question.id,
      customId: "glassbox:approve:a1",
    });
    const [second] = await secondClick;
    if (!second.isButton()) throw new Error("expected a button");
    await second.update({ content: "✅ Approved", components: [] });
    expect(f.interactionResponses(approve.interactionId)[0]?.body).toMatchObject({
      type: 7,
      data: { content: "✅ Approved", components: [] },
    });
    expect(f.messages(CHANNEL).map((m) => [m.id, m.content, m.components])).toEqual([[question.id, "✅ Approved", []]]);
  });

  it("deferUpdate then an ephemeral followUp goes through the interaction webhook", async () => {
    const f = await startFake();
    const client = await loggedIn(f);
    const channel = client.channels.cache.get(CHANNEL);
    if (!channel?.isSendable()) throw new Error("channel is not sendable");
    const question = await channel.send({
      content: "Run it?",
      components: [
        new ActionRowBuilder<ButtonBuilder>().addComponents(
          new ButtonBuilder().setCustomId("go").setLabel("Go").setStyle(ButtonStyle.Primary),
        ),
      ],
    });

    const clicked = nextEvent(client, Events.InteractionCreate);
    const click = await f.clickButton({
      channelId: CHANNEL,
      userId: OTHER_USER,
      messageId: question.id,
      customId: "go",
    });
    const [interaction] = await clicked;
    if (!interaction.isButton()) throw new Error("expected a button");
    await interaction.deferUpdate();
    await interaction.followUp({ content: "Not yours to approve.", flags: MessageFlags.Ephemeral });
    await interaction.editReply({ content: "Run it? (decided)", components: [] }); // @original is the button's message

    const calls = f
      .interactionResponses(click.interactionId)
      .map((r) => `${r.method} ${r.path.replace(click.token, "<token>")} ${r.status}`);
    expect(calls).toEqual([
      `POST /interactions/${click.interactionId}/<token>/callback 204`,
      `POST /webhooks/${f.applicationId}/<token> 200`,
      `PATCH /webhooks/${f.applicationId}/<token>/messages/@original 200`,
    ]);
    expect(f.requestsTo("POST", `/webhooks/${f.applicationId}/${click.token}`)[0]?.query).toMatchObject({
      wait: "true",
    });
    expect(f.messages(CHANNEL).map((m) => m.content)).toEqual(["Run it? (decided)"]);
  });

  it("registers slash commands and runs one with deferReply, editReply and followUp", async () => {
    const f = await startFake();
    const client = await loggedIn(f);
    await client.application.commands.set(
      [{ name: "usage", description: "Tokens and cost", options: [{ type: 3, name: "scope", description: "which" }] }],
      GUILD,
    );
    await client.application.commands.set([{ name: "reset", description: "Start over" }]);
    expect(f.requestsTo("PUT", `/applications/${f.applicationId}/guilds/${GUILD}/commands`)).toHaveLength(1);
    const [usage] = f.commands(GUILD) as Array<{ id: string; name: string; guild_id: string }>;
    expect(usage).toMatchObject({ name: "usage", guild_id: GUILD, id: expect.stringMatching(/^\d{17,20}$/) });
    expect((f.commands("global") as Array<{ name: string }>).map((c) => c.name)).toEqual(["reset"]);
    await expect(f.runCommand({ channelId: DM, userId: USER, name: "usage" })).rejects.toThrow(/not registered/); // guild-only

    const received = nextEvent(client, Events.InteractionCreate);
    const run = await f.runCommand({
      channelId: CHANNEL,
      userId: USER,
      name: "usage",
      options: [{ name: "scope", type: 3, value: "all" }],
    });
    const [interaction] = await received;
    if (!interaction.isChatInputCommand()) throw new Error("expected a slash command");
    expect(interaction.commandName).toBe("usage");
    expect(interaction.commandId).toBe(usage?.id);
    expect(interaction.commandGuildId).toBe(GUILD);
    expect(interaction.options.getString("scope")).toBe("all");
    expect(interaction.member?.user.id).toBe(USER);

    await interaction.deferReply();
    const thinking = f.messages(CHANNEL).at(-1);
    expect(thinking).toMatchObject({
      content: "",
      interactionId: run.interactionId,
      author: { id: f.botUserId, bot: true },
    });
    expect((thinking?.flags ?? 0) & MessageFlags.Loading).toBe(MessageFlags.Loading);

    await interaction.editReply("3 runs, about $0.01");
    await interaction.followUp("and one more thing");
    expect(
      f.interactionResponses(run.interactionId).map((r) => `${r.method} ${r.path.replace(run.token, "<token>")}`),
    ).toEqual([
      `POST /interactions/${run.interactionId}/<token>/callback`,
      `PATCH /webhooks/${f.applicationId}/<token>/messages/@original`,
      `POST /webhooks/${f.applicationId}/<token>`,
    ]);
    expect(f.interactionResponses(run.interactionId)[0]?.body).toEqual({ type: 5, data: { flags: 0 } });
    expect(f.messages(CHANNEL).map((m) => [m.content, m.flags])).toEqual([
      ["3 runs, about $0.01", 0],
      ["and one more thing", 0],
    ]);
  });
});

describe("fake Discord: reconnects and redelivery", () => {
  it("a dropped connection resumes; a message sent meanwhile arrives once, and the session keeps working", async () => {
    const f = await startFake();
    const client = await loggedIn(f);
    const seen = collectMessages(client);
    const raw = rawMessageIds(client);
    const before = await f.sendMessage({ channelId: DM, authorId: USER, content: "before" });
    await nextEvent(client, Events.MessageCreate, fromUser(before.id));
    const identifies = f.gatewayPayloads.filter((p) => p.op === 2).length;

    const resumed = nextEvent(client, Events.ShardResume);
    f.dropConnection();
    const during = await f.sendMessage({ channelId: DM, authorId: USER, content: "while you were away" });
    const [, replayed] = await resumed;
    expect(replayed).toBeGreaterThanOrEqual(1);

    const resume = await f.waitForGatewayPayload(6);
    expect(resume.d).toMatchObject({ token: f.token, session_id: expect.any(String), seq: expect.any(Number) });
    expect(f.gatewayUrls[1]).toMatch(/^\/resume-gateway\?v=10/); // discord.js used READY's resume_gateway_url
    expect(f.gatewayPayloads.filter((p) => p.op === 2)).toHaveLength(identifies); // no new IDENTIFY

    const after = await f.sendMessage({ channelId: DM, authorId: USER, content: "after" });
    await nextEvent(client, Events.MessageCreate, fromUser(after.id));
    // The gateway is ordered: a duplicate of "during" would have arrived before "after". Only what
    // was missed is replayed (discord.js's cache would hide a replayed "before" from messageCreate).
    expect(raw).toEqual([before.id, during.id, after.id]);
    expect(seen.filter((m) => m.author.id === USER).map((m) => m.id)).toEqual([before.id, during.id, after.id]);
  });

  it("a non-resumable drop gets op 9 on RESUME, and discord.js identifies again", async () => {
    const f = await startFake();
    // @discordjs/ws's own identify throttle allows one IDENTIFY per 5 s (Discord's limit, which the
    // fake does not enforce): a throttle that lets every IDENTIFY through spares the test that wait.
    const client = await loggedIn(f, { ws: { buildIdentifyThrottler: () => ({ waitForIdentify: async () => {} }) } });
    f.dropConnection({ resumable: false });
    await f.waitForGatewayPayload(2, { since: f.gatewayPayloads.length });
    expect(f.gatewayPayloads.some((p) => p.op === 6)).toBe(true);

    const sent = await f.sendMessage({ channelId: DM, authorId: USER, content: "still there?" });
    const [message] = await nextEvent(client, Events.MessageCreate, fromUser(sent.id));
    expect(message.content).toBe("still there?");
  });

  it("a session the client closed with 1000 (client.destroy) cannot be resumed", async () => {
    const f = await startFake();
    const client = newClient(f);
    const ready = new Promise<{ session_id: string }>((resolve) =>
      client.on(Events.Raw, (packet: { t?: string; d?: unknown }) => {
        if (packet.t === "READY") resolve(packet.d as { session_id: string });
      }),
    );
    await client.login(f.token);
    const { session_id } = await ready;
    clients.splice(clients.indexOf(client), 1);
    await client.destroy();

    const ws = new WebSocket(`${f.gatewayUrl}?v=10&encoding=json`);
    await once(ws, "message"); // HELLO
    ws.send(JSON.stringify({ op: 6, d: { token: f.token, session_id, seq: 1 } }));
    const [answer] = (await once(ws, "message")) as [Buffer];
    expect(JSON.parse(answer.toString())).toMatchObject({ op: 9, d: false });
    ws.close();
  });

  it("redeliver() sends the same MESSAGE_CREATE again; discord.js drops it only while the message is cached", async () => {
    const f = await startFake();
    const cached = await loggedIn(f);
    const uncached = await loggedIn(f, { makeCache: Options.cacheWithLimits({ MessageManager: 0 }) });
    const raw = rawMessageIds(cached);
    const seenCached = collectMessages(cached);
    const seenUncached = collectMessages(uncached);

    const first = await f.sendMessage({ channelId: CHANNEL, authorId: USER, content: "once", mentionsBot: true });
    await f.redeliver(first.id);
    const marker = await f.sendMessage({ channelId: CHANNEL, authorId: USER, content: "marker" });
    await Promise.all([
      nextEvent(cached, Events.MessageCreate, fromUser(marker.id)),
      nextEvent(uncached, Events.MessageCreate, fromUser(marker.id)),
    ]);

    expect(raw).toEqual([first.id, first.id, marker.id]);
    expect(seenCached.map((m) => m.id)).toEqual([first.id, marker.id]);
    expect(seenUncached.map((m) => m.id)).toEqual([first.id, first.id, marker.id]); // an adapter must deduplicate itself
    expect(f.messages(CHANNEL)).toHaveLength(2);
  });
});

describe("fake Discord: allowed mentions", () => {
  const ROLE = "1200000000000000900";
  const everything = `@everyone @here <@&${ROLE}> <@${USER}> <@${OTHER_USER}>`;

  it("records each write's allowed_mentions as sent and whom Discord would ping for it", async () => {
    const f = await startFake();
    const client = await loggedIn(f);
    const channel = client.channels.cache.get(CHANNEL);
    if (!channel?.isSendable()) throw new Error("channel is not sendable");

    // Without allowed_mentions Discord parses every kind; with one, only what it allows.
    const loud = await channel.send(everything);
    await channel.send({ content: everything, allowedMentions: { parse: [] } });
    await channel.send({ content: everything, allowedMentions: { parse: [], users: [USER] } });
    await channel.send({ content: everything, allowedMentions: { parse: ["roles"] } });
    await loud.edit({ content: `${everything} (edited)`, allowedMentions: { parse: [] } });
    // A reply pings the author it answers unless allowed_mentions says otherwise.
    const theirs = await f.sendMessage({
      channelId: CHANNEL,
      guildId: GUILD,
      authorId: OTHER_USER,
      content: "a question",
    });
    const question = await channel.messages.fetch(theirs.id);
    await question.reply("plain reply");
    await question.reply({ content: "quiet reply", allowedMentions: { parse: [] } });

    expect(f.messageWrites.map((write) => [write.kind, write.allowedMentions, write.pings])).toEqual([
      ["create", undefined, { everyone: true, roles: [ROLE], users: [USER, OTHER_USER] }],
      ["create", { parse: [] }, { everyone: false, roles: [], users: [] }],
      ["create", { parse: [], users: [USER] }, { everyone: false, roles: [], users: [USER] }],
      ["create", { parse: ["roles"] }, { everyone: false, roles: [ROLE], users: [] }],
      ["edit", { parse: [] }, { everyone: false, roles: [], users: [] }],
      ["create", undefined, { everyone: false, roles: [], users: [OTHER_USER] }],
      ["create", { parse: [] }, { everyone: false, roles: [], users: [] }],
    ]);
    expect(f.messageWrites[4]).toMatchObject({
      messageId: loud.id,
      channelId: CHANNEL,
      content: `${everything} (edited)`,
    });

    // Discord refuses a kind that is both parsed and listed.
    const refused = await channel
      .send({ content: everything, allowedMentions: { parse: ["users"], users: [USER] } })
      .catch((e: unknown) => e);
    expect((refused as DiscordAPIError).code).toBe(50035);
    expect(f.messageWrites).toHaveLength(7);
  });

  it("discord.js sends the client's allowedMentions with every send, edit, interaction reply and follow-up that sets none", async () => {
    const f = await startFake();
    const client = await loggedIn(f, { allowedMentions: { parse: [] } });
    const channel = client.channels.cache.get(CHANNEL);
    if (!channel?.isSendable()) throw new Error("channel is not sendable");
    const question = await channel.send({
      content: `@everyone run it?`,
      components: [
        new ActionRowBuilder<ButtonBuilder>().addComponents(
          new ButtonBuilder().setCustomId("go").setLabel("Go").setStyle(ButtonStyle.Primary),
        ),
      ],
    });
    await question.edit(`@here run it now?`);

    const clicked = nextEvent(client, Events.InteractionCreate);
    await f.clickButton({ channelId: CHANNEL, userId: USER, messageId: question.id, customId: "go" });
    const [interaction] = await clicked;
    if (!interaction.isButton()) throw new Error("expected a button");
    await interaction.reply(`<@&${ROLE}> noted`);
    await interaction.followUp(`@everyone again`);
    await interaction.editReply(`<@${OTHER_USER}> noted (edited)`);

    expect(f.messageWrites.map((write) => [write.kind, write.allowedMentions])).toEqual([
      ["create", { parse: [] }],
      ["edit", { parse: [] }],
      ["create", { parse: [] }],
      ["create", { parse: [] }],
      ["edit", { parse: [] }],
    ]);
    expect(
      f.messageWrites.every(
        (write) => !write.pings.everyone && write.pings.roles.length === 0 && write.pings.users.length === 0,
      ),
    ).toBe(true);
  });
});
