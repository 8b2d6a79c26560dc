/**
 * Configuration from the environment (see the table in docs/configuration.md). Reading it never throws for a
 * missing model: that is checked where a model is needed, so `glassbox tools` works without one.
 */
import { resolve } from "node:path";
import { parsePrices, type Price } from "./agent/cost.js";
import { configurationError } from "./agent/errors.js";
import { approverEntry, approverMistake } from "./tools/approver-entries.js";
import type { DailyLimits } from "./agent/quota.js";
import type { ImageMode, ToolMode } from "./agent/llm/index.js";
import { parseMcpServers, type McpServerConfig } from "./tools/mcp-config.js";

export interface GlassboxConfig {
  model: {
    baseURL?: string;
    apiKey?: string;
    model: string;
    toolMode: ToolMode;
    stream: boolean;
    timeoutMs: number;
    /** The longest silence in the middle of a reply (GLASSBOX_MODEL_IDLE_MS). */
    idleMs: number;
    /** The most tokens a reply may hold (GLASSBOX_MAX_OUTPUT_TOKENS); unset: the server's own limit. */
    maxOutputTokens?: number;
    /** Whether attached images go to the model as image parts (GLASSBOX_MODEL_IMAGES: auto, on, off). */
    images: ImageMode;
  };
  /** Conversations idle for more than this many days are removed daily (GLASSBOX_RETENTION_DAYS); unset: kept. */
  retentionDays?: number;
  /** Extra tool modules (paths or package names), from GLASSBOX_TOOLS. */
  toolModules: string[];
  /** The built-in tools this deployment has (GLASSBOX_BUILTIN_TOOLS; default all three, `none` for none). */
  builtinTools: BuiltinToolName[];
  /** The demo shop's tools and database (`npm run demo`, GLASSBOX_DEMO=true); off in every other deployment. */
  demo: boolean;
  /** Runs in progress at once, across every adapter of this process (GLASSBOX_MAX_CONCURRENT_RUNS); the rest wait in arrival order. */
  maxConcurrentRuns: number;
  maxSteps: number;
  toolTimeoutMs: number;
  maxResultChars: number;
  systemPrompt?: string;
  shopDatabasePath: string;
  /** The SQLite file of sessions, messages, runs, approvals and facts (GLASSBOX_DB). */
  databasePath: string;
  /** Where eval case files are written and read (GLASSBOX_EVAL_DIR), resolved against the working directory. */
  evalDir: string;
  /** Most tokens one model request may carry (GLASSBOX_CONTEXT_TOKENS), capped by the model's window. */
  contextTokens: number;
  /** Token encoding override (GLASSBOX_ENCODING); by default it follows the model. */
  encoding?: "o200k_base" | "cl100k_base";
  /** How long a dangerous call waits for a person's decision (GLASSBOX_APPROVAL_TTL, seconds). */
  approvalTtlSeconds: number;
  /** How often a worker looks for scheduled runs that came due (GLASSBOX_SCHEDULE_LOOK_MS). */
  scheduleLookMs: number;
  /** GLASSBOX_RUN_TIMEOUT_MS: the longest a run may work (unset: no limit of its own). */
  runTimeoutMs?: number;
  /** Present when SLACK_BOT_TOKEN is set, or the OAuth settings of an app for many workspaces (SLACK_CLIENT_ID ...). */
  slack?: SlackConfig;
  /** Present when DISCORD_TOKEN is set. */
  discord?: DiscordConfig;
  /** Price overrides per model (GLASSBOX_PRICES, JSON: dollars per million tokens). */
  prices: Record<string, Price>;
  /** Daily caps per user (GLASSBOX_USER_DAILY_TOKENS, GLASSBOX_USER_DAILY_COST in dollars). */
  dailyLimits: DailyLimits;
  /** A JSON file of specialist agents and pipelines (GLASSBOX_AGENTS). */
  agentsFile?: string;
  /** GLASSBOX_CHANNELS: the per-channel settings file (conversations/channel-settings.ts). */
  channelsFile?: string;
  /** Above this many tools, each model call gets only the relevant ones (GLASSBOX_TOOL_SELECTION_THRESHOLD). */
  toolSelectionThreshold: number;
  /** The local web playground and HTTP API. */
  web: WebConfig;
  /**
   * Where people reach the web server (GLASSBOX_PUBLIC_URL), without a trailing slash: answers in Slack
   * and Discord link to their run's trace there. Unset: no link.
   */
  publicUrl?: string;
  /** MCP servers whose tools join the registry, by name (GLASSBOX_MCP_SERVERS, JSON). */
  mcpServers: Record<string, McpServerConfig>;
  /**
   * What this process does when several share PostgreSQL (GLASSBOX_ROLE): `ingress` receives and
   * enqueues, `worker` runs the turns, `all` both; unset, everything runs in one process as before.
   */
  role?: GlassboxRole;
  /**
   * Turns a worker process runs at once (GLASSBOX_WORKER_CONCURRENCY). DEFAULT_WORKER_CONCURRENCY on
   * PostgreSQL; on SQLite (one process) IN_PROCESS_TURNS_AT_ONCE, so that runs are bounded by
   * GLASSBOX_MAX_CONCURRENT_RUNS alone, and a request that waits for one is told it is queued.
   */
  workerConcurrency: number;
}

export const GLASSBOX_ROLES = ["ingress", "worker", "all"] as const;
export type GlassboxRole = (typeof GLASSBOX_ROLES)[number];

export interface WebConfig {
  /** GLASSBOX_WEB, default on: the chat page, the trace viewer and the HTTP API run beside any platform; off runs none. */
  enabled: boolean;
  /** GLASSBOX_WEB_HOST, default 127.0.0.1; any other address needs `apiToken`. */
  host: string;
  /** GLASSBOX_WEB_PORT, default 8787. */
  port: number;
  /** GLASSBOX_HEALTH_PORT: /healthz and /readyz on a port of their own too (on `host`), in every role; unset, none. */
  healthPort?: number;
  /** GLASSBOX_API_TOKEN: /api then needs `Authorization: Bearer <token>`; a service credential that may act for any user. */
  apiToken?: string;
  /** GLASSBOX_API_USERS: bearer tokens of single users (token -> user id); a caller with one acts only as that user. */
  apiUsers: Record<string, string>;
  /** GLASSBOX_REQUESTER_MAY_APPROVE (see DiscordConfig). */
  requesterMayApprove?: boolean;
}

export const BUILTIN_TOOL_NAMES = ["current_time", "calculator", "memory", "schedules"] as const;
/** The built-in tools kept when GLASSBOX_BUILTIN_TOOLS is unset. */
const DEFAULT_BUILTIN_TOOLS: BuiltinToolName[] = [...BUILTIN_TOOL_NAMES];
export type BuiltinToolName = (typeof BUILTIN_TOOL_NAMES)[number];

export interface DiscordConfig {
  token: string;
  /** REST base (for proxies and tests); the gateway address then comes from that API. */
  apiUrl?: string;
  /** Slash commands are registered to this server (instantly) instead of globally. */
  guildId?: string;
  /** User ids who may approve any dangerous call. */
  approvers: string[];
  /** GLASSBOX_REQUESTER_MAY_APPROVE: whether the person who asked may approve their own call, when its tool does not say. */
  requesterMayApprove?: boolean;
}

export interface SlackConfig {
  /** One workspace: its bot token (SLACK_BOT_TOKEN). Absent when the app is installed in many workspaces (`oauth`). */
  botToken?: string;
  /** Many workspaces, each installing the app through Slack's OAuth flow at /slack/install. */
  oauth?: SlackOAuthConfig;
  /** Socket Mode when set (no public URL needed). */
  appToken?: string;
  /** HTTP mode: requests to /slack/events are verified with it. */
  signingSecret?: string;
  port: number;
  host: string;
  /** Web API base (for proxies and tests). */
  apiUrl?: string;
  /** Channel ids where the bot answers; empty means everywhere it is invited. */
  allowedChannels: string[];
  /** User ids who may approve any dangerous call. */
  approvers: string[];
  /** GLASSBOX_REQUESTER_MAY_APPROVE (see DiscordConfig). */
  requesterMayApprove?: boolean;
}

export interface SlackOAuthConfig {
  clientId: string;
  clientSecret: string;
  /** Signs the OAuth state parameter (SLACK_STATE_SECRET); the same on every process of a deployment. */
  stateSecret: string;
  /** The bot scopes an install asks for (SLACK_SCOPES; default DEFAULT_SLACK_SCOPES). */
  scopes: string[];
  /** Encrypts the installations' tokens in the database (GLASSBOX_ENCRYPTION_KEY), checked when read. */
  encryptionKey: string;
  /** Slack's authorize page (SLACK_AUTHORIZE_URL), for GovSlack or a test; default Slack's own. */
  authorizeUrl?: string;
  /** Where the installations are kept: the store's database. */
  database: InstallationDatabase;
  /** The workspaces (T...) and orgs (E...) that may install it (SLACK_ALLOWED_WORKSPACES); empty: any. */
  allowedWorkspaces?: string[];
}

/** What glassbox uses (see slack-app-manifest.yaml). */
export const DEFAULT_SLACK_SCOPES = [
  "app_mentions:read",
  "chat:write",
  "im:history",
  "channels:history",
  "groups:history",
  "mpim:history",
  "assistant:write",
  "channels:read",
  "files:read",
  "usergroups:read",
];

function imageModeOf(value: string | undefined): ImageMode {
  const mode = nonEmpty(value) ?? "auto";
  if (mode === "auto" || mode === "on" || mode === "off") return mode;
  throw configurationError(`GLASSBOX_MODEL_IMAGES is '${mode}'; set it to auto, on or off.`);
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): GlassboxConfig {
  const toolMode = env.GLASSBOX_TOOL_MODE ?? "auto";
  if (toolMode !== "auto" && toolMode !== "native" && toolMode !== "text") {
    throw configurationError(`GLASSBOX_TOOL_MODE is '${toolMode}'; set it to auto, native or text.`);
  }
  return {
    model: {
      baseURL: nonEmpty(env.OPENAI_BASE_URL),
      apiKey: nonEmpty(env.OPENAI_API_KEY),
      model: nonEmpty(env.LLM_MODEL) ?? "gpt-4o-mini",
      toolMode,
      stream: env.GLASSBOX_STREAM !== "false",
      timeoutMs: positiveNumber(env, "GLASSBOX_MODEL_TIMEOUT_MS", 60_000),
      idleMs: positiveNumber(env, "GLASSBOX_MODEL_IDLE_MS", 30_000),
      ...(optionalPositive(env, "GLASSBOX_MAX_OUTPUT_TOKENS") === undefined
        ? {}
        : { maxOutputTokens: positiveInteger(env, "GLASSBOX_MAX_OUTPUT_TOKENS", 1) }),
      images: imageModeOf(env.GLASSBOX_MODEL_IMAGES),
    },
    ...(retentionDaysOf(env) === undefined ? {} : { retentionDays: retentionDaysOf(env) }),
    toolModules: list(env.GLASSBOX_TOOLS),
    builtinTools: builtinToolsOf(env.GLASSBOX_BUILTIN_TOOLS),
    demo: booleanOf(env, "GLASSBOX_DEMO"),
    maxConcurrentRuns: positiveInteger(env, "GLASSBOX_MAX_CONCURRENT_RUNS", DEFAULT_MAX_CONCURRENT_RUNS),
    maxSteps: positiveNumber(env, "GLASSBOX_MAX_STEPS", 8),
    toolTimeoutMs: positiveNumber(env, "GLASSBOX_TOOL_TIMEOUT_MS", 10_000),
    maxResultChars: positiveNumber(env, "GLASSBOX_MAX_RESULT_CHARS", 4_000),
    systemPrompt: nonEmpty(env.GLASSBOX_SYSTEM_PROMPT),
    shopDatabasePath: nonEmpty(env.GLASSBOX_SHOP_DB) ?? "data/shop.db",
    databasePath: nonEmpty(env.GLASSBOX_DB) ?? "data/glassbox.db",
    evalDir: resolve(nonEmpty(env.GLASSBOX_EVAL_DIR) ?? "evals"),
    contextTokens: positiveNumber(env, "GLASSBOX_CONTEXT_TOKENS", 12_000),
    encoding: encodingOf(env.GLASSBOX_ENCODING),
    approvalTtlSeconds: positiveNumber(env, "GLASSBOX_APPROVAL_TTL", 3_600),
    scheduleLookMs: positiveNumber(env, "GLASSBOX_SCHEDULE_LOOK_MS", 15_000),
    runTimeoutMs: optionalPositive(env, "GLASSBOX_RUN_TIMEOUT_MS"),
    slack: slackConfig(env),
    discord: discordConfig(env),
    prices: pricesOf(env.GLASSBOX_PRICES),
    agentsFile: nonEmpty(env.GLASSBOX_AGENTS),
    channelsFile: nonEmpty(env.GLASSBOX_CHANNELS),
    toolSelectionThreshold: positiveNumber(env, "GLASSBOX_TOOL_SELECTION_THRESHOLD", 20),
    dailyLimits: {
      tokens: optionalPositive(env, "GLASSBOX_USER_DAILY_TOKENS"),
      cost: optionalPositive(env, "GLASSBOX_USER_DAILY_COST"),
    },
    web: {
      enabled: webEnabledOf(env.GLASSBOX_WEB),
      host: nonEmpty(env.GLASSBOX_WEB_HOST) ?? "127.0.0.1",
      port: portOf(env, "GLASSBOX_WEB_PORT", 8_787),
      healthPort: nonEmpty(env.GLASSBOX_HEALTH_PORT) === undefined ? undefined : portOf(env, "GLASSBOX_HEALTH_PORT", 0),
      apiToken: nonEmpty(env.GLASSBOX_API_TOKEN),
      apiUsers: apiUsersOf(env.GLASSBOX_API_USERS),
      requesterMayApprove: requesterMayApprove(env),
    },
    publicUrl: publicUrlOf(env.GLASSBOX_PUBLIC_URL),
    mcpServers: mcpServersOf(env.GLASSBOX_MCP_SERVERS),
    role: roleOf(env.GLASSBOX_ROLE),
    workerConcurrency: positiveInteger(
      env,
      "GLASSBOX_WORKER_CONCURRENCY",
      nonEmpty(env.GLASSBOX_DATABASE_URL) ? DEFAULT_WORKER_CONCURRENCY : IN_PROCESS_TURNS_AT_ONCE,
    ),
  };
}

function webEnabledOf(value: string | undefined): boolean {
  const setting = nonEmpty(value)?.toLowerCase() ?? "on";
  if (setting === "on" || setting === "true" || setting === "1") return true;
  if (setting === "off" || setting === "false" || setting === "0") return false;
  throw configurationError(
    `GLASSBOX_WEB is '${value}'; set it to off to run no chat page, trace viewer or HTTP API, or leave it unset (on).`,
  );
}

/**
 * GLASSBOX_PUBLIC_URL: an http(s) address, kept without its trailing slashes, and without any user or
 * password written in it (the link is posted in chats).
 */
function publicUrlOf(value: string | undefined): string | undefined {
  const text = nonEmpty(value);
  if (text === undefined) return undefined;
  let url: URL | undefined;
  try {
    url = new URL(text);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== "http:" && url.protocol !== "https:") || url.search || url.hash)
    throw configurationError(
      `GLASSBOX_PUBLIC_URL is '${text}'; set it to the http:// or https:// address people open the web server at ` +
        "(such as https://glassbox.example.com), without a query or fragment.",
    );
  return `${url.origin}${url.pathname}`.replace(/\/+$/, "");
}

function roleOf(value: string | undefined): GlassboxRole | undefined {
  const role = nonEmpty(value)?.toLowerCase();
  if (role === undefined || (GLASSBOX_ROLES as readonly string[]).includes(role))
    return role as GlassboxRole | undefined;
  throw configurationError(
    `GLASSBOX_ROLE is '${value}'; set it to ingress, worker or all (with GLASSBOX_DATABASE_URL), or leave it unset to run everything in one process.`,
  );
}

/**
 * A run mostly waits on the model, so many fit in one process: 100 answers a burst of 100 threads
 * at full speed (the Slack bench), while a flood of thousands waits in line instead of opening
 * thousands of model requests and holding their contexts in memory at once.
 */
export const DEFAULT_MAX_CONCURRENT_RUNS = 100;

/**
 * Turns a worker process runs at once on PostgreSQL: in bench/pipeline-cost.ts's sweep (bench/RESULTS.md) a burst
 * gets faster up to 100, where it takes what one process on SQLite does. A running turn holds no connection and an
 * idle worker polls once a second whatever this says, so this bounds the process's runs, as on SQLite.
 */
export const DEFAULT_WORKER_CONCURRENCY = DEFAULT_MAX_CONCURRENT_RUNS;

/**
 * One process on SQLite starts every conversation's turn as it comes (the queue keeps only each
 * conversation's order); its runs then wait for GLASSBOX_MAX_CONCURRENT_RUNS's slots.
 */
const IN_PROCESS_TURNS_AT_ONCE = 10_000;

function builtinToolsOf(value: string | undefined): BuiltinToolName[] {
  const names = list(value);
  if (names.length === 0) return [...DEFAULT_BUILTIN_TOOLS];
  if (names.length === 1 && names[0]?.toLowerCase() === "none") return [];
  const unknown = names.filter((name) => !(BUILTIN_TOOL_NAMES as readonly string[]).includes(name));
  if (unknown.length > 0) {
    throw configurationError(
      `GLASSBOX_BUILTIN_TOOLS names '${unknown.join("', '")}'; list some of ${BUILTIN_TOOL_NAMES.join(", ")} (comma-separated), or none.`,
    );
  }
  return [...new Set(names)] as BuiltinToolName[];
}

const requesterMayApprove = (env: NodeJS.ProcessEnv) => booleanOf(env, "GLASSBOX_REQUESTER_MAY_APPROVE", true);

function booleanOf(env: NodeJS.ProcessEnv, name: string, unset = false): boolean {
  const text = nonEmpty(env[name])?.toLowerCase();
  if (text === undefined) return unset;
  if (text === "false" || text === "0" || text === "no") return false;
  if (text === "true" || text === "1" || text === "yes") return true;
  throw configurationError(`${name} is '${env[name]}'; set it to true or false.`);
}

function apiUsersOf(json: string | undefined): Record<string, string> {
  if (!nonEmpty(json)) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(json as string);
  } catch {
    throw configurationError(
      'GLASSBOX_API_USERS is not valid JSON; set it to an object of bearer tokens and user ids, {"<token>": "<user id>"}.',
    );
  }
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) {
    throw configurationError(
      'GLASSBOX_API_USERS must be a JSON object of bearer tokens and user ids, {"<token>": "<user id>"}.',
    );
  }
  const users: Record<string, string> = {};
  for (const [token, user] of Object.entries(parsed)) {
    if (typeof user !== "string" || !user.trim() || !token.trim())
      throw configurationError("GLASSBOX_API_USERS: every entry must map a non-empty token to a non-empty user id.");
    users[token] = user.trim();
  }
  return users;
}

function positiveInteger(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const value = positiveNumber(env, name, fallback);
  if (!Number.isInteger(value))
    throw configurationError(`${name} is '${env[name]}'; set it to a whole number above 0.`);
  return value;
}

function mcpServersOf(json: string | undefined): Record<string, McpServerConfig> {
  try {
    return parseMcpServers(json);
  } catch (error) {
    throw configurationError((error as Error).message);
  }
}

function discordConfig(env: NodeJS.ProcessEnv): DiscordConfig | undefined {
  const token = nonEmpty(env.DISCORD_TOKEN);
  if (!token) return undefined;
  return {
    token,
    apiUrl: nonEmpty(env.DISCORD_API_URL),
    guildId: nonEmpty(env.DISCORD_GUILD_ID),
    approvers: approversOf(env, "DISCORD_APPROVERS", "role"),
    requesterMayApprove: requesterMayApprove(env),
  };
}

function pricesOf(json: string | undefined): Record<string, Price> {
  try {
    return parsePrices(json);
  } catch (error) {
    throw configurationError(
      error instanceof SyntaxError
        ? `GLASSBOX_PRICES is not valid JSON (${error.message}); see docs/configuration.md for its shape.`
        : (error as Error).message,
    );
  }
}

function slackConfig(env: NodeJS.ProcessEnv): SlackConfig | undefined {
  const botToken = nonEmpty(env.SLACK_BOT_TOKEN);
  const appToken = nonEmpty(env.SLACK_APP_TOKEN);
  const signingSecret = nonEmpty(env.SLACK_SIGNING_SECRET);
  const oauth = slackOAuthConfig(env, botToken);
  if (!botToken && !oauth) {
    if (appToken || signingSecret)
      throw configurationError(
        "SLACK_APP_TOKEN or SLACK_SIGNING_SECRET is set but SLACK_BOT_TOKEN is not; set SLACK_BOT_TOKEN (xoxb-...) too, or SLACK_CLIENT_ID, SLACK_CLIENT_SECRET and SLACK_STATE_SECRET to install the app in many workspaces.",
      );
    return undefined;
  }
  if (botToken && !botToken.startsWith("xoxb-"))
    throw configurationError("SLACK_BOT_TOKEN must be the bot token, starting with xoxb-.");
  if (appToken && !appToken.startsWith("xapp-"))
    throw configurationError("SLACK_APP_TOKEN must be an app-level token, starting with xapp-.");
  if (!appToken && !signingSecret) {
    throw configurationError(
      `${botToken ? "SLACK_BOT_TOKEN" : "SLACK_CLIENT_ID"} is set but neither SLACK_APP_TOKEN (Socket Mode) nor SLACK_SIGNING_SECRET (HTTP mode) is; set one of them.`,
    );
  }
  return {
    ...(botToken ? { botToken } : { oauth }),
    appToken,
    signingSecret,
    port: portOf(env, "PORT", 3_000),
    host: nonEmpty(env.GLASSBOX_HOST) ?? "0.0.0.0",
    apiUrl: nonEmpty(env.SLACK_API_URL),
    allowedChannels: list(env.SLACK_ALLOWED_CHANNELS),
    approvers: approversOf(env, "SLACK_APPROVERS", "group"),
    requesterMayApprove: requesterMayApprove(env),
  };
}

/** The OAuth settings when SLACK_CLIENT_ID (or one of its companions) is set; all three are needed, and no bot token beside them. */
function slackOAuthConfig(env: NodeJS.ProcessEnv, botToken: string | undefined): SlackOAuthConfig | undefined {
  const clientId = nonEmpty(env.SLACK_CLIENT_ID);
  const clientSecret = nonEmpty(env.SLACK_CLIENT_SECRET);
  const stateSecret = nonEmpty(env.SLACK_STATE_SECRET);
  if (!clientId && !clientSecret && !stateSecret) return undefined;
  if (botToken)
    throw configurationError(
      "SLACK_BOT_TOKEN is for one workspace and SLACK_CLIENT_ID for installing in many; set one of them, not both.",
    );
  const missing = [
    ["SLACK_CLIENT_ID", clientId],
    ["SLACK_CLIENT_SECRET", clientSecret],
    ["SLACK_STATE_SECRET", stateSecret],
  ]
    .filter(([, value]) => !value)
    .map(([name]) => name);
  if (missing.length > 0) {
    throw configurationError(
      `Installing in many workspaces needs SLACK_CLIENT_ID, SLACK_CLIENT_SECRET (both from your app's Basic Information page) and SLACK_STATE_SECRET (any long random text, e.g. \`openssl rand -hex 32\`); ${missing.join(" and ")} ${missing.length > 1 ? "are" : "is"} not set.`,
    );
  }
  const encryptionKey = env.GLASSBOX_ENCRYPTION_KEY?.trim() ?? "";
  parseEncryptionKey(encryptionKey); // a missing or malformed key stops the start here, in one sentence
  const scopes = list(env.SLACK_SCOPES);
  return {
    clientId: clientId as string,
    clientSecret: clientSecret as string,
    stateSecret: stateSecret as string,
    scopes: scopes.length > 0 ? scopes : DEFAULT_SLACK_SCOPES,
    encryptionKey,
    authorizeUrl: nonEmpty(env.SLACK_AUTHORIZE_URL),
    allowedWorkspaces: list(env.SLACK_ALLOWED_WORKSPACES),
    database: {
      databaseUrl: nonEmpty(env.GLASSBOX_DATABASE_URL),
      databaseSchema: nonEmpty(env.GLASSBOX_DATABASE_SCHEMA),
      databasePath: nonEmpty(env.GLASSBOX_DB) ?? "data/glassbox.db",
    },
  };
}

/**
 * A platform's approvers: user ids, and its own kind of group (Slack user groups as group:S...,
 * Discord roles as role:...); a mistake or the other platform's kind is one sentence.
 */
function approversOf(env: NodeJS.ProcessEnv, name: string, own: "group" | "role"): string[] {
  const entries = list(env[name]);
  for (const entry of entries) {
    const mistake = approverMistake(entry);
    if (mistake) throw configurationError(`${name} names ${entry}, ${mistake}`);
    const kind = approverEntry(entry).kind;
    if (kind !== "user" && kind !== own)
      throw configurationError(
        `${name} names ${entry}, a ${kind === "group" ? "Slack user group" : "Discord role"}; ` +
          `list user ids${own === "group" ? " and Slack user groups (group:S...)" : " and Discord roles (role:...)"} there.`,
      );
  }
  return entries;
}

function list(value: string | undefined): string[] {
  return (value ?? "")
    .split(",")
    .map((part) => part.trim())
    .filter(Boolean);
}

/** A model needs a key, or a base URL for a local server that needs none. */
export function assertModelConfigured(config: GlassboxConfig): void {
  if (!config.model.apiKey && !config.model.baseURL) {
    throw configurationError(
      "No model is configured: set OPENAI_API_KEY, or OPENAI_BASE_URL for a local server such as Ollama or vLLM.",
    );
  }
}

/** Why no run can start, in one sentence, when no model is configured. */
export function modelProblem(config: GlassboxConfig): string | undefined {
  try {
    assertModelConfigured(config);
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
}

function encodingOf(value: string | undefined): GlassboxConfig["encoding"] {
  const name = nonEmpty(value);
  if (name === undefined || name === "o200k_base" || name === "cl100k_base") return name;
  throw configurationError(`GLASSBOX_ENCODING is '${name}'; set it to o200k_base or cl100k_base, or leave it unset.`);
}

function nonEmpty(value: string | undefined): string | undefined {
  return value?.trim() ? value.trim() : undefined;
}

/** GLASSBOX_RETENTION_DAYS: whole days above 0, or unset (kept); 0 would read as "keep" to some and "remove all" to others. */
function retentionDaysOf(env: NodeJS.ProcessEnv): number | undefined {
  const text = nonEmpty(env.GLASSBOX_RETENTION_DAYS);
  if (text === undefined) return undefined;
  const days = Number(text);
  if (!Number.isInteger(days) || days <= 0)
    throw configurationError(
      `GLASSBOX_RETENTION_DAYS is '${text}'; set it to a whole number of days above 0 (such as 90), ` +
        "or leave it unset to keep every conversation.",
    );
  return days;
}

function optionalPositive(env: NodeJS.ProcessEnv, name: string): number | undefined {
  return nonEmpty(env[name]) === undefined ? undefined : positiveNumber(env, name, 0);
}

function portOf(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const text = nonEmpty(env[name]);
  if (text === undefined) return fallback;
  const port = Number(text);
  if (!Number.isInteger(port) || port < 0 || port > 65_535)
    throw configurationError(`${name} is '${text}'; set it to a port number (1-65535, or 0 for any free port).`);
  return port;
}

function positiveNumber(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const text = nonEmpty(env[name]);
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isFinite(value) || value <= 0)
    throw configurationError(`${name} is '${text}'; set it to a positive number.`);
  return value;
}

const ENCRYPTION_KEY_BYTES = 32;
const MAKE_A_KEY = "make one with `openssl rand -base64 32`";

/**
 * The key from its text: 64 hex digits or the base64 (or base64url) of 32 bytes. A missing or
 * malformed key is one sentence saying how to make one.
 */
export function parseEncryptionKey(text: string | undefined): Buffer {
  const value = text?.trim() ?? "";
  if (!value) {
    throw configurationError(
      `GLASSBOX_ENCRYPTION_KEY is not set, and the Slack installations' tokens are stored encrypted with it: ${MAKE_A_KEY} and keep it (the stored tokens cannot be read without it).`,
    );
  }
  let key: Buffer | undefined;
  if (/^[0-9a-f]{64}$/i.test(value)) key = Buffer.from(value, "hex");
  else if (/^[A-Za-z0-9+/_-]{43}=?$/.test(value))
    key = Buffer.from(value.replace(/-/g, "+").replace(/_/g, "/"), "base64");
  if (key?.length !== ENCRYPTION_KEY_BYTES) {
    throw configurationError(
      `GLASSBOX_ENCRYPTION_KEY must be 32 bytes written as base64 (44 characters) or hex (64 digits), and this one is not; ${MAKE_A_KEY}.`,
    );
  }
  return key;
}

/** Where a deployment keeps its data: PostgreSQL by URL, else a SQLite file. */
export interface InstallationDatabase {
  /** postgres://... selects PostgreSQL (GLASSBOX_DATABASE_URL). */
  databaseUrl?: string;
  /** A schema of its own inside that database, created if missing (GLASSBOX_DATABASE_SCHEMA). */
  databaseSchema?: string;
  /** Without a URL: the SQLite file (GLASSBOX_DB). */
  databasePath: string;
}
