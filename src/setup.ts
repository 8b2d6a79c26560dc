/** Builds the engine's parts from configuration; every entry point (CLI, chat adapters) uses these. */
import { readFileSync } from "node:fs";
import { createOpenAIModel } from "./agent/llm/index.js";
import type { AgentConfig } from "./agent/loop.js";
import { createMemoryTools } from "./agent/memory-tools.js";
import { createScheduleTools } from "./conversations/schedule-tools.js";
import { createMemory } from "./agent/memory.js";
import {
  createPipelines,
  createSpecialistTools,
  parseAgentsConfig,
  type AgentsConfig,
  type Pipelines,
  type SpecialistFactory,
} from "./agent/sub-agents.js";
import { configurationError } from "./agent/errors.js";
import { contextWindowOf, createTokenCounter, encodingForModel } from "./agent/tokens.js";
import { createRunSlots } from "./agent/run-slots.js";
import { createSpendingGuard, withSpendingGuard } from "./agent/quota.js";
import { otelExportFromEnv, withOtelExport } from "./agent/otel-export.js";
import { createTraceRecorder } from "./agent/trace.js";
import type { ChatModel } from "./agent/types.js";
import type { FactStore, StorePort } from "./store/port.js";
import { openSqlitePort } from "./store/sqlite.js";
import { assertModelConfigured, type GlassboxConfig } from "./config.js";
import type { Logger } from "./logger.js";
import { approvalOf } from "./tools/approval-rule.js";
import { createBuiltinTools, createDemoShopTools } from "./tools/builtin/index.js";
import { loadToolModules } from "./tools/load-modules.js";
import { connectMcpServers, type McpServers } from "./tools/mcp.js";
import { createToolRegistry, ToolDefinitionError, type ToolRegistry } from "./tools/registry.js";
import { createToolSelector } from "./tools/selection.js";
import {
  assembleTools,
  describeSource,
  type AssembledTools,
  type ToolGroup,
  type ToolSource,
} from "./tools/tool-sources.js";
import { learnAtRunEnd } from "./tools/learn-at-run-end.js";
import { createUsageLearning } from "./tools/usage-learning.js";
import type { AnyTool, ApprovalGate } from "./tools/types.js";

export interface DeploymentTools extends AssembledTools {
  registry: ToolRegistry;
}

/**
 * The deployment's tools, each with where it came from: the built-ins GLASSBOX_BUILTIN_TOOLS keeps
 * (memory's need a store), the demo shop only in the demo, then what the owner configured: the
 * modules of GLASSBOX_TOOLS and `toolModules`, connected MCP servers' tools, and the specialists
 * `specialists` makes (given the other tools' names). A configured tool replaces a built-in of its name.
 */
export async function loadTools(
  config: GlassboxConfig,
  options: {
    toolModules?: string[];
    facts?: Pick<FactStore, "addFact" | "forgetFact">;
    /** Where schedules are kept (the store port), for the schedules tools. */
    schedules?: Parameters<typeof createScheduleTools>[0];
    mcpTools?: AnyTool[];
    specialists?: (toolNames: string[]) => AnyTool[];
  } = {},
): Promise<DeploymentTools> {
  const builtins = config.builtinTools.filter((name) => name !== "memory" && name !== "schedules");
  const groups: ToolGroup[] = [
    {
      source: { kind: "builtin" },
      tools: [
        ...createBuiltinTools({ include: builtins }),
        ...(options.facts && config.builtinTools.includes("memory")
          ? createMemoryTools(options.facts, {
              approvers: { slack: config.slack?.approvers ?? [], discord: config.discord?.approvers ?? [] },
            })
          : []),
        ...(options.schedules && config.builtinTools.includes("schedules")
          ? createScheduleTools(options.schedules)
          : []),
      ],
    },
    ...(config.demo
      ? [
          {
            source: { kind: "demo" } as const,
            tools: createDemoShopTools({ shopDatabasePath: config.shopDatabasePath }),
          },
        ]
      : []),
    ...(await loadToolModules([...config.toolModules, ...(options.toolModules ?? [])])),
    ...mcpGroups(config, options.mcpTools ?? []),
  ];
  const base = assembleTools(groups);
  const specialists = options.specialists?.([...base.sources.keys()]) ?? [];
  const assembled = specialists.length
    ? assembleTools([...groups, { source: { kind: "specialist" }, tools: specialists }])
    : base;
  return { ...assembled, registry: registryOf(assembled) };
}

/** The registry of a deployment's tools; a bad definition's error also names the module or server it came from. */
function registryOf(assembled: AssembledTools): ToolRegistry {
  try {
    return createToolRegistry(assembled.tools);
  } catch (error) {
    const name = error instanceof ToolDefinitionError ? error.toolName : undefined;
    const source = name === undefined ? undefined : assembled.sources.get(name);
    if (!source || source.kind === "builtin" || source.kind === "demo") throw error;
    throw new ToolDefinitionError(
      (error as Error).message.replace(`Tool '${name}'`, `Tool '${name}' (${describeSource(source)})`),
      name,
    );
  }
}

/** MCP tools are named `<server>__<tool>`: each group is one server's. */
function mcpGroups(config: GlassboxConfig, tools: AnyTool[]): ToolGroup[] {
  return Object.keys(config.mcpServers).map((server) => ({
    source: { kind: "mcp", server },
    tools: tools.filter((tool) => tool.name.startsWith(`${server}__`)),
  }));
}

/** What `glassbox tools` lists: every tool the agent would have, and where each comes from. Runs nothing. */
export async function describeTools(config: GlassboxConfig, log: Logger, toolModules: string[] = []) {
  const mcp = await connectMcpServers(config.mcpServers, { log: log.child({ component: "mcp" }) });
  // Memory's tools are listed as the agent has them, without touching the configured database.
  const store = openSqlitePort(":memory:");
  try {
    const notRun: SpecialistFactory = {
      get base(): AgentConfig {
        throw new Error("glassbox tools only lists the specialists");
      },
      modelNamed: () => createModel(config, log),
    };
    const specialists = (toolNames: string[]) =>
      config.agentsFile
        ? createSpecialistTools(parseAgentsConfig(readAgentsFile(config.agentsFile), toolNames).agents, () => notRun)
        : [];
    const loaded = await loadTools(config, {
      toolModules,
      facts: store,
      schedules: store,
      mcpTools: mcp.tools,
      specialists,
    });
    return loaded.registry.list().map(({ definition }) => {
      const source = loaded.sources.get(definition.name);
      return {
        name: definition.name,
        description: definition.description,
        dangerous: approvalOf(definition) !== "never",
        approval: approvalOf(definition),
        // Who decides, where the tool says it (a channel's settings may say otherwise there).
        ...(definition.dangerous && definition.approvers ? { approvers: definition.approvers } : {}),
        ...(definition.dangerous && (definition.approvalsNeeded ?? 1) > 1
          ? { approvalsNeeded: definition.approvalsNeeded }
          : {}),
        ...(definition.dangerous && definition.requesterMayApprove === false ? { requesterMayApprove: false } : {}),
        ...(definition.dangerous && definition.requesterConfirms ? { requesterConfirms: true } : {}),
        from: source ? describeSource(source) : "unknown",
        source,
        parameters: definition.parameters,
      };
    });
  } finally {
    await mcp.close();
    await store.close();
  }
}

export function createModel(config: GlassboxConfig, log: Logger): ChatModel {
  assertModelConfigured(config);
  return createOpenAIModel({ ...config.model, warn: (message) => log.warn(message) });
}

/** The main agent as the entry points use it: its configuration plus what they must manage. */
export interface GlassboxAgent extends AgentConfig {
  /** What everything of the agent reads and writes through: the SQLite file's port (GLASSBOX_DB), or the one given. */
  port: StorePort;
  mcp: McpServers;
  /** Where each tool came from (built-in, demo shop, module, MCP server, specialist). */
  toolSources: Map<string, ToolSource>;
  agents: AgentsConfig;
  specialists: SpecialistFactory;
  pipelines: Pipelines;
  close(): Promise<void>;
}

function readAgentsFile(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (error) {
    throw configurationError(
      `GLASSBOX_AGENTS names ${path}, which cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}); point it at your agents JSON file.`,
    );
  }
}

export interface AgentOptions {
  toolModules?: string[];
  approve?: ApprovalGate;
  maxSteps?: number;
  /**
   * A store port already open (SQLite's or PostgreSQL's): everything of the agent goes through it, no
   * file is opened, and close() leaves it open. Without it, the agent opens GLASSBOX_DB and closes it.
   */
  port?: StorePort;
}

/**
 * The agent with memory (messages committed as they come, context within the token budget) and traces,
 * on SQLite or on the store port given. `mcp` holds the connections to GLASSBOX_MCP_SERVERS: call `agent.close()` on shutdown.
 */
export async function createAgentConfig(
  config: GlassboxConfig,
  log: Logger,
  options: AgentOptions = {},
): Promise<GlassboxAgent> {
  // Memory, the trace, quotas, memory's tools and the adapters write through the store port; one
  // opened here is a long-running bot's (its WAL checkpointed from a thread of its own).
  const owned = options.port ? undefined : openSqlitePort(config.databasePath, { longRunning: true });
  const port = options.port ?? (owned as StorePort);
  const counter = await createTokenCounter(config.encoding ?? encodingForModel(config.model.model));
  // With daily caps, every model call of a user is checked against what they spent and reserved.
  const { tokens, cost } = config.dailyLimits;
  const guard =
    tokens !== undefined || cost !== undefined
      ? createSpendingGuard(port, config.dailyLimits, config.prices, {
          callTimeoutMs: config.model.timeoutMs,
          ...(config.model.maxOutputTokens !== undefined ? { maxOutputTokens: config.model.maxOutputTokens } : {}),
        })
      : undefined;
  const capped = (chat: ChatModel) => (guard ? withSpendingGuard(chat, guard, counter) : chat);
  const model = capped(createModel(config, log));
  const window = contextWindowOf(config.model.model);
  const memory = createMemory({
    store: port,
    model,
    counter,
    budgetTokens: Math.min(config.contextTokens, window ?? Number.POSITIVE_INFINITY),
    log: log.child({ component: "memory" }),
    prices: config.prices,
  });
  // MCP servers: one unreachable at startup is logged and left out; a registry that fails closes them.
  const mcp = await connectMcpServers(config.mcpServers, { log: log.child({ component: "mcp" }) });
  const specialists: SpecialistFactory = {
    get base() {
      return agent;
    },
    modelNamed: (name) =>
      capped(createOpenAIModel({ ...config.model, model: name, warn: (message) => log.warn(message) })),
  };
  // Specialist agents (GLASSBOX_AGENTS) join as tools of the main agent, which supervises them.
  let agents: AgentsConfig = { agents: [], pipelines: {} };
  const specialistTools = (toolNames: string[]) => {
    if (config.agentsFile) agents = parseAgentsConfig(readAgentsFile(config.agentsFile), toolNames);
    return createSpecialistTools(agents.agents, () => specialists);
  };
  const loaded = await loadTools(config, {
    toolModules: options.toolModules,
    facts: port,
    schedules: port,
    mcpTools: mcp.tools,
    specialists: specialistTools,
  }).catch(async (error: unknown) => {
    await mcp.close();
    throw error;
  });
  for (const { name, by } of loaded.replaced)
    log.info({ tool: name, source: describeSource(by) }, "a configured tool replaces the built-in of the same name");
  const allTools = loaded.registry;
  // Past GLASSBOX_TOOL_SELECTION_THRESHOLD tools, each call is sent only the relevant ones (and list_tools).
  // It also learns which tools past runs used for which words: the latest runs now, each new one as it ends.
  const usage = createUsageLearning();
  const selector = createToolSelector(allTools, { threshold: config.toolSelectionThreshold, usage });
  if (selector.active) for (const example of await port.usageHistory()) usage.learn(example);
  const tools = selector.tools;
  const recorder = createTraceRecorder(port, { prices: config.prices, estimateTokens: memory.estimate, log });
  const learning: typeof recorder = selector.active ? learnAtRunEnd(recorder, port, usage) : recorder;
  // With OTEL_EXPORTER_OTLP_ENDPOINT, every run (specialists' too: they share this recorder) is also exported.
  const otel = otelExportFromEnv(process.env, config.model.model);
  const trace = otel ? (withOtelExport({ trace: learning }, otel).trace ?? learning) : learning;
  const agent: GlassboxAgent = {
    model,
    tools,
    ...(selector.active ? { selectTools: selector.selectForRun } : {}),
    memory,
    trace,
    port,
    systemPrompt: config.systemPrompt,
    maxSteps: options.maxSteps ?? config.maxSteps,
    ...(config.runTimeoutMs !== undefined ? { runTimeoutMs: config.runTimeoutMs } : {}),
    approve: options.approve,
    toolTimeoutMs: config.toolTimeoutMs,
    maxResultChars: config.maxResultChars,
    // One set of slots for every platform of this process.
    runSlots: createRunSlots(config.maxConcurrentRuns),
    mcp,
    toolSources: loaded.sources,
    agents,
    specialists,
    pipelines: createPipelines(agents, () => specialists),
    /** Ends the MCP server connections (a stdio server keeps the process alive) and closes the store. */
    async close() {
      await mcp.close();
      await otel?.shutdown(); // sends the spans still waiting
      await owned?.close(); // a port given is closed by whoever opened it
    },
  };
  return agent;
}
