/**
 * The Discord adapter: discord.js over the gateway. A direct message, or a mention in a server
 * channel, becomes a message to the conversation of that channel (or thread); buttons decide
 * durable approvals; /reset, /stop and /usage manage the conversation.
 */
import {
  Client,
  Events,
  GatewayIntentBits,
  MessageFlags,
  OAuth2Scopes,
  Partials,
  PermissionFlagsBits,
  type ButtonInteraction,
  type ChatInputCommandInteraction,
  type Message,
  type ModalSubmitInteraction,
} from "discord.js";
import { rateInConversation } from "../../agent/feedback.js";
import { feedbackButton, REASON_INPUT, reasonModal, reasonModalRun } from "./discord-feedback.js";
import type { Approval } from "../../agent/approvals.js";
import { createConversations, type Conversations } from "../../conversations/conversations.js";
import type { Price } from "../../agent/cost.js";
import type { DailyLimits } from "../../agent/quota.js";
import type { AgentConfig } from "../../agent/run.js";
import type { Pipelines } from "../../agent/sub-agents.js";
import type { DiscordConfig } from "../../config.js";
import type { Logger } from "../../logger.js";
import type { StorePort } from "../../store/port.js";
import { refusalFor } from "../approval-replies.js";
import { askSomething } from "../example-requests.js";
import {
  approvalButton,
  discordClickOrigin,
  discordInputOf,
  discordInteractionId,
  discordMessageId,
  discordSessionKey,
  sessionUsageText,
} from "./discord-events.js";
import { fetchDiscordFiles } from "./discord-files.js";
import { loginWithCommands } from "./discord-login.js";
import { approvalOutcomeText, NO_PINGS, openDiscordSurface } from "./discord-surface.js";

export interface DiscordAdapter {
  client: Client<true>;
  conversations: Conversations;
  inviteUrl: string;
  stop(): Promise<void>;
}

const EXPIRY_SWEEP_MS = 30_000;

export async function startDiscordAdapter(options: {
  discord: DiscordConfig;
  agent: AgentConfig;
  /** Where claims, approvals and feedback are kept: the agent's store port (SQLite or PostgreSQL). */
  store: StorePort;
  log: Logger;
  approvalTtlSeconds: number;
  prices?: Record<string, Price>;
  dailyLimits?: DailyLimits;
  pipelines?: Pipelines;
  /** What an empty mention suggests asking, from the tools the bot has (exampleRequests). */
  hints?: string[];
}): Promise<DiscordAdapter> {
  const { discord, store, log } = options;
  const client = new Client({
    intents: [
      GatewayIntentBits.Guilds,
      GatewayIntentBits.GuildMessages,
      GatewayIntentBits.DirectMessages,
      GatewayIntentBits.MessageContent,
    ],
    partials: [Partials.Channel], // DM channels are not cached, so DMs arrive on partial channels
    // discord.js sends this with every message and edit that sets none; each one here sets its own too.
    allowedMentions: NO_PINGS,
    ...(discord.apiUrl ? { rest: { api: discord.apiUrl } } : {}),
  });

  const conversations = createConversations(options.agent, store, {
    openSurface: (sessionId) => openDiscordSurface(client, channelOf(sessionId), log),
    showDecision: (approval) => updateApprovalMessage(client, approval),
    approvers: discord.approvers,
    approvalTtlSeconds: options.approvalTtlSeconds,
    sessionPrefix: "discord:",
    pipelines: options.pipelines,
    dailyLimits: options.dailyLimits,
    onError: (error, context) => log.error({ error: (error as Error).message }, `Discord: failed ${context}`),
  });

  client.on(Events.MessageCreate, (message) => {
    void onMessage(message).catch((error: unknown) =>
      log.error({ error: (error as Error).message }, "Discord: a message failed"),
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
      log.error({ error: (error as Error).message }, "Discord: an interaction failed"),
    );
  });

  // A session's message whose files are still being fetched: the next one waits for it, so turns keep their order.
  const readying = new Map<string, Promise<unknown>>();

  async function onMessage(message: Message): Promise<void> {
    if (message.author.bot || message.system || message.author.id === client.user?.id) return;
    const direct = message.channel.isDMBased();
    if (!direct && !(client.user && message.mentions.users.has(client.user.id))) return;
    // Exactly once: a gateway replay after a resume finds the claim and does nothing.
    if (!(await store.claim(discordMessageId(message.id)))) return;
    const sessionId = discordSessionKey(message.channel, message.guildId);
    const input = discordInputOf(message.content);
    if (!input && message.attachments.size === 0) {
      await message.reply({ content: askSomething("Ask me something", options.hints), allowedMentions: NO_PINGS });
      return;
    }
    // Attached files come from Discord's CDN (no token); one that cannot be read is said in a sentence, and the rest still runs.
    const ready = (readying.get(sessionId) ?? Promise.resolve()).then(async () => {
      const files = message.attachments.size > 0 ? await fetchDiscordFiles(message.attachments.values()) : undefined;
      if (files?.problems.length) await message.reply({ content: files.problems.join(" "), allowedMentions: NO_PINGS });
      // Wrapped, so the next message waits for this one to be passed on, not for its run.
      return {
        run: conversations.send({
          sessionId,
          userId: message.author.id,
          input,
          ...(files?.attachments.length ? { attachments: files.attachments } : {}),
        }),
      };
    });
    const sent = ready.then(
      () => undefined,
      () => undefined,
    );
    readying.set(sessionId, sent);
    void sent.finally(() => readying.get(sessionId) === sent && readying.delete(sessionId));
    await (await ready).run;
  }

  /** 👍 / 👎 on an answer, by whoever can see its channel; a 👎 asks for a reason. Never starts a run. */
  async function onFeedback(
    interaction: ButtonInteraction,
    rated: { rating: "up" | "down"; runId: string },
  ): Promise<void> {
    if (!(await store.claim(discordInteractionId(interaction.id)))) return;
    const here = (sessionId: string) =>
      sessionId.startsWith(discordClickOrigin(interaction).sessionPrefix) &&
      channelOf(sessionId) === interaction.channelId;
    if (
      (await rateInConversation(store, { ...rated, userId: interaction.user.id, source: "discord" }, here)) ===
      "not_here"
    ) {
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
    const noted = await store.explainFeedback(
      runId,
      interaction.user.id,
      interaction.fields.getTextInputValue(REASON_INPUT),
    );
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
    const outcome = await conversations.decide({
      ...button,
      userId: interaction.user.id,
      origin: discordClickOrigin(interaction),
    });
    const refusal = refusalFor(outcome, discord.approvers.length > 0);
    if (refusal)
      await interaction.followUp({ content: refusal, flags: MessageFlags.Ephemeral, allowedMentions: NO_PINGS });
  }

  async function onCommand(interaction: ChatInputCommandInteraction): Promise<void> {
    if (!(await store.claim(discordInteractionId(interaction.id)))) return;
    if (!interaction.channel) {
      await interaction.reply({
        content: "I can't use this command here; try it in a channel or a DM where I can read messages.",
        flags: MessageFlags.Ephemeral,
        allowedMentions: NO_PINGS,
      });
      return;
    }
    const sessionId = discordSessionKey(interaction.channel, interaction.guildId);
    if (interaction.commandName === "reset") {
      await conversations.reset(sessionId);
      await interaction.reply({
        content: "Started a new conversation here; I no longer see what was said before.",
        allowedMentions: NO_PINGS,
      });
    } else if (interaction.commandName === "stop") {
      await interaction.reply({
        content: conversations.stop(sessionId) ? "Stopping." : "Nothing is running here.",
        allowedMentions: NO_PINGS,
      });
    } else if (interaction.commandName === "usage") {
      await interaction.reply({
        content: sessionUsageText(await store.sessionUsage(sessionId), {
          name: options.agent.model.name,
          prices: options.prices,
        }),
        flags: MessageFlags.Ephemeral,
        allowedMentions: NO_PINGS,
      });
    }
  }

  const ready = await loginWithCommands(client, discord);
  // discord.js would build the link on DISCORD_API_URL; people open it on discord.com whatever the REST base.
  const invite = new URL(
    ready.generateInvite({
      scopes: [OAuth2Scopes.Bot, OAuth2Scopes.ApplicationsCommands],
      permissions: [
        PermissionFlagsBits.ViewChannel,
        PermissionFlagsBits.SendMessages,
        PermissionFlagsBits.SendMessagesInThreads,
        PermissionFlagsBits.ReadMessageHistory,
      ],
    }),
  );
  const inviteUrl = `https://discord.com/oauth2/authorize${invite.search}`;

  const sweep = setInterval(
    () =>
      void conversations
        .expireApprovals()
        .catch((error: unknown) =>
          log.error({ error: (error as Error).message }, "Discord: expiring approvals failed"),
        ),
    EXPIRY_SWEEP_MS,
  );
  sweep.unref();
  await conversations.expireApprovals(); // approvals that ran out while the bot was down

  return {
    client: ready,
    conversations,
    inviteUrl,
    async stop() {
      clearInterval(sweep);
      await conversations.idle();
      await client.destroy();
    },
  };
}

/** discord:dm:<channel>, discord:<guild>:<channel>, or discord:<guild>:<channel>:<thread>. */

/** The channel a session's messages go to: the thread when there is one. */
function channelOf(sessionId: string): string {
  return sessionId.split(":").at(-1) ?? "";
}

async function updateApprovalMessage(client: Client, approval: Approval): Promise<void> {
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
