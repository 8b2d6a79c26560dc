/**
 * Where each tool of a deployment comes from, and which one wins a name. A deployment has the
 * built-ins (and, in the demo, the demo shop) and what its owner configured: tool modules, MCP
 * servers, specialists. A configured tool whose name is a built-in's replaces the built-in (an
 * owner's `send_message` is the one they mean); two configured tools with one name are a mistake
 * that fails at start, naming both places.
 */
import { ToolDefinitionError } from "./registry.js";
import type { AnyTool } from "./types.js";

export type ToolSource =
  | { kind: "builtin" }
  | { kind: "demo" }
  | { kind: "module"; module: string }
  | { kind: "mcp"; server: string }
  | { kind: "specialist" };

export interface ToolGroup {
  source: ToolSource;
  tools: AnyTool[];
}

export interface AssembledTools {
  /** The tools in registration order: built-ins first, each replaced one where it stood. */
  tools: AnyTool[];
  sources: Map<string, ToolSource>;
  /** Built-ins that a configured tool replaced, to be logged once at start. */
  replaced: Array<{ name: string; by: ToolSource }>;
}

/** "built-in", "demo shop", "module ./my-tools.mjs", "MCP server files", "specialist". */
export function describeSource(source: ToolSource): string {
  switch (source.kind) {
    case "builtin":
      return "built-in";
    case "demo":
      return "demo shop";
    case "module":
      return `module ${source.module}`;
    case "mcp":
      return `MCP server ${source.server}`;
    case "specialist":
      return "specialist";
  }
}

const replaceable = (source: ToolSource) => source.kind === "builtin" || source.kind === "demo";

export function assembleTools(groups: ToolGroup[]): AssembledTools {
  const byName = new Map<string, { tool: AnyTool; source: ToolSource }>();
  const replaced: AssembledTools["replaced"] = [];
  const unnamed: AnyTool[] = []; // not a valid definition: the registry says what is wrong with it
  for (const { source, tools } of groups) {
    for (const tool of tools) {
      const name = typeof tool === "object" && tool !== null && typeof tool.name === "string" ? tool.name : undefined;
      if (name === undefined) {
        unnamed.push(tool);
        continue;
      }
      const earlier = byName.get(name);
      if (earlier && !(replaceable(earlier.source) && !replaceable(source)))
        throw collision(name, earlier.source, source);
      if (earlier) replaced.push({ name, by: source });
      byName.set(name, { tool, source });
    }
  }
  return {
    tools: [...[...byName.values()].map((entry) => entry.tool), ...unnamed],
    sources: new Map([...byName].map(([name, entry]) => [name, entry.source])),
    replaced,
  };
}

function collision(name: string, first: ToolSource, second: ToolSource): ToolDefinitionError {
  const same = JSON.stringify(first) === JSON.stringify(second);
  if (same)
    return new ToolDefinitionError(
      `Tool '${name}' is defined twice in ${describeSource(first)}; tool names must be unique.`,
    );
  return new ToolDefinitionError(
    `Tool '${name}' is defined by both ${describeSource(first)} and ${describeSource(second)}; rename one of them.`,
  );
}
