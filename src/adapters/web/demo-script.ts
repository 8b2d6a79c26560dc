/**
 * The demo's "model": a few readable rules on the scripted model server, so anyone can watch whole
 * runs offline — an order lookup, a cancellation that waits for Approve, an answer made from the
 * tool's result — and the tests drive the playground with exactly what the demo shows.
 */
import type { ChatCompletionRequestBody, ScriptedReply } from "../../testing/scripted-model-server.js";

type SentMessage = ChatCompletionRequestBody["messages"][number];

const ORDER_ID = /\b\d{11}\b/;
// A run of digits, brackets and operators with at least one operator in it: "12*7+3", "(2 + 3) ^ 2".
const ARITHMETIC = /[\d(][\d\s.()+\-*/^%]*[\d)]/g;
export const DEMO_HELLO =
  "Hi! I run on a scripted demo model, so I follow a few simple rules. Try “What is the status of order 20240410003?”, then “Cancel order 20240410003” (that one waits for your Approve).";

/** One reply to one chat request, from what the request contains. */
export function demoReply(request: ChatCompletionRequestBody): ScriptedReply {
  const messages = request.messages;
  if (textOf(messages[0]).includes("running summary")) return { content: summarise(textOf(messages.at(-1))) };

  const last = messages.filter((message) => message.role !== "system").at(-1);
  if (last?.role === "tool") return { content: answerFromResults(messages) };
  if (request.tool_choice === "none") return { content: "Here is where I got to: I looked things up in the demo shop and told you what I found." };

  const input = textOf(last);
  const orderId = ORDER_ID.exec(input)?.[0];
  if (orderId && /\bcancel/i.test(input)) {
    const reason = /\bbecause\b(.+)/i.exec(input)?.[1]?.trim() || "The customer asked in the web playground.";
    return { toolCalls: [{ name: "cancel_order", arguments: JSON.stringify({ order_id: orderId, reason }) }] };
  }
  if (orderId) return { toolCalls: [{ name: "get_order_status", arguments: JSON.stringify({ order_id: orderId }) }] };
  if (/\b(time|date|today)\b/i.test(input)) return { toolCalls: [{ name: "current_time", arguments: "{}" }] };
  const expression = input.match(ARITHMETIC)?.find((candidate) => /\d\s*[-+*/^%]\s*[\d(]/.test(candidate));
  if (expression) return { toolCalls: [{ name: "calculator", arguments: JSON.stringify({ expression: expression.trim() }) }] };
  return { content: DEMO_HELLO };
}

/** An answer from the tool results after the last assistant message, one sentence per call. */
function answerFromResults(messages: SentMessage[]): string {
  const assistantIndex = messages.findLastIndex((message) => message.role === "assistant");
  const calls = new Map<string, string>();
  for (const call of (messages[assistantIndex]?.tool_calls ?? []) as Array<{ id: string; function: { name: string } }>) calls.set(call.id, call.function.name);
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
    return envelope.error?.type === "denied" ? `I did not run ${tool}: ${message.replace(/ Do not retry it; tell the user\.$/, "")}` : `${tool} did not work: ${message}`;
  }
  const data = envelope.data ?? {};
  if (tool === "get_order_status") {
    const items = ((data.items ?? []) as Array<{ name: string; quantity: number }>).map((item) => `${item.quantity} × ${item.name}`).join(", ");
    const tracking = data.trackingNumber ? ` Tracking number: ${String(data.trackingNumber)}.` : "";
    const cancellable = data.canBeCancelled ? " It has not shipped yet, so it can still be cancelled." : "";
    return `Order ${String(data.orderId)} is **${String(data.status)}**: ${items}, ${String(data.total)} in total.${tracking}${cancellable}`;
  }
  if (tool === "cancel_order") return `Done: order ${String(data.orderId)} is now **${String(data.status)}** (reason: ${String(data.cancelReason)}).`;
  if (tool === "current_time") return `It is ${String(data.local)} (${String(data.timezone)}).`;
  if (tool === "calculator") return `${String(data.expression)} = ${String(data.result)}`;
  return `${tool} answered: ${JSON.stringify(data)}`;
}

/** The summariser's request: what the folded part asked about, in a line. */
function summarise(request: string): string {
  const orders = [...new Set(request.match(new RegExp(ORDER_ID.source, "g")) ?? [])];
  return orders.length ? `Earlier, the user asked about order${orders.length > 1 ? "s" : ""} ${orders.join(", ")}, and I looked ${orders.length > 1 ? "them" : "it"} up in the shop.` : "Earlier, the user and I chatted about the demo shop.";
}

function textOf(message: SentMessage | undefined): string {
  const content = message?.content;
  if (typeof content === "string") return content;
  return Array.isArray(content) ? content.map((part) => part.text ?? "").join("") : "";
}
