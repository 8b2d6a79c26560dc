/**
 * People and places by the names the platforms give them, for the trace viewer: a Slack member's
 * display name (users.info) and a channel's (conversations.info), a Discord member's nickname or
 * name (the guild member, or the user in a DM) and a channel's. Each is asked once, with the bot's
 * own credentials (with the app installed in many workspaces, each workspace's own token), and kept
 * for the life of the process; a lookup that fails or takes too long leaves the id to show. Nothing
 * here writes to the store.
 */
import { webApi } from "@slack/bolt";
import type { WebClient } from "@slack/web-api";
import { REST, Routes } from "discord.js";
import type { GlassboxConfig } from "../config.js";
import type { Logger } from "../logger.js";
import { slackClientOptions } from "./slack/slack-client-options.js";
import { createWorkspaceClients, type SlackInstallations } from "./slack/slack-oauth.js";

export interface NameBook {
  /** The display name of `userId` on the platform of `sessionId`; undefined where unknown. */
  person(sessionId: string, userId: string): Promise<string | undefined>;
  /** The name of the channel (or thread) `sessionId` is in, without its `#`; undefined where unknown. */
  channel(sessionId: string): Promise<string | undefined>;
}

/** How long a page waits for a name it has not got yet; the lookup goes on and is kept for the next one. */
const WAIT_MS = 1_500;
/** A process keeps at most this many names (people and channels); past it, it starts afresh. */
const MAX_NAMES = 10_000;

type Lookup = (key: string) => Promise<string | undefined>;

/**
 * The names of the platforms this process has credentials for; undefined when it has none. With the
 * Slack app installed through OAuth, `installations` gives each workspace's token.
 */
export function createNameBook(
  config: Pick<GlassboxConfig, "slack" | "discord">,
  log: Logger,
  installations?: Pick<SlackInstallations, "botTokenForTeam">,
): NameBook | undefined {
  const slack =
    config.slack && (config.slack.botToken || installations) ? slackNames(config.slack, log, installations) : undefined;
  const discord = config.discord ? discordNames(config.discord) : undefined;
  if (!slack && !discord) return undefined;
  const kept = new Map<string, Promise<string | undefined>>();
  const once = (key: string, lookup: Lookup) => {
    let name = kept.get(key);
    if (!name) {
      if (kept.size >= MAX_NAMES) kept.clear();
      name = lookup(key).catch((error: unknown) => {
        log.debug({ error: (error as Error).message, key }, "a name could not be read from its platform");
        return undefined;
      });
      kept.set(key, name);
    }
    return withinWait(name);
  };
  const platformOf = (sessionId: string) => sessionId.split(":")[0];
  return {
    person(sessionId, userId) {
      const parts = sessionId.split(":");
      if (platformOf(sessionId) === "slack" && slack) {
        const user = userId.includes(":") ? (userId.split(":").at(-1) ?? "") : userId; // <team>:<user> with OAuth
        const team = parts[1] ?? "";
        return /^[UW][A-Z0-9]+$/.test(user)
          ? once(`slack:user:${team}:${user}`, () => slack.person(team, user))
          : none();
      }
      if (platformOf(sessionId) === "discord" && discord && /^\d{5,20}$/.test(userId)) {
        const guild = parts[1] === "dm" ? undefined : parts[1];
        return once(`discord:user:${guild ?? "dm"}:${userId}`, () => discord.person(userId, guild));
      }
      return none();
    },
    channel(sessionId) {
      const parts = sessionId.split(":");
      if (platformOf(sessionId) === "slack" && slack && parts[2]?.startsWith("C"))
        return once(`slack:channel:${parts[1]}:${parts[2]}`, () => slack.channel(parts[1] ?? "", parts[2] as string));
      if (platformOf(sessionId) === "discord" && discord && parts[1] !== "dm") {
        const channel = parts.at(-1) ?? "";
        return once(`discord:channel:${channel}`, () => discord.channel(channel));
      }
      return none();
    },
  };
}

const none = async (): Promise<string | undefined> => undefined;

function withinWait(name: Promise<string | undefined>): Promise<string | undefined> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(undefined), WAIT_MS);
    timer.unref();
    void name.then((found) => {
      clearTimeout(timer);
      resolve(found);
    });
  });
}

/**
 * One workspace's bot token, or each workspace's from the installations: clients that never wait out
 * a rate limit (a page shows the id then).
 */
function slackNames(
  slack: NonNullable<GlassboxConfig["slack"]>,
  log: Logger,
  installations?: Pick<SlackInstallations, "botTokenForTeam">,
) {
  const options = { ...slackClientOptions(slack, log), rejectRateLimitedCalls: true, retryConfig: { retries: 0 } };
  const single: WebClient | undefined = installations ? undefined : new webApi.WebClient(slack.botToken, options);
  const clientOf = installations ? createWorkspaceClients(installations, options) : () => single as WebClient;
  return {
    async person(team: string, user: string) {
      const found = (await clientOf(team).users.info({ user })).user;
      const profile = found?.profile;
      return (
        nonEmpty(profile?.display_name) ?? nonEmpty(profile?.real_name) ?? nonEmpty(found?.real_name) ?? found?.name
      );
    },
    async channel(team: string, channel: string) {
      return nonEmpty((await clientOf(team).conversations.info({ channel })).channel?.name);
    },
  };
}

/** The bot's token over REST alone (no gateway): a server's nickname first, then the person's own names. */
function discordNames(discord: NonNullable<GlassboxConfig["discord"]>) {
  const rest = new REST(discord.apiUrl ? { api: discord.apiUrl } : {}).setToken(discord.token);
  interface User {
    username?: string;
    global_name?: string | null;
  }
  const nameOf = (user: User | undefined) => nonEmpty(user?.global_name ?? undefined) ?? nonEmpty(user?.username);
  return {
    async person(userId: string, guild: string | undefined) {
      if (!guild) return nameOf((await rest.get(Routes.user(userId))) as User);
      const member = (await rest.get(Routes.guildMember(guild, userId))) as { nick?: string | null; user?: User };
      return nonEmpty(member.nick ?? undefined) ?? nameOf(member.user);
    },
    async channel(channel: string) {
      return nonEmpty(((await rest.get(Routes.channel(channel))) as { name?: string }).name);
    },
  };
}

const nonEmpty = (text: string | undefined) => (text?.trim() ? text.trim() : undefined);

/**
 * Where a session is, for people: `#support · thread by Ana`, `DM with Ana`, `#general`,
 * `#general · thread`, the chat page or the command line. `channel` and `owner` are the names
 * found (the ids stand in for them otherwise).
 */
export function placeNameOf(sessionId: string, channel: string | undefined, owner: string | undefined): string {
  const parts = sessionId.split(":");
  const [platform] = parts;
  const who = owner ? ` by ${owner}` : "";
  if (platform === "slack") {
    const [, , channelId = "", thread = ""] = parts;
    if (channelId.startsWith("D"))
      return `DM with ${owner ?? "someone"}${thread && thread !== "main" ? " · thread" : ""}`;
    return `#${channel ?? channelId}${thread && thread !== "main" ? ` · thread${who}` : ""}`;
  }
  if (platform === "discord") {
    if (parts[1] === "dm") return `DM with ${owner ?? "someone"}`;
    return `#${channel ?? parts.at(-1) ?? ""}${parts.length > 3 ? " · thread" : ""}`;
  }
  if (platform === "web") return "chat page";
  if (platform === "cli") return "command line";
  return platform ?? sessionId;
}
