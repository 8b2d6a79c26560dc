/**
 * Discord ingress (GLASSBOX_ROLE=ingress): one gateway connection (one process per shard set) that
 * turns each message to the bot into an accepted run and its turn (claim, run, message and turn in
 * one transaction), a click on Approve or Deny into a decision (the one that readies the run
 * enqueues its resume, in the decision's transaction), /stop into a cancel request, and /reset into
 * a turn of its own, in its place among the conversation's turns. It never calls the model, and
 * never downloads a message's attachments: their references go in the turn, for the worker.
 *
 * The gateway has no acknowledgement: a replay after a resume carries the same message id, which
 * finds its claim. Events of one conversation are accepted one after another, in the order the
 * gateway gave them, so its turns keep that order; other conversations go on side by side.
 */
import {
  Client,
  Events,
  GatewayIntentBits,
  MessageFlags,
  Partials,
  type ButtonInteraction,
  type ChatInputCommandInteraction,
  type Message,
} from "discord.js";
import type { Price } from "../../agent/cost.js";
import type { TokenCounter } from "../../agent/tokens.js";
import type { DiscordConfig } from "../../config.js";
import type { Logger } from "../../logger.js";
import { refusalFor } from "../approval-replies.js";
import {
  approvalButton,
  discordClickOrigin,
  discordInputOf,
  discordInteractionId,
  discordMessageId,
  discordSessionKey,
  sessionUsageText,
} from "./discord-events.js";
import { loginWithCommands } from "./discord-login.js";
import { approvalOutcomeText, NO_PINGS } from "./discord-surface.js";
import { createSessionQueue } from "../../conversations/session-queue.js";
import { askSomething } from "../example-requests.js";
import type { Approval, StorePort } from "../../store/port.js";
import { storedTextOf, turnFilesOf } from "../../conversations/turn-files.js";
import {
  acceptMessage,
  acceptReset,
  decideClick,
  newRunId,
  type IngressQueue,
  type IngressStore,
} from "../../conversations/turns.js";

export interface DiscordIngressOptions<Transaction> {
  store: IngressStore<Transaction> & Pick<StorePort<Transaction>, "sessionUsage">;
  queue: IngressQueue<Transaction>;
  discord: DiscordConfig;
  log: Logger;
  counter: TokenCounter;
  /** For /usage: the model's name and prices (a name only: ingress never connects to it). */
  model?: { name: string; prices?: Record<string, Price> };
  hints?: string[];
}

export interface DiscordIngress {
  client: Client<true>;
  stop(): Promise<void>;
}

export async function startDiscordIngress<Transaction>(
  options: DiscordIngressOptions<Transaction>,
): Promise<DiscordIngress> {
  const { store, queue, discord, log, counter } = options;
  const client = new Client({
    intents: [
      GatewayIntentBits.Guilds,
      GatewayIntentBits.GuildMessages,
      GatewayIntentBits.DirectMessages,
      GatewayIntentBits.MessageContent,
    ],
    partials: [Partials.Channel], // DM channels are not cached, so DMs arrive on partial channels
    allowedMentions: NO_PINGS,
    ...(discord.apiUrl ? { rest: { api: discord.apiUrl } } : {}),
  });
  const inOrder = createSessionQueue();

  client.on(Events.MessageCreate, (message) => {
    void onMessage(message).catch((error: unknown) =>
      log.error({ error: (error as Error).message }, "Discord ingress: a message could not be accepted"),
    );
  });
  client.on(Events.InteractionCreate, (interaction) => {
    const handled = interaction.isButton()
      ? onButton(interaction)
      : interaction.isChatInputCommand()
        ? onCommand(interaction)
        : undefined;
    void handled?.catch((error: unknown) =>
      log.error({ error: (error as Error).message }, "Discord ingress: an interaction failed"),
    );
  });

  function onMessage(message: Message): Promise<void> {
    if (message.author.bot || message.system || message.author.id === client.user?.id) return Promise.resolve();
    if (!message.channel.isDMBased() && !(client.user && message.mentions.users.has(client.user.id)))
      return Promise.resolve();
    const sessionId = discordSessionKey(message.channel, message.guildId);
    return inOrder.run(sessionId, () => acceptFrom(message, sessionId));
  }

  async function acceptFrom(message: Message, sessionId: string): Promise<void> {
    const eventIds = [discordMessageId(message.id)];
    const input = discordInputOf(message.content);
    // Discord's CDN links are signed: the worker fetches them with no token.
    const refs = [...message.attachments.values()].map((file) => ({
      name: file.name,
      url: file.url,
      size: file.size,
      mimeType: file.contentType || "application/octet-stream",
    }));
    const files = turnFilesOf(refs, "discord");
    if (!input && files.length === 0) {
      if (await store.claim(...eventIds))
        await message.reply({ content: askSomething("Ask me something", options.hints), allowedMentions: NO_PINGS });
      return;
    }
    const run = { runId: newRunId(), sessionId, userId: message.author.id, input };
    const entry = { role: "user" as const, content: storedTextOf(input, files) };
    const outcome = await acceptMessage(store, queue, {
      eventIds,
      run,
      message: { message: entry, tokens: counter.message(entry) },
      files,
    });
    if (outcome.kind !== "accepted")
      log.debug({ eventIds, sessionId }, "Discord ingress: already accepted, nothing added");
  }

  async function onButton(interaction: ButtonInteraction): Promise<void> {
    const button = approvalButton(interaction.customId);
    if (!button || !(await store.claim(discordInteractionId(interaction.id)))) return;
    await interaction.deferUpdate(); // answer within Discord's 3 seconds; the message is edited below
    const outcome = await decideClick(store, queue, {
      ...button,
      userId: interaction.user.id,
      approvers: discord.approvers,
      origin: discordClickOrigin(interaction),
    });
    if (outcome.kind === "decided") await showDecision(client, outcome.approval);
    const refusal = refusalFor(outcome, discord.approvers.length > 0);
    if (refusal)
      await interaction.followUp({ content: refusal, flags: MessageFlags.Ephemeral, allowedMentions: NO_PINGS });
  }

  async function onCommand(interaction: ChatInputCommandInteraction): Promise<void> {
    if (!interaction.channel) {
      await interaction.reply({
        content: "I can't use this command here; try it in a channel or a DM where I can read messages.",
        flags: MessageFlags.Ephemeral,
        allowedMentions: NO_PINGS,
      });
      return;
    }
    const sessionId = discordSessionKey(interaction.channel, interaction.guildId);
    // After the conversation's messages before it: /stop finds their runs, /reset comes after them.
    await inOrder.run(sessionId, () => command(interaction, sessionId));
  }

  async function command(interaction: ChatInputCommandInteraction, sessionId: string): Promise<void> {
    const eventId = discordInteractionId(interaction.id);
    if (interaction.commandName === "reset") {
      if (!(await acceptReset(store, queue, sessionId, eventId))) return;
      await interaction.reply({
        content: "Started a new conversation here; I no longer see what was said before.",
        allowedMentions: NO_PINGS,
      });
      return;
    }
    if (!(await store.claim(eventId))) return;
    if (interaction.commandName === "stop") {
      const stopping = (await store.requestCancel({ sessionId })).length > 0;
      await interaction.reply({
        content: stopping ? "Stopping." : "Nothing is running here.",
        allowedMentions: NO_PINGS,
      });
    } else if (interaction.commandName === "usage") {
      await interaction.reply({
        content: sessionUsageText(await store.sessionUsage(sessionId), options.model),
        flags: MessageFlags.Ephemeral,
        allowedMentions: NO_PINGS,
      });
    }
  }

  const ready = await loginWithCommands(client, discord);
  return {
    client: ready,
    async stop() {
      await inOrder.idle();
      await client.destroy();
    },
  };
}

/** The buttons' message, once decided: the outcome, no buttons. */
async function showDecision(client: Client, approval: Approval): Promise<void> {
  if (!approval.messageRef) return;
  const [channelId = "", messageId = ""] = approval.messageRef.split(":");
  const channel = await client.channels.fetch(channelId);
  if (!channel?.isTextBased()) return;
  await channel.messages.edit(messageId, {
    content: approvalOutcomeText(approval),
    components: [],
    allowedMentions: NO_PINGS,
  });
}
