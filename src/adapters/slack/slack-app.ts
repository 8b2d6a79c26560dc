/**
 * The Bolt App of the adapter and of the ingress role alike: one workspace (its token checked
 * first) or many (each event authorized from the installations in the database), Socket Mode or
 * HTTP; and who the bot and the sender are in an event's workspace.
 */
import { App, type Context } from "@slack/bolt";
import type { SlackConfig } from "../../config.js";
import type { Logger } from "../../logger.js";
import { slackClientOptions } from "./slack-client-options.js";
import {
  forgetUninstalledWorkspaces,
  installationUserId,
  oauthAppOptions,
  openSlackInstallations,
  withoutSecrets,
} from "./slack-oauth.js";
import { singleWorkspace } from "./slack-workspace.js";

export type SlackInstallations = Awaited<ReturnType<typeof openSlackInstallations>>;

export interface SlackApp {
  app: App;
  /** Installed in many workspaces: their installations (close them with the app); undefined for one workspace. */
  installations?: SlackInstallations;
  /** The options every Web API client of the bot takes (slackClientOptions). */
  clientOptions: ReturnType<typeof slackClientOptions>;
  /** The bot's own user in the event's workspace (installed in many, it is a user of its own in each). */
  botOf(context: Context): string;
  /** Who sent it, as quotas, memory and approvals count people: `<team>:<user>` when installed in many workspaces. */
  userOf(context: Context, user: string): string;
}

/** `processBeforeResponse`: HTTP mode acknowledges only once the listeners have run (the ingress role's acceptance). */
export async function openSlackApp(
  slack: SlackConfig,
  log: Logger,
  options: { processBeforeResponse?: boolean } = {},
): Promise<SlackApp> {
  const clientOptions = slackClientOptions(slack, log);
  const { logger, ...webOptions } = clientOptions; // Bolt takes its logger beside the clients' options
  const installations = slack.oauth ? await openSlackInstallations(slack.oauth) : undefined;
  if (slack.oauth && !slack.oauth.allowedWorkspaces?.length)
    log.warn(
      "Slack: any workspace that finds the install link can install glassbox and be answered; set SLACK_ALLOWED_WORKSPACES to the workspaces it is for",
    );
  try {
    const authorization =
      slack.oauth && installations
        ? oauthAppOptions(slack, slack.oauth, installations, log)
        : await singleWorkspace(slack, clientOptions);
    const botOfToken = authorization.botUserId ?? ""; // one workspace: its bot user, from auth.test
    const app = new App({
      ...authorization,
      logger: slack.oauth ? withoutSecrets(logger, slack.oauth) : logger,
      logLevel: clientOptions.logLevel,
      clientOptions: webOptions,
      ...(slack.appToken
        ? { appToken: slack.appToken, socketMode: true }
        : {
            signingSecret: slack.signingSecret as string,
            ...(options.processBeforeResponse ? { processBeforeResponse: true } : {}),
          }),
    });
    if (installations) forgetUninstalledWorkspaces(app, installations, log);
    return {
      app,
      installations,
      clientOptions,
      botOf: (context) => (installations ? (context.botUserId ?? "") : botOfToken),
      userOf: (context, user) => (installations ? installationUserId(context, user) : user),
    };
  } catch (error) {
    await installations?.close();
    throw error;
  }
}

/**
 * Whether the app receives events: in Socket Mode, while its WebSocket is open (else the client's
 * last state: "connecting", "reconnecting", ...); over HTTP, once it listens. Bolt keeps its receiver
 * private; the Socket Mode client is read from it.
 */
export function slackConnection(app: App, socketMode: boolean): () => string | undefined {
  if (!socketMode) return () => undefined;
  const client = (app as unknown as { receiver?: { client?: SocketClient } }).receiver?.client;
  if (!client) return () => "no Socket Mode client";
  let state = "connecting";
  for (const next of ["connecting", "reconnecting", "disconnecting", "disconnected"])
    client.on(next, () => (state = next));
  client.on("close", () => (state = "disconnected"));
  return () => (client.websocket?.isActive() ? undefined : state);
}

interface SocketClient extends NodeJS.EventEmitter {
  websocket?: { isActive(): boolean };
}
