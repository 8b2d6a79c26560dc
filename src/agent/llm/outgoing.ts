/**
 * The conversation as it goes to the server: what a server asked to have back goes back the way
 * it wants it (DeepSeek's `reasoning_content` on the tool-calling message, Gemini's
 * `extra_content` on each call, as received), ids in the format the server takes, `{}` for empty
 * arguments. Messages that need none of this are sent as they are, untouched and uncopied.
 */
import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";
import type { Message, ToolCall } from "../types.js";
import type { IdFormat } from "./ids.js";

/** The messages to send; each id sent in another form is put in `renamed` (glassbox's id -> the one sent). */
export function toWireMessages(
  messages: Message[],
  ids: IdFormat,
  renamed: Map<string, string>,
): ChatCompletionMessageParam[] {
  let wire: ChatCompletionMessageParam[] | undefined;
  for (let index = 0; index < messages.length; index++) {
    const message = messages[index] as Message;
    const rewritten = rewrite(message, ids, renamed);
    if (rewritten !== undefined && !wire) wire = messages.slice(0, index) as ChatCompletionMessageParam[];
    wire?.push(rewritten ?? (message as ChatCompletionMessageParam));
  }
  return wire ?? (messages as ChatCompletionMessageParam[]);
}

/** The message as the server must get it, or undefined when it goes as it is. */
function rewrite(
  message: Message,
  ids: IdFormat,
  renamed: Map<string, string>,
): ChatCompletionMessageParam | undefined {
  if (message.role === "tool") {
    if (!ids.constrained) return undefined;
    const id = sentId(message.tool_call_id, ids, renamed);
    return id === message.tool_call_id ? undefined : { ...message, tool_call_id: id };
  }
  if (message.role !== "assistant" || !message.tool_calls?.length) return undefined;
  if (!message.tool_calls.some((call) => needsRewrite(call, ids))) return undefined;
  let reasoning: string | undefined;
  const calls = message.tool_calls.map((call) => {
    const { message_reasoning_content, extra_content, ...plain } = call;
    reasoning ??= message_reasoning_content;
    return {
      ...plain,
      id: sentId(call.id, ids, renamed),
      function: {
        name: call.function.name,
        arguments: call.function.arguments.trim() === "" ? "{}" : call.function.arguments,
      },
      ...(extra_content ? { extra_content } : {}),
    };
  });
  return {
    role: "assistant",
    content: message.content,
    tool_calls: calls,
    ...(reasoning !== undefined ? { reasoning_content: reasoning } : {}),
  } as ChatCompletionMessageParam;
}

function needsRewrite(call: ToolCall, ids: IdFormat): boolean {
  return (
    call.message_reasoning_content !== undefined ||
    call.function.arguments.trim() === "" ||
    (ids.constrained && ids.outgoing(call.id) !== call.id)
  );
}

function sentId(id: string, ids: IdFormat, renamed: Map<string, string>): string {
  const sent = ids.outgoing(id);
  if (sent !== id) renamed.set(id, sent);
  return sent;
}
