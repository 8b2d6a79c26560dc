/**
 * A joined reply judged into one ModelResponse: the reasoning out of the answer, tool calls
 * written as text recovered, every call with a name, JSON arguments and an id of its own, the
 * finish reason that matches what came, and a note for the trace for each thing changed.
 */
import { emptyUsage, type ModelExchange, type ModelResponse, type ToolCall } from "../types.js";
import { settleIds } from "./ids.js";
import type { Assembled } from "./stream.js";
import { recoverTextCalls } from "./text-calls.js";
import { splitThinking } from "./think.js";

export interface ReplyContext {
  /** The tools the model may call in this request (none: an answer is all it may give). */
  offeredTools: ReadonlySet<string>;
  /** Whether an id is already in the conversation, where a new call must not reuse it. */
  isTaken: (id: string) => boolean;
}

export interface JudgedReply {
  response: ModelResponse;
  /** The tool calls were written as text: the text held back from the stream stays unshown. */
  fromText: boolean;
  /** The answer began inside a reasoning block the prompt had opened (only its closing tag came). */
  openedInPrompt: boolean;
  /** Reasoning came in a field of its own, or an answer came without any: the server's answers start as answers. */
  plainAnswer: boolean;
  /** The ids the server itself gave its calls (none for calls recovered from text). */
  serverIds: string[];
}

export function judgeReply(assembled: Assembled, context: ReplyContext): JudgedReply {
  const notes = [...assembled.notes];
  const exchanges: ModelExchange[] = []; // what came back and what it was read as, for the repairs below
  const split = splitThinking(assembled.text);
  const tagged = split.reasoning !== "" || split.openedInPrompt;
  if (tagged) notes.push("reasoning written into the answer (think tags) was moved out of it");
  const reasoning = [assembled.reasoning, split.reasoning].filter((text) => text.trim() !== "").join("\n");
  // Servers leave the blank lines that followed the reasoning at the start of the answer.
  let answer = tagged || assembled.reasoning !== "" ? split.answer.replace(/^\s+/, "") : split.answer;

  let calls = assembled.calls.filter((call) => call.name !== "");
  if (calls.length < assembled.calls.length) {
    const dropped = assembled.calls.length - calls.length;
    const note = `dropped ${dropped} tool call${dropped === 1 ? "" : "s"} that came without a name`;
    notes.push(note);
    const nameless = assembled.calls.filter((call) => call.name === "");
    exchanges.push({
      note,
      received: JSON.stringify(nameless.map(({ id, name, arguments: text }) => ({ id, name, arguments: text }))),
    });
  }
  let fromText = false;
  if (calls.length === 0 && context.offeredTools.size > 0) {
    const recovered = recoverTextCalls(answer, context.offeredTools);
    if (recovered) {
      fromText = true;
      calls = recovered.calls.map((call) => ({ id: "", ...call }));
      answer = recovered.text;
      const names = recovered.calls.map((call) => call.name).join(", ");
      const note = `recovered ${recovered.calls.length} tool call${recovered.calls.length === 1 ? "" : "s"} (${names}) that the model wrote as text (${recovered.format}); the server's tool-call parser seems to be off`;
      notes.push(note);
      const readAs = recovered.calls.map(({ name, arguments: text }) => ({ name, arguments: text }));
      exchanges.push({ note, received: assembled.text, readAs: JSON.stringify(readAs) });
    }
  }

  let emptyArguments = false;
  const shaped = calls.map((call): ToolCall => {
    const empty = call.arguments.trim() === "";
    emptyArguments ||= empty;
    return {
      id: call.id,
      type: "function",
      function: { name: call.name, arguments: empty ? "{}" : call.arguments },
      ...("extra_content" in call && call.extra_content ? { extra_content: call.extra_content } : {}),
    };
  });
  if (emptyArguments) notes.push("empty tool-call arguments were read, and are sent back, as {}");
  const toolCalls = settleIds(shaped, context.isTaken, notes);
  // DeepSeek's thinking mode wants a tool-calling message's reasoning_content back, even when empty.
  const first = toolCalls[0];
  if (first && assembled.reasoningContentField)
    toolCalls[0] = { ...first, message_reasoning_content: assembled.reasoning };

  const finishReason = finishReasonOf(assembled.finishReason, toolCalls.length > 0, fromText, notes);
  if (!assembled.usage) notes.push("the server reported no token usage for this reply");
  const response: ModelResponse = {
    content: answer !== "" ? answer : toolCalls.length > 0 ? null : "",
    toolCalls,
    finishReason,
    usage: assembled.usage ?? emptyUsage(),
    model: assembled.model,
    ...(reasoning !== "" ? { reasoning } : {}),
    ...(notes.length > 0 ? { notes } : {}),
    ...(exchanges.length > 0 ? { exchanges } : {}),
  };
  return {
    response,
    fromText,
    openedInPrompt: split.openedInPrompt,
    plainAnswer: assembled.reasoning !== "" || (!split.openedInPrompt && split.answer.trim() !== ""),
    serverIds: fromText ? [] : calls.map((call) => call.id.trim()).filter((id) => id !== "" && id !== "null"),
  };
}

/** Tool calls came, so the reply ends in them, whatever the server said ("stop", or nothing). */
function finishReasonOf(sent: string | undefined, hasCalls: boolean, fromText: boolean, notes: string[]): string {
  if (hasCalls) {
    if (sent === "tool_calls" || sent === "length") return sent;
    if (sent !== undefined && !fromText)
      notes.push(`the reply came with tool calls but finish_reason '${sent}'; read as 'tool_calls'`);
    return "tool_calls";
  }
  if (sent === undefined || sent === "tool_calls" || sent === "function_call") return "stop";
  return sent;
}
