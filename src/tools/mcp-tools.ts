/**
 * What an MCP server offers, as glassbox sees it: its tools as plain glassbox tools (named
 * `server__tool`, dangerous when the server or the configuration says so), and a tool's result as
 * what the model reads.
 */
import { createHash } from "node:crypto";
import type { CallToolResult, ContentBlock, Tool as McpTool } from "@modelcontextprotocol/sdk/types.js";
import type { McpServerConfig } from "./mcp-config.js";
import type { SchemaChecker } from "./mcp-schemas.js";
import type { AnyTool } from "./types.js";

/** The part of a server's connection its tools need. */
export interface McpToolSource {
  name: string;
  config: McpServerConfig;
  /** The tools the server offered when last asked, by MCP name. */
  offered(): Map<string, McpTool>;
  /** MCP names that became glassbox tools, filled here. */
  registered: Map<string, string>;
  call(tool: string, args: Record<string, unknown>, signal: AbortSignal): Promise<unknown>;
}

/** The part of a logger this module uses. */
export interface McpToolLog {
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
}

/** A server's tools as glassbox tools named `server__tool`; those whose schema cannot be used are left out, with a warning. */
export function toolsOf(
  connection: McpToolSource,
  schemas: SchemaChecker,
  taken: Set<string>,
  log: McpToolLog,
): AnyTool[] {
  const { name: server, config } = connection;
  const dangerousNames = new Set(config.dangerous ?? []);
  const tools: AnyTool[] = [];
  for (const tool of connection.offered().values()) {
    const fields = { server, tool: tool.name };
    if (tool.execution?.taskSupport === "required") {
      log.warn(
        fields,
        `MCP tool '${tool.name}' of server '${server}' is left out: it only runs as a task, which glassbox does not support`,
      );
      continue;
    }
    const checked = schemas.normalise(tool.inputSchema);
    if ("error" in checked) {
      log.warn(
        { ...fields, error: checked.error },
        `MCP tool '${tool.name}' of server '${server}' is left out: its input schema does not compile (${checked.error})`,
      );
      continue;
    }
    if (checked.dropped.length > 0)
      log.info(
        { ...fields, dropped: checked.dropped },
        `MCP tool '${tool.name}' of server '${server}': schema keywords ajv cannot check were dropped`,
      );
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
      log.warn(
        { server, tool: listed },
        `MCP server '${server}' has no tool '${listed}' (listed in "dangerous"); check the name`,
      );
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

/** What the model reads: structured content if any, else the content as text. An error result throws. */
export function resultData(
  result: Pick<CallToolResult, "content" | "structuredContent" | "isError">,
  server: string,
  tool: string,
): unknown {
  const text = (result.content ?? []).map(describeContent).join("\n");
  if (result.isError)
    throw new Error(text.trim() || `The MCP tool '${tool}' on server '${server}' failed without saying why.`);
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
      return "text" in block.resource
        ? block.resource.text
        : `[resource: ${block.resource.uri}${block.resource.mimeType ? ` (${block.resource.mimeType})` : ""}]`;
    default:
      return `[${(block as { type: string }).type}]`;
  }
}
