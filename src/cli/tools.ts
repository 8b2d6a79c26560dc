/** `glassbox tools`: every tool the model can call, where each comes from and what it takes. Runs none. */
import { count } from "../adapters/terminal/table.js";
import { styleFor, type Style } from "../adapters/terminal/style.js";
import { loadConfig } from "../config.js";
import { describeTools } from "../setup.js";
import { createToolRegistry } from "../tools/registry.js";
import { createToolSelector } from "../tools/selection.js";
import { terminalView } from "../adapters/terminal.js";
import type { CommandInput } from "./command.js";
import { createCliLogger } from "./logging.js";

type ListedTool =
  | Awaited<ReturnType<typeof describeTools>>[number]
  | (Omit<Awaited<ReturnType<typeof describeTools>>[number], "source"> & { source: { kind: "selection" } });

export default async function tools({ options }: CommandInput): Promise<number> {
  const config = loadConfig();
  const listed = withListTools(
    await describeTools(config, createCliLogger(terminalView(process.stdout, process.stderr)), options.tools),
    config.toolSelectionThreshold,
  );
  if (options.json) process.stdout.write(`${JSON.stringify(listed, null, 2)}\n`);
  else process.stdout.write(`${formatTools(listed, styleFor(process.stdout), config.toolSelectionThreshold)}\n`);
  return 0;
}

/**
 * Past the selection threshold the model is also sent list_tools, which finds the others: it is
 * listed too, as the selector makes it (the tools are only described here, never called).
 */
function withListTools(listed: Awaited<ReturnType<typeof describeTools>>, threshold: number): ListedTool[] {
  if (listed.length <= threshold) return listed;
  const notCalled = () => undefined;
  const selector = createToolSelector(
    createToolRegistry(
      listed.map(({ name, description, parameters }) => ({
        name,
        description,
        parameters,
        handler: notCalled,
      })),
    ),
    { threshold },
  );
  const added = selector.tools.list().filter(({ definition }) => !listed.some((tool) => tool.name === definition.name));
  return [
    ...listed,
    ...added.map(({ definition }) => ({
      name: definition.name,
      description: definition.description,
      dangerous: false,
      approval: "never" as const,
      from: "tool selection",
      source: { kind: "selection" as const },
      parameters: definition.parameters,
    })),
  ];
}

const ASKS = { always: "asks for approval", "by arguments": "asks for approval for some arguments", never: "" };

function formatTools(listed: ListedTool[], style: Style, threshold: number): string {
  const width = Math.max(...listed.map((tool) => tool.name.length));
  const blocks = listed.map((tool) =>
    [
      `${style.bold(tool.name.padEnd(width))}  ${tool.from}${ASKS[tool.approval] ? `  ${style.yellow(ASKS[tool.approval])}` : ""}`,
      ...deciders(tool).map((line) => `  ${style.yellow(line)}`),
      `  ${tool.description}`,
      `  ${style.dim(`takes ${parametersOf(tool.parameters)}`)}`,
    ].join("\n"),
  );
  const selected = listed.some((tool) => tool.source?.kind === "selection")
    ? [
        `More than ${threshold} tools (GLASSBOX_TOOL_SELECTION_THRESHOLD): each model call is sent the ones relevant to it, and list_tools, which finds the others.`,
        "",
      ]
    : [];
  const channels = process.env.GLASSBOX_CHANNELS
    ? [
        "",
        `Channel settings (GLASSBOX_CHANNELS) may allow fewer of these, and change who decides, per channel: ask "what can you do here?" there.`,
      ]
    : [];
  return [
    `${count(listed.length, "tool")} the model can call:`,
    "",
    ...selected,
    blocks.join("\n\n"),
    ...channels,
  ].join("\n");
}

/** Who decides a tool's calls, where the tool itself says more than "the requester or an approver". */
function deciders(tool: ListedTool): string[] {
  if (tool.approval === "never") return [];
  const lines: string[] = [];
  if (tool.requesterConfirms) lines.push("the requester confirms it (it is done in their name)");
  if (tool.approvalsNeeded) lines.push(`needs ${tool.approvalsNeeded} approvals from different people`);
  if (tool.requesterMayApprove === false) lines.push("the requester may not approve it");
  if (tool.approvers) lines.push(`approvers: ${tool.approvers.join(", ")}`);
  return lines;
}

/** A schema's top-level properties as "name: type", optional ones marked "?". */
function parametersOf(schema: unknown): string {
  const { properties = {}, required = [] } = (schema ?? {}) as {
    properties?: Record<string, { type?: unknown; enum?: unknown[] }>;
    required?: string[];
  };
  const parts = Object.entries(properties).map(([name, property]) => {
    const type = Array.isArray(property.enum)
      ? property.enum.map((value) => JSON.stringify(value)).join("|")
      : Array.isArray(property.type)
        ? property.type.join("|")
        : String(property.type ?? "any");
    return `${name}${required.includes(name) ? "" : "?"}: ${type}`;
  });
  return parts.length ? parts.join(", ") : "no parameters";
}
