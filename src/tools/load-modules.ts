import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { ToolDefinitionError } from "./registry.js";
import type { ToolGroup } from "./tool-sources.js";
import type { AnyTool } from "./types.js";

/**
 * Imports tool modules: each default-exports an array of tool definitions. A specifier is a file
 * path (relative to the working directory) or a package name. Each module's tools keep its name,
 * so a clash between two modules can say which.
 */
export async function loadToolModules(specifiers: string[]): Promise<ToolGroup[]> {
  const groups: ToolGroup[] = [];
  for (const specifier of specifiers) {
    const path = resolve(specifier);
    const target = existsSync(path) ? pathToFileURL(path).href : specifier;
    let module: { default?: unknown };
    try {
      module = (await import(target)) as { default?: unknown };
    } catch (error) {
      throw new ToolDefinitionError(`Could not load the tool module '${specifier}': ${(error as Error).message}`);
    }
    if (!Array.isArray(module.default)) {
      throw new ToolDefinitionError(`The tool module '${specifier}' must default-export an array of tool definitions.`);
    }
    groups.push({ source: { kind: "module", module: specifier }, tools: module.default as AnyTool[] });
  }
  return groups;
}
