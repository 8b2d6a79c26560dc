/** Logging the inbound handler's discord.js client in and registering the slash commands. */
import { Events, SlashCommandBuilder, type Client } from "discord.js";
import { configurationError } from "../../agent/errors.js";
import type { DiscordConfig } from "../../config.js";
import { redactUrl } from "../../redact.js";

export const SLASH_COMMANDS = [
  new SlashCommandBuilder().setName("reset").setDescription("Start a new conversation here"),
  new SlashCommandBuilder().setName("stop").setDescription("Cancel what the bot is doing here"),
  new SlashCommandBuilder().setName("usage").setDescription("Tokens and cost of the conversation here"),
  new SlashCommandBuilder()
    .setName("what-can-you-do")
    .setDescription("What I can do here, for you: tools, who approves, your budget, what I remember"),
].map((command) => command.toJSON());

// Gateway close codes (discord.com/developers/docs/topics/opcodes-and-status-codes).
const AUTHENTICATION_FAILED = 4004;
const DISALLOWED_INTENTS = 4014;

/**
 * Logs in; a token or intent problem becomes one sentence saying what to fix. A bad token fails on
 * REST first (code TokenInvalid); a gateway refusal only shows as the close code of shardDisconnect,
 * which discord.js emits before login() rejects with a plain Error.
 */
export async function loginToDiscord(client: Client, token: string, apiUrl = "https://discord.com/api"): Promise<void> {
  const ready = new Promise<void>((resolve) => client.once(Events.ClientReady, () => resolve()));
  let closeCode: number | undefined;
  const onDisconnect = (event: { code: number }) => {
    closeCode = event.code;
  };
  client.on(Events.ShardDisconnect, onDisconnect);
  try {
    await client.login(token);
  } catch (error) {
    await client.destroy();
    if ((error as { code?: unknown }).code === "TokenInvalid" || closeCode === AUTHENTICATION_FAILED) {
      throw configurationError(
        "Discord refused DISCORD_TOKEN; copy the bot token from the Developer Portal (your app → Bot → Reset Token).",
      );
    }
    if (closeCode === DISALLOWED_INTENTS || /disallowed intents/i.test(String(error))) {
      throw configurationError(
        "Discord refused the Message Content intent; turn on MESSAGE CONTENT INTENT under your app → Bot → Privileged Gateway Intents.",
      );
    }
    if (
      /ECONNREFUSED|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|fetch failed/i.test(
        `${String(error)} ${String((error as { cause?: unknown }).cause)}`,
      )
    ) {
      throw configurationError(
        `I can't reach Discord at ${redactUrl(apiUrl)}; check DISCORD_API_URL (or leave it unset) and the network.`,
      );
    }
    throw error;
  } finally {
    client.off(Events.ShardDisconnect, onDisconnect);
  }
  await ready;
}

/** Logs in, then registers the slash commands: on DISCORD_GUILD_ID's server (at once) or globally (which can take a while to reach every client). */
export async function loginWithCommands(
  client: Client,
  discord: Pick<DiscordConfig, "token" | "apiUrl" | "guildId">,
): Promise<Client<true>> {
  await loginToDiscord(client, discord.token, discord.apiUrl);
  const ready = client as Client<true>;
  if (discord.guildId) await ready.application.commands.set(SLASH_COMMANDS, discord.guildId);
  else await ready.application.commands.set(SLASH_COMMANDS);
  return ready;
}
