/**
 * What a session's channel settings (channel-settings.ts) make of a run: the agent it runs with
 * (the prompt, the tools allowed, who decides dangerous calls) and whether the person may use the
 * bot there at all.
 */
import type { AgentConfig } from "../agent/run.js";
import type { RegisteredTool, ToolRegistry } from "../tools/registry.js";
import type { ChannelLevel } from "./channel-settings.js";

/**
 * The agent as a session's settings make it: their system prompt, only the tools they allow, and
 * their approval policy on each dangerous tool (it replaces what the tool itself says).
 */
export function agentIn(agent: AgentConfig, level: ChannelLevel): AgentConfig {
  const { tools: allowed, systemPrompt, approvers, requesterMayApprove } = level;
  if (
    allowed === undefined &&
    systemPrompt === undefined &&
    approvers === undefined &&
    requesterMayApprove === undefined
  )
    return agent;
  const chosen = allowed
    ? agent.tools.subset(agent.tools.names().filter((name) => toolAllowed(allowed, name)))
    : agent.tools;
  const policy = {
    ...(approvers ? { approvers } : {}),
    ...(requesterMayApprove !== undefined ? { requesterMayApprove } : {}),
  };
  const tools = Object.keys(policy).length > 0 ? withPolicy(chosen, policy) : chosen;
  const select = agent.selectTools;
  return {
    ...agent,
    tools,
    systemPrompt: systemPrompt ?? agent.systemPrompt,
    // The selector knows every tool: what it picks is kept to those allowed here.
    ...(select && allowed
      ? { selectTools: (run) => select(run).filter((spec) => tools.get(spec.function.name) !== undefined) }
      : {}),
  };
}

/**
 * `registry` with `policy` on each dangerous tool's definition, which the executor reads when it asks;
 * a call the requester confirms (done in their name) takes the approvers but stays theirs to confirm.
 */
function withPolicy(
  registry: ToolRegistry,
  policy: Pick<ChannelLevel, "approvers" | "requesterMayApprove">,
): ToolRegistry {
  const { requesterMayApprove: _, ...confirmation } = policy;
  const governed = (tool: RegisteredTool): RegisteredTool =>
    tool.definition.dangerous
      ? {
          ...tool,
          definition: { ...tool.definition, ...(tool.definition.requesterConfirms ? confirmation : policy) },
        }
      : tool;
  return {
    ...registry,
    get: (name) => {
      const tool = registry.get(name);
      return tool && governed(tool);
    },
    list: () => registry.list().map(governed),
    subset: (names) => withPolicy(registry.subset(names), policy),
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
