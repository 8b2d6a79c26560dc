/**
 * MCP servers as glassbox tools. Each configured server (a stdio command or a Streamable HTTP URL)
 * is connected with the official SDK at startup; each of its tools becomes a plain glassbox tool
 * named `server__tool`, so it goes through the same registry, validation, timeouts, truncation,
 * approvals and traces as any other tool.
 *
 * - A server that cannot be reached at startup is logged and left out: its tools cannot be known
 *   before a first connection and the registry is built once, so only a restart brings them in.
 * - A server that dies later is reconnected with backoff; meanwhile its tools fail with an
 *   `execution_error` saying so, and once it is back the same names work again.
 * - `status()` tells the state of every server; `close()` ends them all.
 */
import { createHash } from "node:crypto";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { CallToolResult, ContentBlock, Tool as McpTool } from "@modelcontextprotocol/sdk/types.js";
import { Ajv } from "ajv";
import addFormatsModule from "ajv-formats";
import { isPlainObject } from "./args.js";
import type { AnyTool, JsonSchema } from "./types.js";

// ajv-formats ships CommonJS with a default export that NodeNext sees one level down.
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

// ---- configuration -------------------------------------------------------------------------

interface McpServerCommon {
  /** MCP tool names that need a person's approval even without `destructiveHint`. */
  dangerous?: string[];
  /** Per-call time limit of this server's tools, in ms (default: the executor's). */
  timeoutMs?: number;
}

/** A server run as a child process, spoken to over stdin/stdout. */
export interface McpStdioServerConfig extends McpServerCommon {
  command: string;
  args?: string[];
  /** Added to a minimal inherited environment (HOME, PATH, SHELL, TERM, USER, LOGNAME): glassbox's own secrets are not passed on. */
  env?: Record<string, string>;
  cwd?: string;
}

/** A server reached over Streamable HTTP. */
export interface McpHttpServerConfig extends McpServerCommon {
  url: string;
  headers?: Record<string, string>;
}

export type McpServerConfig = McpStdioServerConfig | McpHttpServerConfig;

const SERVER_NAME = /^[a-zA-Z0-9_-]{1,32}$/;
const SETTINGS = "command, args, env, cwd (stdio) or url, headers (Streamable HTTP), and dangerous, timeoutMs";

/**
 * Reads GLASSBOX_MCP_SERVERS: a JSON object of servers by name, e.g.
 * `{"files": {"command": "node", "args": ["server.js"], "dangerous": ["delete_file"]}, "search": {"url": "http://127.0.0.1:9000/mcp"}}`.
 * Throws an Error of one sentence naming the server and what is wrong.
 */
export function parseMcpServers(json: string | undefined): Record<string, McpServerConfig> {
  if (!json?.trim()) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch (error) {
    throw new Error(`GLASSBOX_MCP_SERVERS is not valid JSON (${(error as Error).message}); give an object of servers by name.`);
  }
  if (!isPlainObject(parsed)) throw new Error(`GLASSBOX_MCP_SERVERS must be a JSON object of servers by name, like {"files": {"command": "node", "args": ["server.js"]}}.`);
  const servers: Record<string, McpServerConfig> = {};
  for (const [name, value] of Object.entries(parsed)) servers[name] = parseServer(name, value);
  return servers;
}

function parseServer(name: string, value: unknown): McpServerConfig {
  const problem = (what: string) => new Error(`GLASSBOX_MCP_SERVERS: the server '${name}' ${what}.`);
  if (!SERVER_NAME.test(name)) throw problem("has a name that is not 1-32 letters, digits, '_' or '-'");
  if (!isPlainObject(value)) throw problem(`must be an object with "command" (stdio) or "url" (Streamable HTTP)`);
  const unknown = Object.keys(value).find((key) => !["command", "args", "env", "cwd", "url", "headers", "dangerous", "timeoutMs"].includes(key));
  if (unknown) throw problem(`has an unknown setting '${unknown}'; the settings are ${SETTINGS}`);
  const isStringList = (list: unknown) => Array.isArray(list) && list.every((item) => typeof item === "string");
  const isStringMap = (map: unknown) => isPlainObject(map) && Object.values(map).every((item) => typeof item === "string");
  if (value.dangerous !== undefined && !isStringList(value.dangerous)) throw problem(`has "dangerous" that is not a list of tool names`);
  if (value.timeoutMs !== undefined && !(typeof value.timeoutMs === "number" && Number.isFinite(value.timeoutMs) && value.timeoutMs > 0)) {
    throw problem(`has "timeoutMs" that is not a positive number of milliseconds`);
  }
  const common = {
    ...(value.dangerous !== undefined ? { dangerous: value.dangerous as string[] } : {}),
    ...(value.timeoutMs !== undefined ? { timeoutMs: value.timeoutMs as number } : {}),
  };

  if ((value.command === undefined) === (value.url === undefined)) throw problem(`needs exactly one of "command" (stdio) or "url" (Streamable HTTP)`);
  if (value.url !== undefined) {
    if (typeof value.url !== "string" || !URL.canParse(value.url) || !/^https?:$/.test(new URL(value.url).protocol)) throw problem(`has "url" that is not an http(s) URL`);
    if (value.headers !== undefined && !isStringMap(value.headers)) throw problem(`has "headers" that is not an object of strings`);
    const stray = ["args", "env", "cwd"].find((key) => value[key] !== undefined);
    if (stray) throw problem(`has "${stray}", which only a stdio server (with "command") takes`);
    return { url: value.url, ...(value.headers !== undefined ? { headers: value.headers as Record<string, string> } : {}), ...common };
  }
  if (typeof value.command !== "string" || value.command.trim() === "") throw problem(`has "command" that is not a non-empty string`);
  if (value.args !== undefined && !isStringList(value.args)) throw problem(`has "args" that is not a list of strings`);
  if (value.env !== undefined && !isStringMap(value.env)) throw problem(`has "env" that is not an object of strings`);
  if (value.cwd !== undefined && typeof value.cwd !== "string") throw problem(`has "cwd" that is not a string`);
  if (value.headers !== undefined) throw problem(`has "headers", which only an HTTP server (with "url") takes`);
  return {
    command: value.command,
    ...(value.args !== undefined ? { args: value.args as string[] } : {}),
    ...(value.env !== undefined ? { env: value.env as Record<string, string> } : {}),
    ...(value.cwd !== undefined ? { cwd: value.cwd } : {}),
    ...common,
  };
}

// ---- connecting ----------------------------------------------------------------------------

/** The part of a logger this module uses (pino's Logger fits). */
export interface McpLogger {
  debug(fields: Record<string, unknown>, message: string): void;
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
}

export interface McpConnectOptions {
  log: McpLogger;
  /** How long connecting (and listing tools) may take at startup or on a reconnection (default 30 s). */
  connectTimeoutMs?: number;
  /** Delay before the first reconnection attempt, doubled after each failure (default 500 ms). */
  reconnectInitialDelayMs?: number;
  /** Longest delay between reconnection attempts (default 30 s). */
  reconnectMaxDelayMs?: number;
}

export type McpServerState = "connecting" | "connected" | "reconnecting" | "failed" | "closed";

export interface McpServerStatus {
  server: string;
  transport: "stdio" | "http";
  /** "failed": unreachable at startup, so it has no tools and is not retried. */
  state: McpServerState;
  /** The glassbox names of its registered tools. */
  tools: string[];
  /** The MCP names of the tools it offered when last asked. */
  offered: string[];
  /** Successful reconnections since startup. */
  reconnects: number;
  lastError?: string;
}

export interface McpServers {
  /** Every tool of every server reached at startup, ready for createToolRegistry. */
  tools: AnyTool[];
  status(): McpServerStatus[];
  /** Ends every connection (and stdio process) and stops reconnecting. */
  close(): Promise<void>;
}

const DEFAULT_CONNECT_TIMEOUT_MS = 30_000;
/** The SDK's own per-request limit; the executor's timeout, which aborts the call, comes first. */
const SDK_REQUEST_TIMEOUT_MS = 3_600_000;

/**
 * Connects every configured server, lists its tools (all pages) and turns them into glassbox tools.
 * Never throws for a server: one that cannot be reached is logged and has no tools.
 */
export async function connectMcpServers(servers: Record<string, McpServerConfig>, options: McpConnectOptions): Promise<McpServers> {
  const entries = Object.entries(servers);
  if (entries.length === 0) return { tools: [], status: () => [], close: async () => {} };
  // Loaded here, so reading the configuration never pays for the SDK.
  const sdk = await loadSdk();
  const connections = entries.map(([name, config]) => createConnection(name, config, sdk, options));
  await Promise.all(connections.map((connection) => connection.start()));

  const schemas = createSchemaChecker();
  const taken = new Set<string>();
  const tools = connections.flatMap((connection) => toolsOf(connection, schemas, taken, options.log));
  return {
    tools,
    status: () => connections.map((connection) => connection.status()),
    close: async () => {
      await Promise.all(connections.map((connection) => connection.close()));
    },
  };
}

async function loadSdk() {
  const [client, stdio, http, types] = await Promise.all([
    import("@modelcontextprotocol/sdk/client/index.js"),
    import("@modelcontextprotocol/sdk/client/stdio.js"),
    import("@modelcontextprotocol/sdk/client/streamableHttp.js"),
    import("@modelcontextprotocol/sdk/types.js"),
  ]);
  return {
    Client: client.Client,
    StdioClientTransport: stdio.StdioClientTransport,
    StreamableHTTPClientTransport: http.StreamableHTTPClientTransport,
    StreamableHTTPError: http.StreamableHTTPError,
    McpError: types.McpError,
    connectionClosedCode: types.ErrorCode.ConnectionClosed as number,
  };
}

type Sdk = Awaited<ReturnType<typeof loadSdk>>;

/** One server: its client while connected, the tools it offers, and reconnection with backoff. */
interface Connection {
  name: string;
  config: McpServerConfig;
  /** The tools the server offered when last asked, by MCP name. */
  offered(): Map<string, McpTool>;
  /** MCP names that became glassbox tools (set once, at startup). */
  registered: Map<string, string>;
  start(): Promise<void>;
  call(tool: string, args: Record<string, unknown>, signal: AbortSignal): Promise<unknown>;
  status(): McpServerStatus;
  close(): Promise<void>;
}

function createConnection(name: string, config: McpServerConfig, sdk: Sdk, options: McpConnectOptions): Connection {
  const { log } = options;
  const fields = { server: name };
  const connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  const initialDelayMs = options.reconnectInitialDelayMs ?? 500;
  const maxDelayMs = options.reconnectMaxDelayMs ?? 30_000;
  let client: Client | undefined;
  let state: McpServerState = "connecting";
  let offered = new Map<string, McpTool>();
  let lastError: string | undefined;
  let failures = 0;
  let reconnects = 0;
  let retry: NodeJS.Timeout | undefined;
  let stderrTail = "";
  let opening: Promise<void> | undefined;
  const registered = new Map<string, string>();

  /** Opens a new client, lists the tools, and only then makes it the current one. */
  const open = (): Promise<void> => {
    opening = openClient().finally(() => {
      opening = undefined;
    });
    return opening;
  };

  const openClient = async (): Promise<void> => {
    const next: Client = new sdk.Client(
      { name: "glassbox", version: "1" },
      { listChanged: { tools: { autoRefresh: false, onChanged: () => void refresh(next) } } },
    );
    next.onclose = () => lose(next, "the connection closed");
    next.onerror = (error) => log.debug({ ...fields, error: error.message }, `MCP server '${name}' transport error`);
    try {
      await next.connect(createTransport(), { timeout: connectTimeoutMs });
      const tools = await listAllTools(next, connectTimeoutMs);
      if (state === "closed") throw new Error("closed while connecting");
      client = next;
      offered = tools;
      state = "connected";
      failures = 0;
      lastError = undefined;
    } catch (error) {
      await next.close().catch(() => undefined);
      throw error;
    }
  };

  const createTransport = (): Transport => {
    if ("url" in config) {
      return new sdk.StreamableHTTPClientTransport(new URL(config.url), { requestInit: { headers: config.headers ?? {} } });
    }
    const transport = new sdk.StdioClientTransport({ command: config.command, args: config.args ?? [], env: config.env ?? {}, ...(config.cwd ? { cwd: config.cwd } : {}), stderr: "pipe" });
    // The server's stderr goes to the debug log; its last lines explain a crash.
    transport.stderr?.on("data", (chunk: Buffer) => {
      const text = chunk.toString();
      stderrTail = (stderrTail + text).slice(-500);
      for (const line of text.split("\n")) if (line.trim()) log.debug({ ...fields, stderr: line }, `MCP server '${name}' says`);
    });
    return transport;
  };

  /** The server went away: forget its client and reconnect, once per lost client. */
  const lose = (lost: Client, reason: string): void => {
    if (lost !== client || state === "closed") return;
    client = undefined;
    state = "reconnecting";
    lastError = withStderr(reason);
    log.warn({ ...fields, error: lastError }, `MCP server '${name}' disconnected (${lastError}); reconnecting, its tools fail meanwhile`);
    void lost.close().catch(() => undefined);
    scheduleReconnect();
  };

  const scheduleReconnect = (): void => {
    const delay = Math.min(maxDelayMs, initialDelayMs * 2 ** failures);
    retry = setTimeout(() => {
      retry = undefined;
      stderrTail = "";
      open().then(
        () => {
          reconnects++;
          log.info({ ...fields, tools: offered.size }, `MCP server '${name}' reconnected`);
          noteNewTools();
        },
        (error: unknown) => {
          if (state === "closed") return;
          failures++;
          lastError = withStderr(errorMessage(error));
          log.warn({ ...fields, error: lastError, attempt: failures }, `MCP server '${name}' could not be reconnected (${lastError}); trying again`);
          scheduleReconnect();
        },
      );
    }, delay);
    retry.unref();
  };

  /** The server said its tool list changed: read it again (the glassbox tools stay as registered). */
  const refresh = async (from: Client): Promise<void> => {
    if (from !== client) return;
    try {
      const tools = await listAllTools(from, connectTimeoutMs);
      if (from !== client) return;
      offered = tools;
      log.info({ ...fields, tools: offered.size }, `MCP server '${name}' changed its tool list`);
      noteNewTools();
    } catch (error) {
      log.warn({ ...fields, error: errorMessage(error) }, `MCP server '${name}' changed its tool list but it could not be read again`);
    }
  };

  const noteNewTools = (): void => {
    const added = [...offered.keys()].filter((tool) => !registered.has(tool));
    if (added.length > 0) {
      log.info({ ...fields, added }, `MCP server '${name}' now offers tools that glassbox registers only at startup: ${added.join(", ")}`);
    }
  };

  const withStderr = (message: string): string => {
    const last = stderrTail.trim().split("\n").at(-1)?.trim();
    return last ? `${message}; its last output: ${last}` : message;
  };

  /** A transport failure (as opposed to an answer from the server) means the connection is gone. */
  const isConnectionFailure = (error: unknown): boolean =>
    (error instanceof sdk.McpError && error.code === sdk.connectionClosedCode) ||
    error instanceof sdk.StreamableHTTPError ||
    error instanceof TypeError || // fetch failed
    (error instanceof Error && error.message === "Not connected");

  return {
    name,
    config,
    registered,
    offered: () => offered,

    async start() {
      try {
        await open();
        log.info({ ...fields, tools: offered.size }, `MCP server '${name}' connected`);
      } catch (error) {
        if (state !== "closed") state = "failed";
        lastError = withStderr(errorMessage(error));
        log.warn({ ...fields, error: lastError }, `MCP server '${name}' could not be reached at startup (${lastError}); its tools are left out until glassbox restarts`);
      }
    },

    async call(tool, args, signal) {
      const current = client;
      if (!current || state !== "connected") {
        throw new Error(`MCP server '${name}' is not connected (${state === "closed" ? "closed" : "reconnecting"}); try again later or use another way.`);
      }
      if (!offered.has(tool)) throw new Error(`MCP server '${name}' no longer offers the tool '${tool}'; use another way.`);
      let result: Awaited<ReturnType<Client["callTool"]>>;
      try {
        result = await current.callTool({ name: tool, arguments: args }, undefined, { signal, timeout: SDK_REQUEST_TIMEOUT_MS });
      } catch (error) {
        if (signal.aborted || !isConnectionFailure(error)) throw error;
        lose(current, errorMessage(error));
        throw new Error(`MCP server '${name}' disconnected before '${tool}' answered (${errorMessage(error)}), so it may or may not have taken effect; the server is reconnecting.`);
      }
      // Servers of the oldest protocol version answer with `toolResult`.
      return "toolResult" in result ? result.toolResult : resultData(result, name, tool);
    },

    status() {
      return {
        server: name,
        transport: "url" in config ? "http" : "stdio",
        state,
        tools: [...registered.values()],
        offered: [...offered.keys()],
        reconnects,
        ...(lastError !== undefined ? { lastError } : {}),
      };
    },

    async close() {
      state = "closed";
      clearTimeout(retry);
      const current = client;
      client = undefined;
      await Promise.all([current?.close().catch(() => undefined), opening?.catch(() => undefined)]);
    },
  };
}

async function listAllTools(client: Client, timeout: number): Promise<Map<string, McpTool>> {
  const tools = new Map<string, McpTool>();
  const seen = new Set<string>();
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor === undefined ? {} : { cursor }, { timeout });
    for (const tool of page.tools) tools.set(tool.name, tool);
    cursor = page.nextCursor;
    // A server that hands out the same cursor twice would page forever.
    if (cursor !== undefined && seen.has(cursor)) break;
    if (cursor !== undefined) seen.add(cursor);
  } while (cursor !== undefined);
  return tools;
}

/** What the model reads: structured content if any, else the content as text. An error result throws. */
function resultData(result: Pick<CallToolResult, "content" | "structuredContent" | "isError">, server: string, tool: string): unknown {
  const text = (result.content ?? []).map(describeContent).join("\n");
  if (result.isError) throw new Error(text.trim() || `The MCP tool '${tool}' on server '${server}' failed without saying why.`);
  return result.structuredContent ?? text;
}

function describeContent(block: ContentBlock): string {
  switch (block.type) {
    case "text":
      return block.text;
    case "image":
    case "audio":
      return `[${block.type}: ${block.mimeType}]`;
    case "resource_link":
      return `[resource link: ${block.uri}${block.name ? ` (${block.name})` : ""}]`;
    case "resource":
      return "text" in block.resource ? block.resource.text : `[resource: ${block.resource.uri}${block.resource.mimeType ? ` (${block.resource.mimeType})` : ""}]`;
    default:
      return `[${(block as { type: string }).type}]`;
  }
}

// ---- turning MCP tools into glassbox tools -------------------------------------------------

function toolsOf(connection: Connection, schemas: SchemaChecker, taken: Set<string>, log: McpLogger): AnyTool[] {
  const { name: server, config } = connection;
  const dangerousNames = new Set(config.dangerous ?? []);
  const tools: AnyTool[] = [];
  for (const tool of connection.offered().values()) {
    const fields = { server, tool: tool.name };
    if (tool.execution?.taskSupport === "required") {
      log.warn(fields, `MCP tool '${tool.name}' of server '${server}' is left out: it only runs as a task, which glassbox does not support`);
      continue;
    }
    const checked = schemas.normalise(tool.inputSchema);
    if ("error" in checked) {
      log.warn({ ...fields, error: checked.error }, `MCP tool '${tool.name}' of server '${server}' is left out: its input schema does not compile (${checked.error})`);
      continue;
    }
    if (checked.dropped.length > 0) log.info({ ...fields, dropped: checked.dropped }, `MCP tool '${tool.name}' of server '${server}': schema keywords ajv cannot check were dropped`);
    const name = uniqueName(`${server}__${tool.name}`, taken);
    const annotations = tool.annotations ?? {};
    const destructive = annotations.destructiveHint === true && annotations.readOnlyHint !== true;
    const description = tool.description?.trim() || tool.title || tool.annotations?.title || tool.name;
    tools.push({
      name,
      description: `${server}: ${description}`,
      parameters: checked.schema,
      dangerous: destructive || dangerousNames.has(tool.name),
      ...(config.timeoutMs !== undefined ? { timeoutMs: config.timeoutMs } : {}),
      handler: (args: Record<string, unknown>, context) => connection.call(tool.name, args, context.signal),
    });
    connection.registered.set(tool.name, name);
  }
  for (const listed of dangerousNames) {
    if (connection.offered().size > 0 && !connection.offered().has(listed)) {
      log.warn({ server, tool: listed }, `MCP server '${server}' has no tool '${listed}' (listed in "dangerous"); check the name`);
    }
  }
  return tools;
}

/** `server__tool` within ^[a-zA-Z0-9_-]{1,64}$; a name cut short or already taken gets a short hash of the original. */
function uniqueName(wanted: string, taken: Set<string>): string {
  let name = wanted.replace(/[^a-zA-Z0-9_-]/g, "_");
  if (name.length > 64 || taken.has(name)) {
    const hash = createHash("sha256").update(wanted).digest("hex").slice(0, 8);
    name = `${name.slice(0, 64 - 9)}_${hash}`;
  }
  taken.add(name);
  return name;
}

// ---- schemas -------------------------------------------------------------------------------

interface SchemaChecker {
  /** A copy the registry can compile, with what was dropped; or why it cannot be used. */
  normalise(schema: unknown): { schema: JsonSchema; dropped: string[] } | { error: string };
}

/** Keywords whose values are subschemas: by name, as a list, or one schema. */
const SCHEMA_MAPS = ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"];
const SCHEMA_LISTS = ["allOf", "anyOf", "oneOf", "prefixItems"];
const SCHEMA_VALUES = ["items", "additionalItems", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames", "unevaluatedItems", "unevaluatedProperties"];

/**
 * MCP schemas follow any JSON Schema draft and may carry keywords and formats the registry's strict
 * ajv rejects. Dropped: "$schema" (the registry validates with its own draft), keywords ajv does not
 * know and formats it has no check for — ajv would not check any of them anyway, and the server still
 * does. Anything else that fails to compile (a bad pattern, strict-mode errors) leaves the tool out.
 */
function createSchemaChecker(): SchemaChecker {
  // The registry's options (src/tools/registry.ts), so what compiles here registers there.
  const ajv = new Ajv({ allErrors: true, verbose: true, useDefaults: true, strict: true, strictTypes: false, allowUnionTypes: true });
  addFormats(ajv);
  const known = (keyword: string) => keyword === "$id" || ajv.RULES.keywords[keyword] === true;

  const clean = (schema: unknown, path: string, dropped: string[]): void => {
    if (!isPlainObject(schema)) return;
    for (const keyword of Object.keys(schema)) {
      const value = schema[keyword];
      if (keyword === "$schema" || !known(keyword)) {
        if (keyword !== "$schema") dropped.push(`${path}/${keyword}`);
        delete schema[keyword];
      } else if (keyword === "format" && typeof value === "string" && !(value in ajv.formats)) {
        dropped.push(`${path}/format "${value}"`);
        delete schema[keyword];
      } else if (SCHEMA_MAPS.includes(keyword) && isPlainObject(value)) {
        for (const [key, child] of Object.entries(value)) clean(child, `${path}/${keyword}/${key}`, dropped);
      } else if ((SCHEMA_LISTS.includes(keyword) || SCHEMA_VALUES.includes(keyword)) && Array.isArray(value)) {
        value.forEach((child, index) => clean(child, `${path}/${keyword}/${index}`, dropped));
      } else if (SCHEMA_VALUES.includes(keyword)) {
        clean(value, `${path}/${keyword}`, dropped);
      }
    }
  };

  return {
    normalise(input) {
      if (!isPlainObject(input)) return { error: "it is not an object" };
      const schema = structuredClone(input);
      schema.type ??= "object";
      if (schema.type !== "object") return { error: `its type is ${JSON.stringify(schema.type)}, not "object"` };
      const dropped: string[] = [];
      clean(schema, "#", dropped);
      try {
        ajv.compile(schema);
      } catch (error) {
        return { error: errorMessage(error) };
      }
      return { schema, dropped };
    },
  };
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
