/**
 * How every Web API client of the bot talks to Slack (Bolt's, the worker surfaces', each workspace's):
 * over undici, to SLACK_API_URL if set, with Slack's log lines in ours.
 */
import { LogLevel, type Logger as SlackLogger, type WebClientOptions } from "@slack/web-api";
import type { SlackConfig } from "../../config.js";
import type { Logger } from "../../logger.js";
import { undiciFetch } from "../../undici-fetch.js";

/** How every Web API client of the bot talks to Slack: over undici, to SLACK_API_URL if set, logging to our log at warn and above. */
export function slackClientOptions(
  slack: SlackConfig,
  log: Logger,
): WebClientOptions & { logger: SlackLogger; logLevel: LogLevel } {
  return {
    fetch: undiciFetch,
    ...(slack.apiUrl ? { slackApiUrl: slack.apiUrl } : {}),
    logger: slackLogger(log),
    logLevel: LogLevel.WARN,
  };
}

function slackLogger(log: Logger): SlackLogger {
  let level = LogLevel.WARN;
  const child = log.child({ component: "bolt" });
  return {
    debug: (...messages) => child.debug(messages.map(String).join(" ")),
    info: (...messages) => child.info(messages.map(String).join(" ")),
    warn: (...messages) => child.warn(messages.map(String).join(" ")),
    error: (...messages) => child.error(messages.map(String).join(" ")),
    setLevel: (next) => {
      level = next;
    },
    getLevel: () => level,
    setName: () => {},
  };
}
