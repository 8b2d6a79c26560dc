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
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { Tool as McpTool } from "@modelcontextprotocol/sdk/types.js";
import type { McpServerConfig } from "./mcp-config.js";
import { createSchemaChecker } from "./mcp-schemas.js";
import { resultData, toolsOf, type McpToolSource } from "./mcp-tools.js";
import type { AnyTool } from "./types.js";

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
export async function connectMcpServers(
  servers: Record<string, McpServerConfig>,
  options: McpConnectOptions,
): Promise<McpServers> {
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
interface Connection extends McpToolSource {
  start(): Promise<void>;
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
      return new sdk.StreamableHTTPClientTransport(new URL(config.url), {
        requestInit: { headers: config.headers ?? {} },
      });
    }
    const transport = new sdk.StdioClientTransport({
      command: config.command,
      args: config.args ?? [],
      env: config.env ?? {},
      ...(config.cwd ? { cwd: config.cwd } : {}),
      stderr: "pipe",
    });
    // The server's stderr goes to the debug log; its last lines explain a crash.
    transport.stderr?.on("data", (chunk: Buffer) => {
      const text = chunk.toString();
      stderrTail = (stderrTail + text).slice(-500);
      for (const line of text.split("\n"))
        if (line.trim()) log.debug({ ...fields, stderr: line }, `MCP server '${name}' says`);
    });
    return transport;
  };

  /** The server went away: forget its client and reconnect, once per lost client. */
  const lose = (lost: Client, reason: string): void => {
    if (lost !== client || state === "closed") return;
    client = undefined;
    state = "reconnecting";
    lastError = withStderr(reason);
    log.warn(
      { ...fields, error: lastError },
      `MCP server '${name}' disconnected (${lastError}); reconnecting, its tools fail meanwhile`,
    );
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
          log.warn(
            { ...fields, error: lastError, attempt: failures },
            `MCP server '${name}' could not be reconnected (${lastError}); trying again`,
          );
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
      log.warn(
        { ...fields, error: errorMessage(error) },
        `MCP server '${name}' changed its tool list but it could not be read again`,
      );
    }
  };

  const noteNewTools = (): void => {
    const added = [...offered.keys()].filter((tool) => !registered.has(tool));
    if (added.length > 0) {
      log.info(
        { ...fields, added },
        `MCP server '${name}' now offers tools that glassbox registers only at startup: ${added.join(", ")}`,
      );
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
        log.warn(
          { ...fields, error: lastError },
          `MCP server '${name}' could not be reached at startup (${lastError}); its tools are left out until glassbox restarts`,
        );
      }
    },

    async call(tool, args, signal) {
      const current = client;
      if (!current || state !== "connected") {
        throw new Error(
          `MCP server '${name}' is not connected (${state === "closed" ? "closed" : "reconnecting"}); try again later or use another way.`,
        );
      }
      if (!offered.has(tool))
        throw new Error(`MCP server '${name}' no longer offers the tool '${tool}'; use another way.`);
      let result: Awaited<ReturnType<Client["callTool"]>>;
      try {
        result = await current.callTool({ name: tool, arguments: args }, undefined, {
          signal,
          timeout: SDK_REQUEST_TIMEOUT_MS,
        });
      } catch (error) {
        if (signal.aborted || !isConnectionFailure(error)) throw error;
        lose(current, errorMessage(error));
        throw new Error(
          `MCP server '${name}' disconnected before '${tool}' answered (${errorMessage(error)}), so it may or may not have taken effect; the server is reconnecting.`,
        );
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

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
