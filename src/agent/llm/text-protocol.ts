/**
 * Tool calling for models without native function calling: the tools are described in the system
 * prompt, the model answers with a JSON decision in its text, and the decision is found (fences,
 * chatter around it), repaired and turned back into ordinary tool calls. The loop never knows.
 */
import { jsonrepair } from "jsonrepair";
import { isPlainObject, outermostObject } from "../../tools/args.js";
import type { Message, ToolCall, ToolSpec } from "../types.js";

export type TextDecision =
  | { kind: "tools"; toolCalls: ToolCall[] }
  | { kind: "answer"; text: string }
  | { kind: "unreadable"; problem: string };

export const REEMIT_REQUEST =
  'Your last reply was not a valid JSON decision. Reply again with only one JSON object: {"tool_calls": [{"name": "...", "arguments": {...}}]} or {"answer": "..."}.';

/** The conversation rewritten so that a model with no `tools` parameter can follow it. */
export function toTextProtocol(messages: Message[], tools: ToolSpec[]): Message[] {
  const rewritten: Message[] = messages.map((message): Message => {
    if (message.role === "assistant" && message.tool_calls?.length) {
      const calls = message.tool_calls.map((call) => ({
        name: call.function.name,
        arguments: safeParse(call.function.arguments),
      }));
      return { role: "assistant", content: JSON.stringify({ tool_calls: calls }) };
    }
    if (message.role === "tool")
      return { role: "user", content: `Result of tool call ${message.tool_call_id}: ${message.content}` };
    return message;
  });
  const instructions = toolInstructions(tools);
  const first = rewritten[0];
  if (first?.role === "system") rewritten[0] = { role: "system", content: `${first.content}\n\n${instructions}` };
  else rewritten.unshift({ role: "system", content: instructions });
  return rewritten;
}

function toolInstructions(tools: ToolSpec[]): string {
  const results = "Tool results come back in messages that start with 'Result of tool call'.";
  // No tools on offer (the stage conclusion): an answer is the only decision left.
  if (tools.length === 0)
    return [
      'Do not call any tools now. Reply with exactly one JSON object and nothing else: {"answer": "<your answer>"}',
      results,
    ].join("\n");
  const list = tools
    .map(
      ({ function: tool }) =>
        `- ${tool.name}: ${tool.description}\n  arguments (JSON Schema): ${JSON.stringify(tool.parameters)}`,
    )
    .join("\n");
  return [
    "You can use these tools:",
    list,
    "",
    "Reply with exactly one JSON object and nothing else:",
    '- to call tools: {"tool_calls": [{"name": "<tool name>", "arguments": {<arguments>}}]}',
    '- to answer the user: {"answer": "<your answer>"}',
    results,
  ].join("\n");
}

/** Reads the model's decision out of its text. `nextId` names the calls it finds. */
export function parseTextDecision(text: string, nextId: () => string): TextDecision {
  const candidate = outermostObject(text);
  if (candidate === undefined) return { kind: "answer", text: text.trim() }; // plain prose is an answer
  let decision: unknown;
  try {
    decision = JSON.parse(jsonrepair(candidate));
  } catch (error) {
    return { kind: "unreadable", problem: (error as Error).message };
  }
  if (isPlainObject(decision) && Array.isArray(decision.tool_calls)) {
    const toolCalls = decision.tool_calls.filter(isPlainObject).map(
      (call): ToolCall => ({
        id: nextId(),
        type: "function",
        function: {
          name: String(call.name ?? ""),
          arguments: typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments ?? {}),
        },
      }),
    );
    if (toolCalls.length > 0) return { kind: "tools", toolCalls };
  }
  if (isPlainObject(decision) && typeof decision.answer === "string") return { kind: "answer", text: decision.answer };
  return { kind: "unreadable", problem: 'expected {"tool_calls": [...]} or {"answer": "..."}' };
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
