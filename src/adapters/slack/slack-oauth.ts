/**
 * One Slack app in many workspaces (SLACK_CLIENT_ID, SLACK_CLIENT_SECRET, SLACK_STATE_SECRET): each
 * workspace installs it through Bolt's own OAuth flow (/slack/install, then Slack, then
 * /slack/oauth_redirect), and Bolt's authorize answers every event with that workspace's token, read
 * from the installation store here. The store keeps the installations in the database with their
 * tokens sealed (AES-256-GCM, GLASSBOX_ENCRYPTION_KEY); runs post through clients that look their
 * workspace's token up when they call, so any process or worker thread can answer any workspace.
 */
import { createServer, type ServerResponse } from "node:http";
import {
  webApi,
  type App,
  type AppOptions,
  type Context,
  type Installation,
  type InstallationQuery,
  type InstallationStore,
} from "@slack/bolt";
import type { Logger as SlackLogger, WebAPICallResult, WebClient, WebClientOptions } from "@slack/web-api";
import { configurationError } from "../../agent/errors.js";
import type { SlackConfig, SlackOAuthConfig } from "../../config.js";
import type { Logger } from "../../logger.js";
import { openInstallationRecords } from "../../store/installations.js";
import { createTokenCipher, parseEncryptionKey } from "./token-crypto.js";

export const INSTALL_PATH = "/slack/install";
export const REDIRECT_PATH = "/slack/oauth_redirect";

/** Bolt's installation store, plus what runs need: the token that answers a workspace. */
export interface SlackInstallations extends InstallationStore {
  deleteInstallation(query: InstallationQuery<boolean>): Promise<void>;
  /** The bot token for workspace `teamId` (its own install, or its org's); undefined when glassbox is not installed there. */
  botTokenForTeam(teamId: string): Promise<string | undefined>;
  close(): Promise<void>;
}

/** Opens the installations in the store's database; a missing or malformed key is one sentence. */
export async function openSlackInstallations(oauth: SlackOAuthConfig): Promise<SlackInstallations> {
  const cipher = createTokenCipher(parseEncryptionKey(oauth.encryptionKey));
  const records = await openInstallationRecords(oauth.database);
  const linked = new Set<string>(); // workspaces of org-wide installs already linked by this process
  // The record's key is the sealed value's additional data: a value moved to another row does not open.
  const unseal = (record: { key: string; sealed: string }) =>
    JSON.parse(cipher.open(record.sealed, record.key)) as Installation;

  const allowed = allowList(oauth.allowedWorkspaces ?? []);
  return {
    async storeInstallation(installation) {
      allowed.check(installation.team?.id, installation.enterprise?.id);
      const key = installationKey(
        installation.isEnterpriseInstall === true,
        installation.enterprise?.id,
        installation.team?.id,
      );
      if (!key || !installation.bot)
        throw new Error("Slack's answer named no workspace or no bot token; the app needs a bot user and bot scopes.");
      await records.put({
        key,
        teamId: installation.team?.id ?? null,
        enterpriseId: installation.enterprise?.id ?? null,
        orgWide: installation.isEnterpriseInstall === true,
        botUserId: installation.bot.userId,
        scopes: installation.bot.scopes,
        sealed: cipher.seal(JSON.stringify(installation), key),
        installedAt: new Date().toISOString(),
      });
    },
    async fetchInstallation(query, logger) {
      // Bolt takes a throw here as "not authorized": a workspace off the list goes unanswered, installed or not.
      allowed.check(query.teamId, query.enterpriseId);
      const key = installationKey(query.isEnterpriseInstall, query.enterpriseId, query.teamId);
      const record = key === undefined ? undefined : await records.get(key);
      // Bolt takes a throw here as "not authorized": the event is acknowledged and goes unanswered.
      if (!record)
        throw new Error(
          `glassbox is not installed in Slack ${query.isEnterpriseInstall ? "org" : "workspace"} ${key ?? "(none named)"} (it was uninstalled, or never installed there), so its events go unanswered.`,
        );
      const installation = unseal(record);
      if (record.orgWide && query.teamId && !linked.has(query.teamId)) {
        // Runs know their workspace only (slack:<team>:...): remember which org install answers it.
        await records.linkTeam(query.teamId, record.key).then(
          () => linked.add(query.teamId as string),
          (error: unknown) =>
            logger?.warn(
              `could not note that workspace ${query.teamId} belongs to ${record.key}: ${(error as Error).message}`,
            ),
        );
      }
      return installation;
    },
    async deleteInstallation(query) {
      const key = installationKey(query.isEnterpriseInstall, query.enterpriseId, query.teamId);
      if (key !== undefined) await records.remove(key);
    },
    async botTokenForTeam(teamId) {
      const record = await records.forTeam(teamId);
      return record ? unseal(record).bot?.token : undefined;
    },
    close: () => records.close(),
  };
}

/** A workspace or org that SLACK_ALLOWED_WORKSPACES leaves out. */
export class WorkspaceNotAllowed extends Error {
  constructor(readonly workspace: string) {
    super(`Slack workspace ${workspace} is not in SLACK_ALLOWED_WORKSPACES, so glassbox does not serve it.`);
    this.name = "WorkspaceNotAllowed";
  }
}

/** The allow-list: a workspace passes when it, or its org, is on it; an empty list lets any pass. */
function allowList(ids: string[]) {
  const allowed = new Set(ids);
  return {
    check(teamId: string | undefined, enterpriseId: string | undefined): void {
      if (allowed.size === 0) return;
      if ((teamId && allowed.has(teamId)) || (enterpriseId && allowed.has(enterpriseId))) return;
      throw new WorkspaceNotAllowed(teamId ?? enterpriseId ?? "(none named)");
    },
  };
}

/** An installation's key: the org for an org-wide install, else the workspace. */
function installationKey(
  orgWide: boolean,
  enterpriseId: string | undefined,
  teamId: string | undefined,
): string | undefined {
  return orgWide ? enterpriseId : teamId;
}

/**
 * A Slack user as a multi-workspace app counts them: `<team>:<user>` (the org's id for an org-wide
 * install), so daily caps, remembered facts and approvals never mix people of two workspaces.
 */
export function installationUserId(
  context: Pick<Context, "teamId" | "enterpriseId" | "isEnterpriseInstall">,
  user: string,
): string {
  return `${(context.isEnterpriseInstall ? context.enterpriseId : context.teamId) ?? "unknown"}:${user}`;
}

/** The Slack user id inside a user id that installationUserId made (a plain Slack id is returned as it is). */
export function slackUserOf(userId: string): string {
  return userId.slice(userId.lastIndexOf(":") + 1);
}

/**
 * Web API clients per workspace whose token is looked up at each call, so a run (here, in a worker
 * thread or in another process) posts with its own workspace's token, and stops being able to once
 * the workspace uninstalls the app.
 */
export function createWorkspaceClients(
  installations: Pick<SlackInstallations, "botTokenForTeam">,
  options: WebClientOptions,
): (teamId: string) => WebClient {
  const clients = new Map<string, WebClient>();
  return (teamId) => {
    let client = clients.get(teamId);
    if (!client) clients.set(teamId, (client = new WorkspaceClient(teamId, installations, options)));
    return client;
  };
}

class WorkspaceClient extends webApi.WebClient {
  readonly #teamId: string;
  readonly #installations: Pick<SlackInstallations, "botTokenForTeam">;

  constructor(teamId: string, installations: Pick<SlackInstallations, "botTokenForTeam">, options: WebClientOptions) {
    // team_id on every call, as Bolt's own clients do: an org-wide token needs it to know the workspace.
    super(undefined, { ...options, teamId });
    this.#teamId = teamId;
    this.#installations = installations;
  }

  override async apiCall(method: string, options: Record<string, unknown> = {}): Promise<WebAPICallResult> {
    const token =
      typeof options.token === "string" ? options.token : await this.#installations.botTokenForTeam(this.#teamId);
    if (!token)
      throw new Error(
        `glassbox is no longer installed in Slack workspace ${this.#teamId}, so it cannot call ${method} there.`,
      );
    return super.apiCall(method, { ...options, token });
  }
}

/** What the App needs for the OAuth flow and for authorizing each event from the installation store. */
export function oauthAppOptions(
  slack: SlackConfig,
  oauth: SlackOAuthConfig,
  installations: SlackInstallations,
  log: Logger,
): Partial<AppOptions> {
  return {
    clientId: oauth.clientId,
    clientSecret: oauth.clientSecret,
    stateSecret: oauth.stateSecret,
    scopes: oauth.scopes,
    installationStore: installations,
    installerOptions: {
      installPath: INSTALL_PATH,
      redirectUriPath: REDIRECT_PATH,
      directInstall: true, // the install link goes straight to Slack's consent page
      ...(oauth.authorizeUrl ? { authorizationUrl: oauth.authorizeUrl } : {}),
      // Socket Mode serves the install pages on an HTTP server of Bolt's own, on PORT.
      ...(slack.appToken ? { port: slack.port } : {}),
      callbackOptions: {
        success: (installation, _options, _request, response) => {
          const where = installation.team?.name ?? installation.enterprise?.name ?? "your workspace";
          log.info(
            { team: installation.team?.id, enterprise: installation.enterprise?.id },
            "Slack: installed in a workspace",
          );
          page(
            response,
            200,
            `glassbox is installed in ${where}: invite it to a channel (/invite @glassbox) and mention it there, or send it a direct message.`,
          );
        },
        failure: (error, _options, _request, response) => {
          log.warn({ code: error.code, error: error.message }, "Slack: an installation did not complete");
          const refused = notAllowedIn(error);
          const [status, sentence] = refused
            ? [
                403,
                `This glassbox serves only the Slack workspaces its operator chose, and ${refused.workspace} is not one of them; ask whoever runs it to add it to SLACK_ALLOWED_WORKSPACES.`,
              ]
            : failureSentence(error.code, error.message);
          page(response, status, sentence);
        },
      },
    },
  };
}

/** The allow-list's refusal, as Bolt hands it on (itself, or wrapped as the cause). */
function notAllowedIn(error: unknown): WorkspaceNotAllowed | undefined {
  for (let cause = error, depth = 0; cause instanceof Error && depth < 4; cause = cause.cause, depth++)
    if (cause instanceof WorkspaceNotAllowed) return cause;
  return undefined;
}

function failureSentence(code: string, message: string): [number, string] {
  if (code === "slack_oauth_invalid_state" || code === "slack_oauth_missing_state") {
    return [
      400,
      `This installation link has expired or was opened in another browser; start again at ${INSTALL_PATH} in this browser.`,
    ];
  }
  if (code === "slack_oauth_missing_code")
    return [400, `Slack sent no authorization code; start the installation again at ${INSTALL_PATH}.`];
  if (/cancelled/i.test(message))
    return [400, `The installation was cancelled in Slack; start again at ${INSTALL_PATH} to install glassbox.`];
  return [
    500,
    `Slack did not complete the installation; try again at ${INSTALL_PATH}, and if it fails again, check SLACK_CLIENT_ID and SLACK_CLIENT_SECRET.`,
  ];
}

function page(response: ServerResponse, status: number, sentence: string): void {
  response.writeHead(status, { "Content-Type": "text/html; charset=utf-8" });
  response.end(
    `<!doctype html><html><head><meta charset="utf-8"><title>glassbox</title></head><body><p>${escapeHtml(sentence)}</p></body></html>`,
  );
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (character) => `&#${character.charCodeAt(0)};`);
}

/** A workspace that uninstalls the app, or revokes its bot token, is forgotten: its token is deleted. */
export function forgetUninstalledWorkspaces(app: App, installations: SlackInstallations, log: Logger): void {
  const forget = async (context: Context, why: string) => {
    await installations.deleteInstallation({
      teamId: context.teamId,
      enterpriseId: context.enterpriseId,
      isEnterpriseInstall: context.isEnterpriseInstall,
    });
    log.info({ team: context.teamId, enterprise: context.enterpriseId }, `Slack: ${why}; its installation is deleted`);
  };
  app.event("app_uninstalled", async ({ context }) => forget(context, "the app was uninstalled from a workspace"));
  app.event("tokens_revoked", async ({ event, context }) => {
    if ((event.tokens.bot ?? []).length > 0) await forget(context, "a workspace revoked the bot's token");
  });
}

/**
 * Bolt's logger with the client secret and state secret written out of every line: web-api logs a
 * request's body at debug level, and oauth.v2.access carries the client secret in it. (Tokens are
 * redacted by web-api and by glassbox's logger already.)
 */
export function withoutSecrets(logger: SlackLogger, oauth: SlackOAuthConfig): SlackLogger {
  const secrets = [oauth.clientSecret, oauth.stateSecret];
  const hide = (messages: unknown[]) =>
    messages.map((message) => secrets.reduce((text, secret) => text.split(secret).join("[redacted]"), String(message)));
  return {
    ...logger,
    debug: (...messages) => logger.debug(...hide(messages)),
    info: (...messages) => logger.info(...hide(messages)),
    warn: (...messages) => logger.warn(...hide(messages)),
    error: (...messages) => logger.error(...hide(messages)),
  };
}

/**
 * In Socket Mode, Bolt's install server listens on PORT without waiting to hear whether it could, so
 * a taken port would end the process with a stack trace: find out first, in one sentence.
 */
export async function assertInstallPortFree(port: number): Promise<void> {
  const probe = createServer();
  await new Promise<void>((resolve, reject) => {
    probe.once("error", (error: NodeJS.ErrnoException) =>
      reject(
        error.code === "EADDRINUSE"
          ? configurationError(
              `PORT ${port} is taken, and the Slack install pages (${INSTALL_PATH}) need it; set PORT to a free port.`,
            )
          : error,
      ),
    );
    probe.listen(port, () => probe.close(() => resolve()));
  });
}
