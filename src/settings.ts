import { existsSync } from "node:fs";
import { resolve } from "node:path";

/**
 * Every setting glassbox reads from the environment, in one list: the table in docs/configuration.md
 * and .env.example are generated from it (`npm run docs:settings`), a test fails when the code reads a
 * name that is missing here, and a start names a setting it does not know with a did-you-mean.
 */

export type SettingGroup =
  | "Model"
  | "Tools and runs"
  | "Storage and scale"
  | "Slack"
  | "Discord"
  | "Web and HTTP API"
  | "Limits and costs"
  | "Logs and telemetry";

export interface Setting {
  name: string;
  group: SettingGroup;
  /** The default as a person reads it ("—" when unset means off or none). */
  default: string;
  /** A value to show in .env.example (commented out there); empty for a secret a person makes. */
  example: string;
  /** What it does, in a sentence or two of Markdown. */
  meaning: string;
}

const NONE = "—";

export const SETTINGS: readonly Setting[] = [
  // ---- Model
  {
    name: "OPENAI_BASE_URL",
    group: "Model",
    default: "`https://api.openai.com/v1`",
    example: "http://127.0.0.1:11434/v1",
    meaning: "Any OpenAI-compatible server (Ollama, vLLM, LM Studio, ...).",
  },
  {
    name: "OPENAI_API_KEY",
    group: "Model",
    default: NONE,
    example: "sk-...",
    meaning: "The server's API key; local servers usually need none.",
  },
  {
    name: "LLM_MODEL",
    group: "Model",
    default: "`gpt-4o-mini`",
    example: "qwen2.5:7b",
    meaning: "The model name as the server knows it.",
  },
  {
    name: "GLASSBOX_TOOL_MODE",
    group: "Model",
    default: "`auto`",
    example: "text",
    meaning:
      "`native` function calling, `text` (tools described in the prompt, for models without function calling), " +
      "or `auto`: native, switching to text when the server rejects `tools`.",
  },
  {
    name: "GLASSBOX_STREAM",
    group: "Model",
    default: "`true`",
    example: "false",
    meaning: "`false` asks for whole answers instead of streamed deltas.",
  },
  {
    name: "GLASSBOX_MODEL_TIMEOUT_MS",
    group: "Model",
    default: "`60000`",
    example: "120000",
    meaning:
      "Time limit of one model request until its reply begins (retried: 4 tries in all for 429, 5xx and " +
      "connection errors, with exponential backoff and jitter, honouring `Retry-After`), and again for the " +
      "reply's body to end once it began.",
  },
  {
    name: "GLASSBOX_MODEL_IDLE_MS",
    group: "Model",
    default: "`30000` (at most `GLASSBOX_MODEL_TIMEOUT_MS`)",
    example: "10000",
    meaning: "The longest silence in the middle of a model's reply before the call is stopped.",
  },
  {
    name: "GLASSBOX_MAX_OUTPUT_TOKENS",
    group: "Model",
    default: "unset: the server's own limit",
    example: "2000",
    meaning:
      "The most tokens one model reply may hold, sent as the server takes it (`max_completion_tokens` to " +
      "OpenAI's hosts, `max_tokens` elsewhere; a server that refuses one name is sent the other). With daily caps, " +
      "each call holds room for this much answer while it runs. A reply is stopped past 1,000,000 characters " +
      "whatever this says.",
  },
  {
    name: "GLASSBOX_MODEL_IMAGES",
    group: "Model",
    default: "`auto`",
    example: "off",
    meaning:
      "Whether attached images go to the model as images: `auto` (and learn a refusal), `on`, `off` " +
      "(see [Files and images](files-and-images.md)).",
  },
  {
    name: "GLASSBOX_CONTEXT_TOKENS",
    group: "Model",
    default: "`12000`",
    example: "32000",
    meaning: "Most tokens one model request may carry (never above the model's window).",
  },
  {
    name: "GLASSBOX_ENCODING",
    group: "Model",
    default: "by model",
    example: "cl100k_base",
    meaning:
      "`o200k_base` or `cl100k_base`; by default o200k for the gpt-4o / 4.1 / o-series / gpt-5 families, " +
      "cl100k otherwise.",
  },
  {
    name: "GLASSBOX_SYSTEM_PROMPT",
    group: "Model",
    default: "built in",
    example: "You are the support team's assistant. Answer briefly.",
    meaning: "The system prompt.",
  },
  // ---- Tools and runs
  {
    name: "GLASSBOX_TOOLS",
    group: "Tools and runs",
    default: NONE,
    example: "./tools/lookup.mjs",
    meaning:
      "Your tool modules, comma-separated paths or package names. A path (`./x.mjs`, `dir/x.mjs`, or a bare " +
      "`x.mjs` that exists) is read from the current directory (see [Writing tools](writing-tools.md)).",
  },
  {
    name: "GLASSBOX_BUILTIN_TOOLS",
    group: "Tools and runs",
    default: "`current_time,calculator,memory,schedules`",
    example: "current_time,calculator",
    meaning:
      "The built-in tools to keep, comma-separated: `current_time`, `calculator`, `memory` (`remember` and " +
      "`forget`), `schedules` (`schedule_run`, `list_schedules`, `pause_schedule`, `delete_schedule`; see [Schedules](schedules.md)); " +
      "`none` for none.",
  },
  {
    name: "GLASSBOX_DEMO",
    group: "Tools and runs",
    default: "`false`",
    example: "true",
    meaning:
      "`true` adds the demo shop (`get_order_status`, `cancel_order`, `send_message` over `GLASSBOX_SHOP_DB`), " +
      "as `npm run demo` does.",
  },
  {
    name: "GLASSBOX_SHOP_DB",
    group: "Tools and runs",
    default: "`data/shop.db`",
    example: "data/shop.db",
    meaning: "The demo shop's SQLite file, created and seeded on first use (only with the demo on).",
  },
  {
    name: "GLASSBOX_MAX_STEPS",
    group: "Tools and runs",
    default: "`8`",
    example: "12",
    meaning: "Model calls with tools in one run before it must conclude.",
  },
  {
    name: "GLASSBOX_RUN_TIMEOUT_MS",
    group: "Tools and runs",
    default: NONE,
    example: "600000",
    meaning:
      "The longest a run may work, counted from its start and again after each approval (the wait for a " +
      "person does not count). Past it the model call or tools in flight are stopped and the run ends with a " +
      "sentence saying so.",
  },
  {
    name: "GLASSBOX_TOOL_TIMEOUT_MS",
    group: "Tools and runs",
    default: "`10000`",
    example: "30000",
    meaning: "Default time limit of one tool call (a tool can set its own `timeoutMs`).",
  },
  {
    name: "GLASSBOX_MAX_RESULT_CHARS",
    group: "Tools and runs",
    default: "`4000`",
    example: "8000",
    meaning: "Longest tool result the model reads; longer ones are cut with a marker.",
  },
  {
    name: "GLASSBOX_TOOL_SELECTION_THRESHOLD",
    group: "Tools and runs",
    default: "`20`",
    example: "40",
    meaning: "Above this many tools, each model call is sent only the relevant ones plus `list_tools`.",
  },
  {
    name: "GLASSBOX_RETENTION_DAYS",
    group: "Storage and scale",
    default: "unset: conversations are kept",
    example: "90",
    meaning:
      "Conversations nobody has touched for this many whole days are removed (every table, as `glassbox erase` " +
      "removes them; one with a run in progress stays), at start and daily, by every process whatever its role; " +
      "the log says how many rows of each table went.",
  },
  {
    name: "GLASSBOX_APPROVAL_TTL",
    group: "Tools and runs",
    default: "`3600`",
    example: "900",
    meaning: "Seconds a dangerous call waits for a person before it counts as denied.",
  },
  {
    name: "GLASSBOX_MCP_SERVERS",
    group: "Tools and runs",
    default: NONE,
    example: '{"files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."]}}',
    meaning: "MCP servers whose tools join glassbox, JSON by name (see [MCP](mcp.md)).",
  },
  {
    name: "GLASSBOX_AGENTS",
    group: "Tools and runs",
    default: NONE,
    example: "agents.json",
    meaning: "A JSON file of specialist agents and pipelines (see [Several agents](several-agents.md)).",
  },
  {
    name: "GLASSBOX_CHANNELS",
    group: "Tools and runs",
    default: NONE,
    example: "examples/channels.yaml",
    meaning:
      "A YAML or JSON file of per-channel settings: a system prompt and the tools allowed, by default, " +
      "workspace and channel; read again when it changes (see [Channels](channels.md)).",
  },
  {
    name: "GLASSBOX_SCHEDULE_LOOK_MS",
    group: "Tools and runs",
    default: "`15000`",
    example: "5000",
    meaning:
      "How often each worker looks for scheduled runs that came due; a tick fires once whichever worker " +
      "sees it first (see [Schedules](schedules.md)).",
  },
  // ---- Storage and scale
  {
    name: "GLASSBOX_DB",
    group: "Storage and scale",
    default: "`data/glassbox.db`",
    example: "/var/lib/glassbox/glassbox.db",
    meaning:
      "The SQLite file of conversations, runs, approvals and facts. Checked when opened: a damaged file, or one " +
      "that cannot be opened or written, stops glassbox with one sentence naming it; `sessions`, `trace` and " +
      "`usage` only read it and never create one.",
  },
  {
    name: "GLASSBOX_DATABASE_URL",
    group: "Storage and scale",
    default: NONE,
    example: "postgres://glassbox@db:5432/glassbox",
    meaning:
      "PostgreSQL instead of the SQLite file (see [Running at scale](running-at-scale.md)); the run queue " +
      "then is a table in the same database (schema `glassbox_queue`).",
  },
  {
    name: "GLASSBOX_EVAL_DIR",
    group: "Storage and scale",
    default: "`evals`",
    example: "test/evals",
    meaning:
      "The folder where the trace viewer's **Save as eval case** writes eval case files (one JSON file per run, " +
      "named by glassbox) and that `glassbox eval --cases` reads by default; relative to the working directory.",
  },
  {
    name: "GLASSBOX_DATABASE_SCHEMA",
    group: "Storage and scale",
    default: NONE,
    example: "glassbox",
    meaning: "A schema of its own inside that database, created if missing.",
  },
  {
    name: "GLASSBOX_ROLE",
    group: "Storage and scale",
    default: "`all`",
    example: "worker",
    meaning:
      "With PostgreSQL: `ingress` (receives and enqueues), `worker` (runs the turns) or `all` (both, in one " +
      "process).",
  },
  {
    name: "GLASSBOX_WORKER_CONCURRENCY",
    group: "Storage and scale",
    default: "`100` on PostgreSQL; every turn on SQLite",
    example: "32",
    meaning:
      "Turns a worker process runs at once. On SQLite every conversation's turn starts as it comes and runs " +
      "wait for `GLASSBOX_MAX_CONCURRENT_RUNS`.",
  },
  {
    name: "GLASSBOX_MAX_CONCURRENT_RUNS",
    group: "Storage and scale",
    default: "`100`",
    example: "50",
    meaning:
      "Runs in progress at once in one process; the rest wait in arrival order, each conversation in its " +
      "order, and a request that waits over 3 s is told it is queued.",
  },
  {
    name: "GLASSBOX_QUEUE_TIMINGS",
    group: "Storage and scale",
    default: "built in",
    example: '{"heartbeatMs": 500, "deadAfterMs": 2000}',
    meaning:
      "JSON of the PostgreSQL queue's liveness timings in ms (`heartbeatMs`, `deadAfterMs`, `sweepMs`, " +
      "`pollIntervalMs`), for tests that need a dead worker's turns taken over in a second.",
  },
  // ---- Slack
  {
    name: "SLACK_BOT_TOKEN",
    group: "Slack",
    default: NONE,
    example: "xoxb-...",
    meaning: "The bot token (`xoxb-...`); turns the Slack adapter on (see [Slack](slack.md)).",
  },
  {
    name: "SLACK_APP_TOKEN",
    group: "Slack",
    default: NONE,
    example: "xapp-...",
    meaning: "App-level token (`xapp-...`) for Socket Mode: no public URL needed.",
  },
  {
    name: "SLACK_SIGNING_SECRET",
    group: "Slack",
    default: NONE,
    example: "8f14e45fceea167a5a36dedd4bea2543",
    meaning: "HTTP mode instead of Socket Mode: verifies every request to `/slack/events`.",
  },
  {
    name: "PORT",
    group: "Slack",
    default: "`3000`",
    example: "3000",
    meaning: "Where Slack's HTTP mode listens.",
  },
  {
    name: "GLASSBOX_HOST",
    group: "Slack",
    default: "`0.0.0.0`",
    example: "127.0.0.1",
    meaning: "The address Slack's HTTP mode listens on.",
  },
  {
    name: "SLACK_ALLOWED_CHANNELS",
    group: "Slack",
    default: "all",
    example: "C0123ABCDEF,C0456GHIJKL",
    meaning: "Comma-separated channel ids where the bot answers; elsewhere it says so once.",
  },
  {
    name: "GLASSBOX_REQUESTER_MAY_APPROVE",
    group: "Tools and runs",
    default: "true",
    example: "false",
    meaning:
      "Whether the person who asked may approve their own dangerous call. false: only an approver other than " +
      "them can (SLACK_APPROVERS, DISCORD_APPROVERS, or the tool's own `approvers`). A tool's " +
      "`requesterMayApprove` decides for its calls.",
  },
  {
    name: "SLACK_APPROVERS",
    group: "Slack",
    default: NONE,
    example: "U0123ABCDEF,group:S0123ABC",
    meaning:
      "Comma-separated user ids, and user groups as group:<id>, who may approve any dangerous call (besides " +
      "the person who asked); a group's members are read with the scope usergroups:read.",
  },
  {
    name: "SLACK_CLIENT_ID",
    group: "Slack",
    default: NONE,
    example: "1234567890.1234567890",
    meaning:
      "The app's OAuth client id (*Basic Information*). Set instead of `SLACK_BOT_TOKEN` to install the app in " +
      "many workspaces; both at once is refused.",
  },
  {
    name: "SLACK_CLIENT_SECRET",
    group: "Slack",
    default: NONE,
    example: "...",
    meaning: "The app's OAuth client secret, with `SLACK_CLIENT_ID`.",
  },
  {
    name: "SLACK_STATE_SECRET",
    group: "Slack",
    default: NONE,
    example: "",
    meaning: "Signs the OAuth `state`; any long random text (`openssl rand -hex 32`), the same on every process.",
  },
  {
    name: "GLASSBOX_ENCRYPTION_KEY",
    group: "Slack",
    default: NONE,
    example: "",
    meaning:
      "32 bytes as base64 (44 characters) or hex (64 digits), `openssl rand -base64 32`; encrypts the installations' tokens. Required with " +
      "`SLACK_CLIENT_ID`; a missing or malformed key stops the start with one sentence saying how to make one.",
  },
  {
    name: "SLACK_SCOPES",
    group: "Slack",
    default: "what glassbox uses",
    example: "app_mentions:read,chat:write,im:history",
    meaning:
      "Bot scopes an install asks for, comma-separated (default `app_mentions:read,chat:write,im:history," +
      "channels:history,groups:history,mpim:history,assistant:write,channels:read,files:read,usergroups:read`).",
  },
  {
    name: "SLACK_ALLOWED_WORKSPACES",
    group: "Slack",
    default: "unset: any workspace may install it (warned at start)",
    example: "T0123ABCD,E0456EFGH",
    meaning:
      "With OAuth: the workspaces (`T...`) and Enterprise Grid orgs (`E...`) that may install the app and be " +
      "answered; another is refused at install with a page that says why, and its events go unanswered.",
  },
  {
    name: "SLACK_AUTHORIZE_URL",
    group: "Slack",
    default: "Slack's",
    example: "https://slack.com/oauth/v2/authorize",
    meaning: "Slack's authorize page, for GovSlack or a test server.",
  },
  {
    name: "SLACK_API_URL",
    group: "Slack",
    default: "Slack's",
    example: "http://127.0.0.1:9000/api/",
    meaning: "Web API base, for proxies and tests.",
  },
  // ---- Discord
  {
    name: "DISCORD_TOKEN",
    group: "Discord",
    default: NONE,
    example: "MTIz...",
    meaning: "The bot token; turns the Discord adapter on (see [Discord](discord.md)).",
  },
  {
    name: "DISCORD_APPROVERS",
    group: "Discord",
    default: NONE,
    example: "123456789012345678,role:223456789012345678",
    meaning:
      "Comma-separated user ids, and roles as role:<id>, who may approve any dangerous call (besides the " +
      "person who asked).",
  },
  {
    name: "DISCORD_GUILD_ID",
    group: "Discord",
    default: NONE,
    example: "123456789012345678",
    meaning: "Register the slash commands on this server (instant) instead of globally.",
  },
  {
    name: "DISCORD_API_URL",
    group: "Discord",
    default: "Discord's",
    example: "http://127.0.0.1:9001/api",
    meaning: "REST base (the gateway address comes from it), for proxies and tests.",
  },
  // ---- Web and HTTP API
  {
    name: "GLASSBOX_WEB",
    group: "Web and HTTP API",
    default: "`on`",
    example: "off",
    meaning: "`off` runs no chat page, trace viewer or HTTP API; otherwise they run beside Slack and Discord too.",
  },
  {
    name: "GLASSBOX_WEB_HOST",
    group: "Web and HTTP API",
    default: "`127.0.0.1`",
    example: "0.0.0.0",
    meaning:
      "Where the web page, the HTTP API and the health port listen; any other address than loopback needs a token " +
      "(the health routes never do). On `0.0.0.0` or `::` the start names the machine's addresses it answers on.",
  },
  {
    name: "GLASSBOX_WEB_PORT",
    group: "Web and HTTP API",
    default: "`8787`",
    example: "8787",
    meaning: "The web page's and HTTP API's port.",
  },
  {
    name: "GLASSBOX_PUBLIC_URL",
    group: "Web and HTTP API",
    default: NONE,
    example: "https://glassbox.example.com",
    meaning:
      "The address people reach this web server at (http or https). With it, every answer in Slack and Discord " +
      "carries a **Trace** button that opens its run in the trace viewer, and `glassbox run` prints that link too.",
  },
  {
    name: "GLASSBOX_HEALTH_PORT",
    group: "Web and HTTP API",
    default: NONE,
    example: "8788",
    meaning:
      "A port of its own for `/healthz` and `/readyz` (on `GLASSBOX_WEB_HOST`), in every role, a worker's too " +
      "(see [Deploying](deploying.md)); the web server answers both routes as well.",
  },
  {
    name: "GLASSBOX_API_TOKEN",
    group: "Web and HTTP API",
    default: NONE,
    example: "",
    meaning:
      "Service bearer token for the HTTP API (`openssl rand -hex 32`): it may act for any user (see [HTTP API](http-api.md)).",
  },
  {
    name: "GLASSBOX_API_USERS",
    group: "Web and HTTP API",
    default: NONE,
    example: '{"<token>": "alice"}',
    meaning:
      'Bearer tokens of single users, JSON `{"<token>": "<user id>"}`: a caller with one acts only as that user.',
  },
  // ---- Limits and costs
  {
    name: "GLASSBOX_USER_DAILY_TOKENS",
    group: "Limits and costs",
    default: NONE,
    example: "200000",
    meaning:
      "Daily cap of tokens per user. Over it, a user gets one sentence saying when it resets, and no model call " +
      "is made; a user passes it by at most one call's output, across every process on one database. A call cut " +
      "off, or answered without usage, counts its prompt and what it streamed.",
  },
  {
    name: "GLASSBOX_USER_DAILY_COST",
    group: "Limits and costs",
    default: NONE,
    example: "2.50",
    meaning: "Daily cap of cost per user, in dollars, kept as the token cap is.",
  },
  {
    name: "GLASSBOX_PRICES",
    group: "Limits and costs",
    default: "built in",
    example: '{"my-model": {"input": 0.5, "output": 1.5}}',
    meaning: 'JSON price overrides, dollars per million tokens. A model without a price has cost "unknown", never 0.',
  },
  // ---- Logs and telemetry
  {
    name: "LOG_LEVEL",
    group: "Logs and telemetry",
    default: "`info` (`warn` for the command line)",
    example: "debug",
    meaning:
      "pino log level. The bot writes JSON on stderr (readable lines on a terminal); the command line writes " +
      "each warning or error as one readable line. Secrets are redacted either way.",
  },
  {
    name: "NO_COLOR",
    group: "Logs and telemetry",
    default: NONE,
    example: "1",
    meaning: "Any value turns the command line's colours off (https://no-color.org).",
  },
  {
    name: "OTEL_EXPORTER_OTLP_ENDPOINT",
    group: "Logs and telemetry",
    default: NONE,
    example: "http://127.0.0.1:4318",
    meaning: "An OpenTelemetry collector (OTLP/HTTP): every run is also exported there as spans.",
  },
  {
    name: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    group: "Logs and telemetry",
    default: "endpoint + `/v1/traces`",
    example: "http://127.0.0.1:4318/v1/traces",
    meaning: "The collector's traces address, when it is not the endpoint's `/v1/traces`.",
  },
  {
    name: "OTEL_EXPORTER_OTLP_HEADERS",
    group: "Logs and telemetry",
    default: NONE,
    example: "x-honeycomb-team=...",
    meaning: "Headers for the collector, `name=value` comma-separated.",
  },
  {
    name: "OTEL_SERVICE_NAME",
    group: "Logs and telemetry",
    default: "`glassbox`",
    example: "glassbox-support",
    meaning: "The service name on the exported spans.",
  },
  {
    name: "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
    group: "Logs and telemetry",
    default: "`false`",
    example: "true",
    meaning: "`true` exports the messages' contents too; by default spans carry sizes and names only.",
  },
];

/**
 * Reads `.env` in the current directory into process.env when there is one; a variable already set
 * in the environment keeps its value. Returns the file's full path, or undefined when there is none.
 */
export function loadEnvFile(path = ".env"): string | undefined {
  if (!existsSync(path)) return undefined;
  process.loadEnvFile(path);
  return resolve(path);
}

const KNOWN = new Set(SETTINGS.map((setting) => setting.name));
/** Prefixes of names that can only be meant for glassbox; a name with another prefix is named only when it is close to one of ours. */
const OURS = /^GLASSBOX_/;
const RELATED = /^(SLACK|DISCORD|OPENAI|LLM|OTEL)_/;
/** Names glassbox sets for itself, and those of its own test suite, benchmarks and CI: no setting, no typo. */
const INTERNAL = /^GLASSBOX_(INSTANCE|CHROMIUM|TEST_\w+|BENCH_\w+)$/;

/**
 * One sentence for each environment name that looks meant for glassbox but is no setting of it
 * (`GLASSBOX_MAX_STEP`), with the closest setting when there is one.
 */
export function unknownSettings(env: Record<string, string | undefined>): string[] {
  const sentences: string[] = [];
  for (const name of Object.keys(env).sort()) {
    if (KNOWN.has(name) || INTERNAL.test(name) || !(OURS.test(name) || RELATED.test(name))) continue;
    const closest = closestSetting(name);
    if (closest) sentences.push(`${name} is not a glassbox setting; did you mean ${closest}?`);
    else if (OURS.test(name))
      sentences.push(`${name} is not a glassbox setting and is ignored; docs/configuration.md lists them all.`);
  }
  return sentences;
}

/** The setting within a few typos of `name`, if any. */
function closestSetting(name: string): string | undefined {
  let best: string | undefined;
  let bestDistance = Math.max(2, Math.floor(name.length / 6)) + 1;
  for (const known of KNOWN) {
    const distance = editDistance(name, known);
    if (distance < bestDistance) [best, bestDistance] = [known, distance];
  }
  return best;
}

/** Levenshtein distance: insertions, deletions and substitutions. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++)
      current[j] = Math.min(
        (previous[j] as number) + 1,
        (current[j - 1] as number) + 1,
        (previous[j - 1] as number) + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    previous = current;
  }
  return previous[b.length] as number;
}
