/**
 * GLASSBOX_MCP_SERVERS: the MCP servers to connect, by name, each a stdio command or a Streamable
 * HTTP URL, read and checked before anything connects.
 */
import { isPlainObject } from "./args.js";

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
    throw new Error(
      `GLASSBOX_MCP_SERVERS is not valid JSON (${(error as Error).message}); give an object of servers by name.`,
    );
  }
  if (!isPlainObject(parsed))
    throw new Error(
      `GLASSBOX_MCP_SERVERS must be a JSON object of servers by name, like {"files": {"command": "node", "args": ["server.js"]}}.`,
    );
  const servers: Record<string, McpServerConfig> = {};
  for (const [name, value] of Object.entries(parsed)) servers[name] = parseServer(name, value);
  return servers;
}

function parseServer(name: string, value: unknown): McpServerConfig {
  const problem = (what: string) => new Error(`GLASSBOX_MCP_SERVERS: the server '${name}' ${what}.`);
  if (!SERVER_NAME.test(name)) throw problem("has a name that is not 1-32 letters, digits, '_' or '-'");
  if (!isPlainObject(value)) throw problem(`must be an object with "command" (stdio) or "url" (Streamable HTTP)`);
  const unknown = Object.keys(value).find(
    (key) => !["command", "args", "env", "cwd", "url", "headers", "dangerous", "timeoutMs"].includes(key),
  );
  if (unknown) throw problem(`has an unknown setting '${unknown}'; the settings are ${SETTINGS}`);
  const isStringList = (list: unknown) => Array.isArray(list) && list.every((item) => typeof item === "string");
  const isStringMap = (map: unknown) =>
    isPlainObject(map) && Object.values(map).every((item) => typeof item === "string");
  if (value.dangerous !== undefined && !isStringList(value.dangerous))
    throw problem(`has "dangerous" that is not a list of tool names`);
  if (
    value.timeoutMs !== undefined &&
    !(typeof value.timeoutMs === "number" && Number.isFinite(value.timeoutMs) && value.timeoutMs > 0)
  ) {
    throw problem(`has "timeoutMs" that is not a positive number of milliseconds`);
  }
  const common = {
    ...(value.dangerous !== undefined ? { dangerous: value.dangerous as string[] } : {}),
    ...(value.timeoutMs !== undefined ? { timeoutMs: value.timeoutMs as number } : {}),
  };

  if ((value.command === undefined) === (value.url === undefined))
    throw problem(`needs exactly one of "command" (stdio) or "url" (Streamable HTTP)`);
  if (value.url !== undefined) {
    if (typeof value.url !== "string" || !URL.canParse(value.url) || !/^https?:$/.test(new URL(value.url).protocol))
      throw problem(`has "url" that is not an http(s) URL`);
    if (value.headers !== undefined && !isStringMap(value.headers))
      throw problem(`has "headers" that is not an object of strings`);
    const stray = ["args", "env", "cwd"].find((key) => value[key] !== undefined);
    if (stray) throw problem(`has "${stray}", which only a stdio server (with "command") takes`);
    return {
      url: value.url,
      ...(value.headers !== undefined ? { headers: value.headers as Record<string, string> } : {}),
      ...common,
    };
  }
  if (typeof value.command !== "string" || value.command.trim() === "")
    throw problem(`has "command" that is not a non-empty string`);
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
