/** Builds the engine's parts from configuration; every entry point (CLI, chat adapters) uses these. */
import { createOpenAIModel } from "./agent/llm.js";
import type { AgentConfig } from "./agent/loop.js";
import type { ChatModel } from "./agent/types.js";
import { assertModelConfigured, type GlassboxConfig } from "./config.js";
import { createBuiltinTools } from "./tools/builtin/index.js";
import { loadToolModules } from "./tools/load-modules.js";
import { createToolRegistry, type ToolRegistry } from "./tools/registry.js";
import type { ApprovalGate } from "./tools/types.js";

/** The built-in tools plus those of GLASSBOX_TOOLS and any extra modules. */
export async function loadRegistry(config: GlassboxConfig, extraModules: string[] = []): Promise<ToolRegistry> {
  const extra = await loadToolModules([...config.toolModules, ...extraModules]);
  return createToolRegistry([...createBuiltinTools({ shopDatabasePath: config.shopDatabasePath }), ...extra]);
}

export function createModel(config: GlassboxConfig): ChatModel {
  assertModelConfigured(config);
  return createOpenAIModel({ ...config.model, warn: (message) => console.warn(`glassbox: ${message}`) });
}

export async function createAgentConfig(
  config: GlassboxConfig,
  options: { toolModules?: string[]; approve?: ApprovalGate; maxSteps?: number } = {},
): Promise<AgentConfig> {
  return {
    model: createModel(config),
    tools: await loadRegistry(config, options.toolModules),
    systemPrompt: config.systemPrompt,
    maxSteps: options.maxSteps ?? config.maxSteps,
    approve: options.approve,
    toolTimeoutMs: config.toolTimeoutMs,
    maxResultChars: config.maxResultChars,
  };
}
