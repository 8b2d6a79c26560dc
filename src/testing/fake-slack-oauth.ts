// The fake Slack's side of installing an app in many workspaces, as Slack does it:
//
//  - GET /oauth/v2/authorize?client_id&scope&state[&redirect_uri] is Slack's consent page. The person
//    picks the workspace (here `&team=<id>`, or `&deny=1` to cancel) and the fake redirects the
//    browser to the app's redirect URL with `code` and `state` (Location header, 302).
//  - oauth.v2.access exchanges that code (single use, with the app's client id and secret) for the
//    workspace's bot token, in Slack's answer shape; from then on that token is valid, answers
//    auth.test as its workspace, and stops working when the workspace is uninstalled (`revoke`).
import { randomBytes } from "node:crypto";
import type { ServerResponse } from "node:http";

export interface FakeWorkspace {
  teamId: string;
  teamName?: string;
  botToken: string;
  botUserId: string;
  botId: string;
  /** The Enterprise Grid org it belongs to. */
  enterpriseId?: string;
  /** Installed on the whole org: its token answers every workspace of it (`teamId` is then one of them). */
  orgWide?: boolean;
}

export interface FakeOAuthOptions {
  clientId: string;
  clientSecret: string;
  workspaces: FakeWorkspace[];
}

/** Who an event comes from (default: the fake's own workspace). */
export interface EventTeam {
  teamId: string;
  enterpriseId?: string;
  orgWide?: boolean;
  botUserId?: string;
}

export interface FakeOAuth {
  /** Slack's authorize page on the fake, for SLACK_AUTHORIZE_URL. */
  authorizeUrl: string;
  /** The app's redirect URL as its settings page would list it (used when the authorize request names none). */
  setRedirectUrl(url: string): void;
  /** The workspace (or org) uninstalled the app: its token stops working. */
  revoke(teamId: string): void;
}

type Args = Record<string, unknown>;
type Reply = Record<string, unknown>;

export interface FakeOAuthServer extends FakeOAuth {
  /** oauth.v2.access: needs no token (the client id and secret are its credentials). */
  access(args: Args): Reply;
  /** The installed workspace whose bot token this is; undefined for any other token. */
  workspaceOf(token: string | undefined): FakeWorkspace | undefined;
  handleAuthorize(query: URLSearchParams, response: ServerResponse): void;
}

const CODE_TTL_MS = 10 * 60_000;

export function createFakeOAuth(options: FakeOAuthOptions, origin: () => string, appId: string): FakeOAuthServer {
  const codes = new Map<string, { workspace: FakeWorkspace; scope: string; expiresAt: number; redirectUri?: string }>();
  const installed = new Map<string, FakeWorkspace>(); // by bot token
  let redirectUrl: string | undefined;

  const redirect = (response: ServerResponse, location: string) => {
    response.writeHead(302, { Location: location });
    response.end();
  };
  const refuse = (response: ServerResponse, status: number, text: string) => {
    response.writeHead(status, { "Content-Type": "text/plain" });
    response.end(text);
  };

  return {
    get authorizeUrl() {
      return `${origin()}/oauth/v2/authorize`;
    },
    setRedirectUrl(url) {
      redirectUrl = url;
    },
    revoke(teamId) {
      for (const [token, workspace] of installed)
        if (workspace.teamId === teamId || workspace.enterpriseId === teamId) installed.delete(token);
    },
    handleAuthorize(query, response) {
      if (query.get("client_id") !== options.clientId) return refuse(response, 400, "fake-slack: unknown client_id");
      const target = query.get("redirect_uri") ?? redirectUrl;
      if (!target) return refuse(response, 400, "fake-slack: the app has no redirect URL (setRedirectUrl)");
      const back = new URL(target);
      const state = query.get("state");
      if (state !== null) back.searchParams.set("state", state);
      if (query.get("deny")) {
        back.searchParams.set("error", "access_denied");
        return redirect(response, back.toString());
      }
      const workspace = options.workspaces.find((candidate) => candidate.teamId === query.get("team"));
      if (!workspace)
        return refuse(response, 400, "fake-slack: add team=<id> of a known workspace to choose where to install");
      const code = `${Date.now()}.${randomBytes(12).toString("hex")}`;
      codes.set(code, {
        workspace,
        scope: query.get("scope") ?? "",
        expiresAt: Date.now() + CODE_TTL_MS,
        ...(query.get("redirect_uri") ? { redirectUri: query.get("redirect_uri") as string } : {}),
      });
      back.searchParams.set("code", code);
      redirect(response, back.toString());
    },
    access(args) {
      if (args.client_id !== options.clientId) return { ok: false, error: "invalid_client_id" };
      if (args.client_secret !== options.clientSecret) return { ok: false, error: "bad_client_secret" };
      const grant = codes.get(String(args.code ?? ""));
      codes.delete(String(args.code ?? "")); // single use, as in Slack
      if (!grant || grant.expiresAt < Date.now()) return { ok: false, error: "invalid_code" };
      if (grant.redirectUri !== undefined && args.redirect_uri !== grant.redirectUri)
        return { ok: false, error: "bad_redirect_uri" };
      const { workspace } = grant;
      installed.set(workspace.botToken, workspace);
      const enterprise = workspace.enterpriseId ? { id: workspace.enterpriseId, name: "Fake Org" } : null;
      return {
        ok: true,
        app_id: appId,
        authed_user: { id: "U0INSTALLER" },
        scope: grant.scope,
        token_type: "bot",
        access_token: workspace.botToken,
        bot_user_id: workspace.botUserId,
        team: workspace.orgWide
          ? null
          : { id: workspace.teamId, name: workspace.teamName ?? `Team ${workspace.teamId}` },
        enterprise,
        is_enterprise_install: workspace.orgWide === true,
      };
    },
    workspaceOf: (token) => (token === undefined ? undefined : installed.get(token)),
  };
}
