/**
 * Several agents: specialists defined in configuration (name, description, system prompt, model,
 * tool subset, maxSteps), offered to a supervisor as tools, and pipelines that pass each stage's
 * answer to the next. A specialist's run is traced under the tool call that asked for it, its
 * tokens count toward that run, and its dangerous calls ask the same person.
 */
import { randomUUID } from "node:crypto";
import { isPlainObject } from "../tools/args.js";
import { approvalsAwaited } from "../tools/executor.js";
import type { ToolRegistry } from "../tools/registry.js";
import { ToolPause, type AnyTool, type ApprovalDecision, type ToolContext } from "../tools/types.js";
import { configurationError } from "./errors.js";
import { resumeAgent, runAgent } from "./loop.js";
import type { AgentConfig, PausedRun, RunResult, Task } from "./run.js";
import type { ChatModel } from "./types.js";

export interface AgentDefinition {
  name: string;
  description: string;
  systemPrompt: string;
  /** The model's name on the same server; the main model when absent. */
  model?: string;
  /** The registry's tools this agent may use; all of them when absent. */
  tools?: string[];
  maxSteps?: number;
}

export interface AgentsConfig {
  agents: AgentDefinition[];
  /** Named sequences of agents: each stage's answer is the next stage's input. */
  pipelines: Record<string, string[]>;
}

const NAME = /^[a-zA-Z0-9_-]{1,40}$/;

/** Reads the agents file's JSON; every problem is one sentence naming the agent and the field. */
export function parseAgentsConfig(json: string, toolNames?: string[]): AgentsConfig {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch (error) {
    throw configurationError(`The agents file is not valid JSON (${(error as Error).message}).`);
  }
  if (!isPlainObject(raw))
    throw configurationError('The agents file must hold an object like {"agents": {...}, "pipelines": {...}}.');
  const agents = Object.entries(isPlainObject(raw.agents) ? raw.agents : {}).map(([name, value]): AgentDefinition => {
    const where = `The agent '${name}'`;
    if (!NAME.test(name)) throw configurationError(`${where} needs a name of 1-40 letters, digits, '_' or '-'.`);
    if (!isPlainObject(value))
      throw configurationError(`${where} must be an object with description and systemPrompt.`);
    const text = (field: string, required: boolean) => {
      const found = value[field];
      if (found === undefined && !required) return undefined;
      if (typeof found !== "string" || !found.trim())
        throw configurationError(`${where} needs "${field}" as a non-empty string.`);
      return found;
    };
    const tools = value.tools;
    if (tools !== undefined && !(Array.isArray(tools) && tools.every((tool) => typeof tool === "string")))
      throw configurationError(`${where} has "tools" that is not a list of tool names.`);
    const unknown = toolNames && (tools as string[] | undefined)?.filter((tool) => !toolNames.includes(tool));
    if (unknown?.length) throw configurationError(`${where} names tools that do not exist: ${unknown.join(", ")}.`);
    const maxSteps = value.maxSteps;
    if (maxSteps !== undefined && !(Number.isInteger(maxSteps) && (maxSteps as number) > 0))
      throw configurationError(`${where} has "maxSteps" that is not a whole number above 0.`);
    return {
      name,
      description: text("description", true) as string,
      systemPrompt: text("systemPrompt", true) as string,
      model: text("model", false),
      tools: tools as string[] | undefined,
      maxSteps: maxSteps as number | undefined,
    };
  });
  const names = new Set(agents.map((agent) => agent.name));
  const pipelines = Object.fromEntries(
    Object.entries(isPlainObject(raw.pipelines) ? raw.pipelines : {}).map(([name, stages]) => {
      if (
        !Array.isArray(stages) ||
        stages.length === 0 ||
        !stages.every((stage) => typeof stage === "string" && names.has(stage))
      ) {
        throw configurationError(
          `The pipeline '${name}' must be a list of defined agents (defined: ${[...names].join(", ") || "none"}).`,
        );
      }
      return [name, stages as string[]];
    }),
  );
  return { agents, pipelines };
}

/** How to build a specialist's agent: its model by name, its tools from the main registry. */
export interface SpecialistFactory {
  base: AgentConfig;
  modelNamed: (name: string) => ChatModel;
}

export function specialistConfig(definition: AgentDefinition, factory: SpecialistFactory): AgentConfig {
  const { base } = factory;
  return {
    ...base,
    model: definition.model ? factory.modelNamed(definition.model) : base.model,
    tools: definition.tools ? base.tools.subset(definition.tools) : withoutSpecialists(base.tools),
    systemPrompt: definition.systemPrompt,
    maxSteps: definition.maxSteps ?? base.maxSteps,
    // A specialist works on one task with a fresh context; its steps are traced, not remembered.
    memory: undefined,
  };
}

/** Each specialist as a tool a supervisor can call with one self-contained task. */
export function createSpecialistTools(definitions: AgentDefinition[], factory: () => SpecialistFactory): AnyTool[] {
  return definitions.map((definition) => ({
    name: `agent_${definition.name}`,
    description: `Hand a task to the ${definition.name} agent: ${definition.description} Give it one self-contained task; it answers with its result.`,
    parameters: {
      type: "object",
      properties: {
        task: { type: "string", minLength: 1, description: "The whole task, with every detail it needs." },
      },
      required: ["task"],
      additionalProperties: false,
    },
    timeoutMs: 300_000, // a specialist runs a whole loop of its own
    handler: async ({ task }: { task: string }, context: ToolContext) => {
      const config = configFor(definition, factory(), context);
      const parent = { runId: context.runId, toolCallId: context.toolCallId };
      return outcomeOf(
        await runAgent(config, {
          input: task,
          sessionId: context.sessionId,
          userId: context.userId,
          signal: context.signal,
          parent,
        }),
        context,
      );
    },
    // After people decided on the specialist's calls (maybe after a restart): its run goes on.
    resume: async (state: unknown, decisions: Record<string, ApprovalDecision>, context: ToolContext) => {
      const { paused } = state as SpecialistPause;
      return outcomeOf(
        await resumeAgent(configFor(definition, factory(), context), paused, decisions, { signal: context.signal }),
        context,
      );
    },
  }));
}

/** What a specialist's paused call keeps in its parent's stored run. */
interface SpecialistPause {
  paused: PausedRun;
}

function configFor(definition: AgentDefinition, factory: SpecialistFactory, context: ToolContext): AgentConfig {
  return { ...specialistConfig(definition, factory), approve: context.approve ?? factory.base.approve };
}

/**
 * The specialist's run as its tool's result. A run waiting for people pauses the call, so the
 * parent run stops too and both continue, durably, once they decide. Tokens count once it ends.
 */
function outcomeOf(result: RunResult, context: ToolContext): unknown {
  if (result.stopReason === "awaiting_approval" && result.paused) {
    return new ToolPause(approvalsAwaited(result.paused.pending), { paused: result.paused } satisfies SpecialistPause);
  }
  context.reportUsage?.(result.usage);
  if (result.stopReason === "error") throw new Error(result.output);
  return { answer: result.output, stopReason: result.stopReason };
}

/** Runs a pipeline's stages in order; a stage that does not end with an answer stops it there. */
export async function runPipeline(
  name: string,
  stages: AgentDefinition[],
  factory: SpecialistFactory,
  input: string,
  task: PipelineTask,
): Promise<{ output: string; stages: Array<{ agent: string; result: RunResult }> }> {
  const done: Array<{ agent: string; result: RunResult }> = [];
  let text = input;
  // The first stage is the run the caller named (an HTTP API run accepted under that id); each later
  // stage is a run of its own, linked to the first, so the trace and the API show them as one. The
  // person's files go with their request, to the first stage; later stages read its answer.
  const { runId = `run_${randomUUID()}`, attachments, ...shared } = task;
  for (const [index, stage] of stages.entries()) {
    const pipeline = { name, runId, stage: index + 1, stages: stages.length };
    const first = index === 0 ? { runId, ...(attachments?.length ? { attachments } : {}) } : {};
    const result = await runAgent(specialistConfig(stage, factory), { ...shared, ...first, pipeline, input: text });
    done.push({ agent: stage.name, result });
    if (result.stopReason !== "final" && result.stopReason !== "max_steps") {
      return {
        output: `The pipeline stopped at '${stage.name}' (${result.stopReason}): ${result.output}`,
        stages: done,
      };
    }
    text = result.output;
  }
  return { output: text, stages: done };
}

function withoutSpecialists(tools: ToolRegistry): ToolRegistry {
  // A specialist does not hand work on to other specialists: no loops of agents calling agents.
  return tools.subset(tools.names().filter((name) => !name.startsWith("agent_")));
}

/** What a pipeline's run is given beside its input; the attachments go to its first stage. */
export type PipelineTask = Pick<Task, "sessionId" | "userId" | "signal" | "onEvent" | "runId" | "attachments">;

export interface Pipelines {
  names(): string[];
  /** Undefined when there is no pipeline of that name. */
  run(name: string, input: string, task: PipelineTask): Promise<Awaited<ReturnType<typeof runPipeline>> | undefined>;
}

export function createPipelines(config: AgentsConfig, factory: () => SpecialistFactory): Pipelines {
  const byName = new Map(config.agents.map((agent) => [agent.name, agent]));
  return {
    names: () => Object.keys(config.pipelines),
    async run(name, input, task) {
      const stages = config.pipelines[name]?.map((stage) => byName.get(stage) as AgentDefinition);
      return stages ? runPipeline(name, stages, factory(), input, task) : undefined;
    },
  };
}
