/**
 * What a session's channel settings (channel-settings.ts) make of a run: the agent it runs with
 * (the prompt, the model, the tools allowed, who decides dangerous calls, and the settings' version
 * it records) and whether the person may use the bot there at all.
 */
import { basename } from "node:path";
import type { AgentConfig } from "../agent/run.js";
import type { ChatModel } from "../agent/types.js";
import type { RegisteredTool, ToolRegistry } from "../tools/registry.js";
import type { ApprovalPolicy } from "../tools/types.js";
import type { ChannelLevel, ChannelSettings } from "./channel-settings.js";

/** Where a level comes from, and how a model named there is reached. */
export interface ChannelSource {
  source: ChannelSettings["source"];
  /** A model of the same server by another name (cached by the caller); without it a level's model is not used. */
  modelNamed?: (name: string) => ChatModel;
}

/** How a run's trace names the settings it used: the file's name and the hash of what it held. */
export const configurationOf = (source: ChannelSettings["source"]) => `${basename(source.path)}@${source.version}`;

/**
 * The agent as a session's settings make it: their system prompt and model, only the tools they
 * allow, their approval policy on each dangerous tool (it replaces what the tool itself says), and
 * the settings' version, which each run records.
 */
export function agentIn(agent: AgentConfig, level: ChannelLevel, from?: ChannelSource): AgentConfig {
  const { tools: allowed, systemPrompt } = level;
  const model = level.model && level.model !== agent.model.name ? from?.modelNamed?.(level.model) : undefined;
  const chosen = allowed
    ? agent.tools.subset(agent.tools.names().filter((name) => toolAllowed(allowed, name)))
    : agent.tools;
  const governs = ["approvers", "requesterMayApprove", "toolApprovers", "twoPersonRule"].some(
    (key) => level[key as keyof ChannelLevel] !== undefined,
  );
  const tools = governs ? withPolicy(chosen, (name) => policyHere(level, name)) : chosen;
  const select = agent.selectTools;
  return {
    ...agent,
    tools,
    systemPrompt: systemPrompt ?? agent.systemPrompt,
    ...(model ? { model } : {}),
    ...(from ? { configuration: configurationOf(from.source) } : {}),
    // The selector knows every tool: what it picks is kept to those allowed here.
    ...(select && allowed
      ? { selectTools: (run) => select(run).filter((spec) => tools.get(spec.function.name) !== undefined) }
      : {}),
  };
}

/** Who decides a call to tool `name` under `level`: its own approvers or the level's, the requester's part, how many approve. */
function policyHere(level: ChannelLevel, name: string): ApprovalPolicy {
  const own = Object.entries(level.toolApprovers ?? {}).find(([pattern]) => toolAllowed([pattern], name))?.[1];
  const approvers = own ?? level.approvers;
  return {
    ...(approvers ? { approvers } : {}),
    ...(level.requesterMayApprove !== undefined ? { requesterMayApprove: level.requesterMayApprove } : {}),
    ...(level.twoPersonRule && toolAllowed(level.twoPersonRule, name) ? { approvalsNeeded: 2 } : {}),
  };
}

/**
 * `registry` with each dangerous tool's policy on its definition, which the executor reads when it
 * asks; a call the requester confirms (done in their name) takes the rest but stays theirs to confirm.
 */
function withPolicy(registry: ToolRegistry, policyOf: (name: string) => ApprovalPolicy): ToolRegistry {
  const governed = (tool: RegisteredTool): RegisteredTool => {
    if (!tool.definition.dangerous) return tool;
    const { requesterMayApprove, ...confirmation } = policyOf(tool.definition.name);
    const policy = tool.definition.requesterConfirms
      ? confirmation
      : { ...confirmation, ...(requesterMayApprove !== undefined ? { requesterMayApprove } : {}) };
    return { ...tool, definition: { ...tool.definition, ...policy } };
  };
  return {
    ...registry,
    get: (name) => {
      const tool = registry.get(name);
      return tool && governed(tool);
    },
    list: () => registry.list().map(governed),
    subset: (names) => withPolicy(registry.subset(names), policyOf),
  };
}

/**
 * Why `userId` may not use the bot under `level`, in a sentence for them; undefined when they may.
 * A user id as runs record it may carry its workspace (`T1:U1`, installed in many): either form matches.
 */
export function refusalHere(level: ChannelLevel, userId: string | undefined): string | undefined {
  if (!level.users) return undefined;
  const person = userId ?? "";
  const plain = person.slice(person.lastIndexOf(":") + 1);
  if (level.users.includes(person) || level.users.includes(plain)) return undefined;
  return "I'm not set up to work for you in this channel; ask whoever runs glassbox here to add you, or ask me where you may.";
}

/** Whether `name` is one of `allowed` (names, or patterns where `*` matches any run of characters). */
export function toolAllowed(allowed: readonly string[], name: string): boolean {
  return allowed.some((pattern) =>
    pattern.includes("*")
      ? new RegExp(`^${pattern.split("*").map(escapeRegExp).join(".*")}$`, "u").test(name)
      : pattern === name,
  );
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
