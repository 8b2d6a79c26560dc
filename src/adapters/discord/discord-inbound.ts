/**
 * Discord's inbound handler, in every deployment (one process on SQLite, or ingress processes on
 * PostgreSQL): one gateway connection that turns each DM or mention of the bot into an accepted run
 * and its turn (claim, run, message and turn in one transaction), a click on Approve or Deny into a
 * decision (the one that readies the run enqueues its resume, in the decision's transaction), a
 * 👍 / 👎 into feedback on the answer (a 👎 asks for a reason), /stop into a cancel request, and
 * /reset into a turn of its own, in its place among the conversation's turns. It never calls the
 * model, and never downloads a message's attachments: their references go in the turn, for the
 * worker, whose surface (discord-surface.ts) shows the run.
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
  OAuth2Scopes,
  PermissionFlagsBits,
  type ChatInputCommandInteraction,
  type Message,
  type ModalSubmitInteraction,
  Status,
} from "discord.js";
import type { Price } from "../../agent/cost.js";
import { rateInConversation } from "../../agent/feedback.js";
import type { TokenCounter } from "../../agent/tokens.js";
import type { DiscordConfig } from "../../config.js";
import type { Logger } from "../../logger.js";
import { refusalFor } from "../approval-replies.js";
import { ROLE_PREFIX } from "../../tools/approver-entries.js";
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
import { approvalButtons, approvalOutcomeText, approvalQuestionText, NO_PINGS } from "./discord-surface.js";
import { feedbackButton, REASON_INPUT, reasonModal, reasonModalRun } from "./discord-feedback.js";
import { createSessionQueue } from "../../conversations/session-queue.js";
import { askSomething } from "../example-requests.js";
import type { Approval, StorePort } from "../../store/port.js";
import { turnFilesOf, type TurnFile } from "../../conversations/turn-files.js";
import { CAPABILITIES_QUESTION_TEXT } from "../../conversations/capabilities.js";
import {
  acceptInboundText,
  acceptReset,
  decideClick,
  type IngressQueue,
  type IngressStore,
} from "../../conversations/turns.js";

export interface DiscordIngressOptions<Transaction> {
  store: IngressStore<Transaction> &
    Pick<StorePort<Transaction>, "sessionUsage" | "run" | "recordFeedback" | "explainFeedback">;
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
  /** Where a server's owner adds the bot (with its slash commands), on discord.com. */
  inviteUrl: string;
  /** Resolves once every event received so far is accepted (or refused): turns are then in the queue. */
  idle(): Promise<void>;
  /** Undefined while the gateway connection is up; else why not: for /readyz. */
  notReady(): string | undefined;
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
        : interaction.isModalSubmit()
          ? onReason(interaction)
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
    await acceptText(eventIds, { sessionId, userId: message.author.id, input }, files);
  }

  /** A message's run, its stored message and its turn, accepted once (by its event ids). */
  async function acceptText(
    eventIds: string[],
    { sessionId, userId, input }: { sessionId: string; userId: string; input: string },
    files: TurnFile[] = [],
  ): Promise<boolean> {
    const { outcome } = await acceptInboundText(store, queue, counter, { eventIds, sessionId, userId, input, files });
    if (outcome.kind !== "accepted")
      log.debug({ eventIds, sessionId }, "Discord ingress: already accepted, nothing added");
    return outcome.kind === "accepted";
  }

  /** 👍 / 👎 on an answer, by whoever can see its channel; a 👎 asks for a reason. Never starts a run. */
  async function onFeedback(
    interaction: ButtonInteraction,
    rated: { rating: "up" | "down"; runId: string },
  ): Promise<void> {
    if (!(await store.claim(discordInteractionId(interaction.id)))) return;
    const here = (sessionId: string) =>
      sessionId.startsWith(discordClickOrigin(interaction).sessionPrefix) &&
      discordChannelOf(sessionId) === interaction.channelId;
    const click = { ...rated, userId: interaction.user.id, source: "discord" as const };
    if ((await rateInConversation(store, click, here)) === "not_here") {
      await interaction.reply({
        content: "I can't rate that answer from here; rate it in the conversation where I gave it.",
        flags: MessageFlags.Ephemeral,
        allowedMentions: NO_PINGS,
      });
      return;
    }
    if (rated.rating === "down") await interaction.showModal(reasonModal(rated.runId));
    else
      await interaction.reply({
        content: "Thanks for the 👍.",
        flags: MessageFlags.Ephemeral,
        allowedMentions: NO_PINGS,
      });
  }

  /** The reason a 👎 asked for: it only ever completes the submitter's own 👎 of that run. */
  async function onReason(interaction: ModalSubmitInteraction): Promise<void> {
    const runId = reasonModalRun(interaction.customId);
    if (!runId || !(await store.claim(discordInteractionId(interaction.id)))) return;
    const reason = interaction.fields.getTextInputValue(REASON_INPUT);
    const noted = await store.explainFeedback(runId, interaction.user.id, reason);
    await interaction.reply({
      content: noted ? "Thanks, noted." : "Your 👎 is no longer there, so the reason was not kept.",
      flags: MessageFlags.Ephemeral,
      allowedMentions: NO_PINGS,
    });
  }

  async function onButton(interaction: ButtonInteraction): Promise<void> {
    const rated = feedbackButton(interaction.customId);
    if (rated) return onFeedback(interaction, rated);
    const button = approvalButton(interaction.customId);
    if (!button || !(await store.claim(discordInteractionId(interaction.id)))) return;
    await interaction.deferUpdate(); // answer within Discord's 3 seconds; the message is edited below
    const outcome = await decideClick(store, queue, {
      ...button,
      userId: interaction.user.id,
      approvers: discord.approvers,
      requesterMayApprove: discord.requesterMayApprove,
      memberOf: rolesOf(interaction),
      origin: discordClickOrigin(interaction),
    });
    if (outcome.kind === "decided" || outcome.kind === "counted") await showDecision(client, outcome.approval);
    const refusal = refusalFor(outcome, discord);
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
    if (interaction.commandName === "what-can-you-do") {
      // Asked as a message, in its place among the conversation's: a worker answers it in the channel.
      const input = CAPABILITIES_QUESTION_TEXT;
      if (await acceptText([eventId], { sessionId, userId: interaction.user.id, input }))
        await interaction.reply({ content: "Answering here in a moment.", flags: MessageFlags.Ephemeral });
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
    inviteUrl: inviteUrlOf(ready),
    idle: () => inOrder.idle(),
    // Each shard's own status: the client's stays "ready" while a shard reconnects.
    notReady: () =>
      ready.isReady() && ready.ws.shards.every((shard) => shard.status === Status.Ready)
        ? undefined
        : "the gateway connection is down",
    async stop() {
      await inOrder.idle();
      await client.destroy();
    },
  };
}

/** The bot's invite link with the permissions it uses; discord.js builds it on DISCORD_API_URL, people open discord.com. */
function inviteUrlOf(client: Client<true>): string {
  const invite = new URL(
    client.generateInvite({
      scopes: [OAuth2Scopes.Bot, OAuth2Scopes.ApplicationsCommands],
      permissions: [
        PermissionFlagsBits.ViewChannel,
        PermissionFlagsBits.SendMessages,
        PermissionFlagsBits.SendMessagesInThreads,
        PermissionFlagsBits.ReadMessageHistory,
      ],
    }),
  );
  return `https://discord.com/oauth2/authorize${invite.search}`;
}

/** discord:dm:<channel>, discord:<guild>:<channel>[:<thread>]: the channel (or thread) its messages are in. */
function discordChannelOf(sessionId: string): string {
  return sessionId.split(":").at(-1) ?? "";
}

/**
 * The buttons' message as the approval now stands: once decided, the outcome without buttons; still
 * pending (an approval counted toward a rule of several), the question with who approved so far.
 */
async function showDecision(client: Client, approval: Approval): Promise<void> {
  if (!approval.messageRef) return;
  const [channelId = "", messageId = ""] = approval.messageRef.split(":");
  const channel = await client.channels.fetch(channelId);
  if (!channel?.isTextBased()) return;
  const pending = approval.status === "pending";
  await channel.messages.edit(messageId, {
    content: pending ? approvalQuestionText(approval) : approvalOutcomeText(approval),
    components: pending ? [approvalButtons(approval)] : [],
    allowedMentions: NO_PINGS,
  });
}

/**
 * The roles of the person clicking, as approver entries (`role:<id>`): from the member Discord sends
 * with a guild interaction over the bot's own gateway connection (a click in a DM has none). discord.js
 * gives a cached guild's member as a GuildMember, whose roles it looks up in the guild's roles (all of
 * them, from GUILD_CREATE and the role events), else Discord's own member with the role ids.
 */
export function rolesOf(interaction: Pick<ButtonInteraction, "member">): string[] {
  const roles = interaction.member?.roles;
  const ids = roles === undefined ? [] : Array.isArray(roles) ? roles : [...roles.cache.keys()];
  return ids.map((id) => `${ROLE_PREFIX}${id}`);
}
