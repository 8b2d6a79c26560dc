/**
 * The demo's "model": a few readable rules on the scripted model server, so anyone can watch whole
 * runs offline — an order lookup, a cancellation that waits for Approve, an answer made from the
 * tool's result — and the tests drive the playground with exactly what the demo shows. It only
 * calls tools the request offers, so the command line can be pointed at it too, and a tool of the
 * person's own (GLASSBOX_TOOLS) runs when a message names it: "check_stock apple", "restock fruit=pear units=5".
 */
import type { ChatCompletionRequestBody, ScriptedReply, ScriptedToolCall } from "./testing/scripted-model-server.js";
import { exampleArguments } from "./tools/example-arguments.js";

type SentMessage = ChatCompletionRequestBody["messages"][number];
interface OfferedTool {
  name: string;
  parameters: Record<string, unknown>;
}

const ORDER_ID = /\b\d{11}\b/;
// A run of digits, brackets and operators with at least one operator in it: "12*7+3", "(2 + 3) ^ 2".
const ARITHMETIC = /[\d(][\d\s.()+\-*/^%]*[\d)]/g;
// The tools the rules below know; any other offered tool is the person's own.
const KNOWN_TOOLS = new Set([
  "get_order_status",
  "cancel_order",
  "send_message",
  "current_time",
  "calculator",
  "remember",
  "forget",
  "list_tools",
  // Built in, and left to real models: the rules below never make a schedule.
  "schedule_run",
  "list_schedules",
  "pause_schedule",
  "delete_schedule",
]);
export const DEMO_HELLO =
  "Hi! I run on a scripted demo model, so I follow a few simple rules. Try “What is the status of order 20240410003?”, then “Cancel order 20240410003” (that one waits for your Approve).";

/** One reply to one chat request, from what the request contains. */
export function demoReply(request: ChatCompletionRequestBody): ScriptedReply {
  const messages = request.messages;
  if (textOf(messages[0]).includes("running summary")) return { content: summarise(textOf(messages.at(-1))) };

  const last = messages.filter((message) => message.role !== "system").at(-1);
  if (last?.role === "tool") return { content: answerFromResults(messages) };
  if (request.tool_choice === "none")
    return { content: "Here is where I got to: I ran the tools I was asked for and told you what they gave." };

  const input = textOf(last);
  const offered = offeredTools(request);
  const call = callOfOwnTool(input, offered) ?? callOfKnownTool(input, offered);
  return call ? { toolCalls: [call] } : { content: hello(offered) };
}

/** A tool of the person's own that the message names, with the arguments its words and the schema give. */
function callOfOwnTool(input: string, offered: Map<string, OfferedTool>): ScriptedToolCall | undefined {
  const own = [...offered.values()]
    .filter((tool) => !KNOWN_TOOLS.has(tool.name))
    .sort((a, b) => b.name.length - a.name.length);
  for (const tool of own) {
    const named = new RegExp(`(?<![\\w-])${tool.name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}(?![\\w-])`, "i").exec(
      input,
    );
    if (named)
      return {
        name: tool.name,
        arguments: JSON.stringify(exampleArguments(tool.parameters, input.slice(named.index + named[0].length))),
      };
  }
  return undefined;
}

/** The demo shop's and the built-ins' rules, each only when its tool is offered. */
function callOfKnownTool(input: string, offered: Map<string, OfferedTool>): ScriptedToolCall | undefined {
  const orderId = ORDER_ID.exec(input)?.[0];
  if (orderId && /\bcancel/i.test(input) && offered.has("cancel_order")) {
    const reason = /\bbecause\b(.+)/i.exec(input)?.[1]?.trim() || "The customer asked in the web playground.";
    return { name: "cancel_order", arguments: JSON.stringify({ order_id: orderId, reason }) };
  }
  if (orderId && offered.has("get_order_status"))
    return { name: "get_order_status", arguments: JSON.stringify({ order_id: orderId }) };
  if (/\b(time|date|today)\b/i.test(input) && offered.has("current_time"))
    return { name: "current_time", arguments: "{}" };
  const expression = input.match(ARITHMETIC)?.find((candidate) => /\d\s*[-+*/^%]\s*[\d(]/.test(candidate));
  if (expression && offered.has("calculator"))
    return { name: "calculator", arguments: JSON.stringify({ expression: expression.trim() }) };
  return undefined;
}

/** What the hello suggests: the person's own tools first, then the shop's, then the built-ins'. */
function hello(offered: Map<string, OfferedTool>): string {
  const own = [...offered.keys()].filter((name) => !KNOWN_TOOLS.has(name));
  if (own.length > 0) {
    const also = offered.has("get_order_status")
      ? " The demo shop is here too: “What is the status of order 20240410003?”."
      : "";
    return `Hi! I run on a scripted demo model, so I follow a few simple rules. Name one of your tools (${own.slice(0, 5).join(", ")}) to try it, with arguments as key=value if you like: “${own[0]} …”.${also}`;
  }
  if (offered.has("get_order_status")) return DEMO_HELLO;
  const builtins = [
    offered.has("current_time") && "“What time is it?”",
    offered.has("calculator") && "“What is 12*7+3?”",
  ].filter(Boolean);
  return `Hi! I run on a scripted demo model, so I follow a few simple rules${builtins.length ? `. Try ${builtins.join(" or ")}` : ": I can only call tools, and none were offered"}.`;
}

/** The tools the request offers, by name. A request without `tools` (the text protocol) offers the ones the rules know. */
function offeredTools(request: ChatCompletionRequestBody): Map<string, OfferedTool> {
  if (!Array.isArray(request.tools)) return new Map([...KNOWN_TOOLS].map((name) => [name, { name, parameters: {} }]));
  const offered = new Map<string, OfferedTool>();
  for (const spec of request.tools as Array<{ function?: { name?: unknown; parameters?: unknown } }>) {
    const name = spec.function?.name;
    const parameters = spec.function?.parameters;
    if (typeof name === "string")
      offered.set(name, {
        name,
        parameters:
          typeof parameters === "object" && parameters !== null ? (parameters as Record<string, unknown>) : {},
      });
  }
  return offered;
}

/** An answer from the tool results after the last assistant message, one sentence per call. */
function answerFromResults(messages: SentMessage[]): string {
  const assistantIndex = messages.findLastIndex((message) => message.role === "assistant");
  const calls = new Map<string, string>();
  for (const call of (messages[assistantIndex]?.tool_calls ?? []) as Array<{ id: string; function: { name: string } }>)
    calls.set(call.id, call.function.name);
  const sentences = messages
    .slice(assistantIndex + 1)
    .filter((message) => message.role === "tool")
    .map((message) => describeResult(calls.get(message.tool_call_id ?? "") ?? "the tool", textOf(message)));
  return sentences.join("\n\n") || "I have nothing to add.";
}

function describeResult(tool: string, content: string): string {
  let envelope: { status?: string; data?: Record<string, unknown>; error?: { type?: string; message?: string } };
  try {
    envelope = JSON.parse(content) as typeof envelope;
  } catch {
    return `${tool} answered, but its result was cut short.`;
  }
  if (envelope.status !== "success") {
    const message = envelope.error?.message ?? "it failed";
    if (envelope.error?.type !== "denied") return `${tool} did not work: ${message}`;
    // The executor's words are for a model ("A person did not approve this call (why); it was not run.
    // Do not retry it; ..."); a person reads one sentence.
    const notApproved = /^A person did not approve this call( \(.*\))?; it was not run\./.exec(message);
    return notApproved
      ? `I did not run ${tool}, because a person did not approve it${notApproved[1] ?? ""}.`
      : `I did not run ${tool}: ${message.replace(/ Do not retry it; tell the user\.$/, "")}`;
  }
  const data = envelope.data ?? {};
  if (tool === "get_order_status") {
    const items = ((data.items ?? []) as Array<{ name: string; quantity: number }>)
      .map((item) => `${item.quantity} × ${item.name}`)
      .join(", ");
    const tracking = data.trackingNumber ? ` Tracking number: ${String(data.trackingNumber)}.` : "";
    const cancellable = data.canBeCancelled ? " It has not shipped yet, so it can still be cancelled." : "";
    return `Order ${String(data.orderId)} is **${String(data.status)}**: ${items}, ${String(data.total)} in total.${tracking}${cancellable}`;
  }
  if (tool === "cancel_order")
    return `Done: order ${String(data.orderId)} is now **${String(data.status)}** (reason: ${String(data.cancelReason)}).`;
  if (tool === "current_time") return `It is ${String(data.local)} (${String(data.timezone)}).`;
  if (tool === "calculator") return `${String(data.expression)} = ${String(data.result)}`;
  return `${tool} answered: ${JSON.stringify(data)}`;
}

/** The summariser's request: what the folded part asked about, in a line. */
function summarise(request: string): string {
  const orders = [...new Set(request.match(new RegExp(ORDER_ID.source, "g")) ?? [])];
  return orders.length
    ? `Earlier, the user asked about order${orders.length > 1 ? "s" : ""} ${orders.join(", ")}, and I looked ${orders.length > 1 ? "them" : "it"} up in the shop.`
    : "Earlier, the user and I chatted about the demo shop.";
}

function textOf(message: SentMessage | undefined): string {
  const content = message?.content;
  if (typeof content === "string") return content;
  return Array.isArray(content) ? content.map((part) => part.text ?? "").join("") : "";
}
