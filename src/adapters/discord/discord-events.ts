/**
 * What a Discord event means for glassbox, as plain functions: the conversation (session key) of a
 * channel, a message's input without mentions, the id that claims it, and where a button click came
 * from. Used by the inbound handler (discord-inbound.ts), in every process that receives Discord events.
 */
import type { ClickOrigin } from "../../agent/approvals.js";
import { costOf, priceOf, type Price } from "../../agent/cost.js";

/** A channel as discord.js gives it (a text channel, a thread, or a DM). */
export interface DiscordChannelLike {
  id: string;
  isDMBased(): boolean;
  isThread(): boolean;
  parentId?: string | null;
}

/** discord:dm:<channel>, discord:<guild>:<channel>, or discord:<guild>:<channel>:<thread>. */
export function discordSessionKey(channel: DiscordChannelLike, guildId: string | null): string {
  if (channel.isDMBased()) return `discord:dm:${channel.id}`;
  if (channel.isThread() && channel.parentId) return `discord:${guildId}:${channel.parentId}:${channel.id}`;
  return `discord:${guildId}:${channel.id}`;
}

/** The message without user mentions (the bot's included), trimmed. */
export const discordInputOf = (content: string): string => content.replace(/<@!?\d+>/g, "").trim();

/** The id that claims a message: a gateway replay after a resume carries the same one. */
export const discordMessageId = (messageId: string): string => `discord:message:${messageId}`;
export const discordInteractionId = (interactionId: string): string => `discord:interaction:${interactionId}`;

/**
 * Where a click came from, as Discord says: the guild (or, for a DM, its channel) starts the
 * session key; the channel the message is in and the message make the messageRef (<channel>:<message>).
 */
export function discordClickOrigin(interaction: {
  guildId: string | null;
  channelId: string;
  message: { id: string };
}): ClickOrigin {
  const sessionPrefix = interaction.guildId ? `discord:${interaction.guildId}:` : `discord:dm:${interaction.channelId}`;
  return { sessionPrefix, messageRef: `${interaction.channelId}:${interaction.message.id}` };
}

/** A button's id, glassbox:approve:<approval> or glassbox:deny:<approval>; undefined for another button. */
export function approvalButton(customId: string): { approvalId: string; approved: boolean } | undefined {
  const [prefix, verb, approvalId] = customId.split(":");
  if (prefix !== "glassbox" || !approvalId || (verb !== "approve" && verb !== "deny")) return undefined;
  return { approvalId, approved: verb === "approve" };
}

/** /usage's answer: a conversation's runs, tokens and cost, on the model named (cost unknown without a price). */
export function sessionUsageText(
  usage: { runs: number; promptTokens: number; completionTokens: number },
  model: { name: string; prices?: Record<string, Price> } | undefined,
): string {
  const cost = model ? costOf(priceOf(model.name, model.prices), usage) : null;
  const price =
    cost === null ? `cost unknown (no price for ${model?.name ?? "the model"})` : `about $${cost.toFixed(4)}`;
  return `This conversation: ${usage.runs} run${usage.runs === 1 ? "" : "s"}, ${usage.promptTokens} prompt + ${usage.completionTokens} completion tokens, ${price}.`;
}
