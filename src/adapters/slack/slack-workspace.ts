/** Checking one workspace's bot token before Bolt starts, for the adapter and the ingress role alike. */
import { webApi } from "@slack/bolt";
import type { WebClientOptions } from "@slack/web-api";
import { configurationError } from "../../agent/errors.js";
import type { SlackConfig } from "../../config.js";

/**
 * One workspace: its token is checked before the App exists. Given the bot's ids, Bolt makes no
 * auth.test of its own, whose failure would be an unhandled rejection beside our one-sentence error.
 * Few retries and a time limit: a wrong SLACK_API_URL must fail startup, not retry for half an hour.
 */
export async function singleWorkspace(
  slack: SlackConfig,
  clientOptions: WebClientOptions,
): Promise<{ token?: string; botUserId: string; botId?: string }> {
  if (!slack.botToken)
    throw configurationError(
      "Slack needs SLACK_BOT_TOKEN, or SLACK_CLIENT_ID and the other OAuth settings for an app installed in many workspaces.",
    );
  const identity = await new webApi.WebClient(slack.botToken, {
    ...clientOptions,
    timeout: 10_000,
    retryConfig: { retries: 2 },
  }).auth
    .test()
    .catch((error: { code?: string; data?: { error?: string } }) => {
      // web-api marks a failure to reach Slack at all (as opposed to Slack's answer) with this code.
      if (error.code === "slack_webapi_request_error") {
        throw configurationError(
          `I can't reach Slack at ${slack.apiUrl ?? "https://slack.com/api/"}; check SLACK_API_URL (or leave it unset) and the network.`,
        );
      }
      throw configurationError(
        `Slack refused SLACK_BOT_TOKEN (${error.data?.error ?? String(error)}); copy the Bot User OAuth Token (xoxb-...) from your app's OAuth & Permissions page.`,
      );
    });
  return {
    token: slack.botToken,
    botUserId: identity.user_id ?? "",
    ...(identity.bot_id ? { botId: identity.bot_id } : {}),
  };
}
