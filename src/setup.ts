/** Builds the engine's parts from configuration; every entry point (CLI, chat adapters) uses these. */
import { readFileSync } from "node:fs";
import { createOpenAIModel } from "./agent/llm.js";
import type { AgentConfig } from "./agent/loop.js";
import { createMemoryTools } from "./agent/memory-tools.js";
import { createSqliteMemory } from "./agent/memory.js";
import { openStore, type Store } from "./agent/store.js";
import { createPipelines, createSpecialistTools, parseAgentsConfig, type AgentsConfig, type Pipelines, type SpecialistFactory } from "./agent/sub-agents.js";
import { configurationError } from "./agent/errors.js";
import { contextWindowOf, createTokenCounter, encodingForModel } from "./agent/tokens.js";
import { createTraceRecorder } from "./agent/trace.js";
import type { ChatModel } from "./agent/types.js";
import { assertModelConfigured, type GlassboxConfig } from "./config.js";
import type { Logger } from "./logger.js";
import { createBuiltinTools } from "./tools/builtin/index.js";
import { loadToolModules } from "./tools/load-modules.js";
import { connectMcpServers, type McpServers } from "./tools/mcp.js";
import { createToolRegistry, type ToolRegistry } from "./tools/registry.js";
import { createToolSelector } from "./tools/selection.js";
import { learnAtRunEnd, readUsageHistory } from "./tools/usage-history.js";
import { createUsageLearning } from "./tools/usage-learning.js";
import type { AnyTool, ApprovalGate } from "./tools/types.js";

/** The built-in tools (with memory tools when there is a store), plus those of GLASSBOX_TOOLS, any extra modules and connected MCP servers. */
export async function loadRegistry(config: GlassboxConfig, extraModules: string[] = [], store?: Store, mcpTools: AnyTool[] = []): Promise<ToolRegistry> {
  const extra = await loadToolModules([...config.toolModules, ...extraModules]);
  const memoryTools: AnyTool[] = store ? createMemoryTools(store) : [];
  return createToolRegistry([...createBuiltinTools({ shopDatabasePath: config.shopDatabasePath }), ...memoryTools, ...extra, ...mcpTools]);
}

export function createModel(config: GlassboxConfig, log: Logger): ChatModel {
  assertModelConfigured(config);
  return createOpenAIModel({ ...config.model, warn: (message) => log.warn(message) });
}

/** The main agent as the entry points use it: its configuration plus what they must manage. */
export interface GlassboxAgent extends AgentConfig {
  store: Store;
  mcp: McpServers;
  agents: AgentsConfig;
  specialists: SpecialistFactory;
  pipelines: Pipelines;
  close(): Promise<void>;
}

function readAgentsFile(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (error) {
    throw configurationError(`GLASSBOX_AGENTS names ${path}, which cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}); point it at your agents JSON file.`);
  }
}

/**
 * The agent with SQLite memory (messages committed as they come, context within the token budget) and traces.
 * `mcp` holds the connections to GLASSBOX_MCP_SERVERS: call `agent.mcp.close()` on shutdown.
 */
export async function createAgentConfig(
  config: GlassboxConfig,
  log: Logger,
  options: { toolModules?: string[]; approve?: ApprovalGate; maxSteps?: number; store?: Store } = {},
): Promise<GlassboxAgent> {
  const model = createModel(config, log);
  const store = options.store ?? openStore(config.databasePath, { checkpointInBackground: true });
  const counter = await createTokenCounter(config.encoding ?? encodingForModel(config.model.model));
  const window = contextWindowOf(config.model.model);
  const memory = createSqliteMemory({
    store,
    model,
    counter,
    budgetTokens: Math.min(config.contextTokens, window ?? Number.POSITIVE_INFINITY),
    log: log.child({ component: "memory" }),
  });
  // MCP servers: one unreachable at startup is logged and left out; a registry that fails closes them.
  const mcp = await connectMcpServers(config.mcpServers, { log: log.child({ component: "mcp" }) });
  const baseTools = await loadRegistry(config, options.toolModules, store, mcp.tools).catch(async (error: unknown) => {
    await mcp.close();
    throw error;
  });
  // Specialist agents (GLASSBOX_AGENTS) join as tools of the main agent, which supervises them.
  const agents = config.agentsFile ? parseAgentsConfig(readAgentsFile(config.agentsFile), baseTools.names()) : { agents: [], pipelines: {} };
  const specialists: SpecialistFactory = {
    get base() {
      return agent;
    },
    modelNamed: (name) => createOpenAIModel({ ...config.model, model: name, warn: (message) => log.warn(message) }),
  };
  const allTools = agents.agents.length
    ? createToolRegistry([...baseTools.list().map((tool) => tool.definition), ...createSpecialistTools(agents.agents, () => specialists)])
    : baseTools;
  // Past GLASSBOX_TOOL_SELECTION_THRESHOLD tools, each call is sent only the relevant ones (and list_tools).
  // It also learns which tools past runs used for which words: the latest runs now, each new one as it ends.
  const usage = createUsageLearning();
  const selector = createToolSelector(allTools, { threshold: config.toolSelectionThreshold, usage });
  if (selector.active) for (const example of readUsageHistory(store.db)) usage.learn(example);
  const tools = selector.tools;
  const trace = createTraceRecorder(store, { prices: config.prices, estimateTokens: memory.estimate, log });
  const agent: GlassboxAgent = {
    model,
    tools,
    ...(selector.active ? { selectTools: selector.selectForRun } : {}),
    memory,
    trace: selector.active ? learnAtRunEnd(trace, store.db, usage) : trace,
    store,
    systemPrompt: config.systemPrompt,
    maxSteps: options.maxSteps ?? config.maxSteps,
    approve: options.approve,
    toolTimeoutMs: config.toolTimeoutMs,
    maxResultChars: config.maxResultChars,
    mcp,
    agents,
    specialists,
    pipelines: createPipelines(agents, () => specialists),
    /** Ends the MCP server connections (a stdio server keeps the process alive) and closes the store. */
    async close() {
      await mcp.close();
      store.close();
    },
  };
  return agent;
}
