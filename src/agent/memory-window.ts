/**
 * What of a session memory shows the model each step, worked out from the counts it already knows:
 * where the newest whole turns that fit begin, the run's latest step fitted into view, and the tool
 * calls paired with their results as the protocol requires. These run every step, so they walk the
 * messages without copying them.
 */
import type { StoredMessage } from "./contracts.js";
import type { TokenCounter } from "./tokens.js";
import type { Message } from "./types.js";

const isRequest = (stored: StoredMessage, runId: string) => stored.runId === runId && stored.message.role === "user";

/**
 * Where the newest messages that fit in `room` tokens begin: the run's own messages are taken in
 * units (an assistant message with its tool results), earlier runs in whole turns. The run's
 * request is pinned apart, so it is not counted here.
 */
export function windowStart(messages: StoredMessage[], runId: string, room: number): number {
  let used = 0;
  let start = messages.length;
  while (start > 0) {
    const last = start - 1;
    const ours = messages[last]?.runId === runId;
    let unitStart = last;
    while (unitStart > 0 && belongsToPrevious(messages[unitStart] as StoredMessage, ours)) unitStart--;
    let tokens = 0;
    for (let index = unitStart; index < start; index++) {
      const stored = messages[index] as StoredMessage;
      if (!isRequest(stored, runId)) tokens += stored.tokens;
    }
    if (used + tokens > room) break;
    used += tokens;
    start = unitStart;
  }
  return start;
}

/**
 * The run's latest step (its last assistant message, with the results and notes after it) must stay
 * in view, or the model would not see what its last call returned. When the step alone is larger than
 * `room`, its tool results are cut, with a marker, to share what is left. The store keeps them whole.
 */
export function fitLatestStep(
  messages: StoredMessage[],
  runId: string,
  room: number,
  counter: TokenCounter,
): StoredMessage[] {
  const start = messages.findLastIndex((stored) => stored.message.role === "assistant");
  if (start < 0 || messages[start]?.runId !== runId) return messages;
  // The usual case, every step: the step fits, found without copying it.
  let stepTokens = 0;
  let anyResult = false;
  for (let index = start; index < messages.length; index++) {
    const stored = messages[index] as StoredMessage;
    stepTokens += stored.tokens;
    anyResult ||= stored.message.role === "tool";
  }
  if (stepTokens <= room || !anyResult) return messages;
  const step = messages.slice(start);
  const tokensOf = (list: StoredMessage[]) => list.reduce((sum, stored) => sum + stored.tokens, 0);
  const results = step.filter((stored) => stored.message.role === "tool");
  const share = Math.floor((room - tokensOf(step) + tokensOf(results)) / results.length);
  const fitted = step.map((stored): StoredMessage => {
    if (stored.message.role !== "tool" || stored.tokens <= share) return stored;
    const framing = stored.tokens - counter.text(stored.message.content);
    const message: Message = {
      ...stored.message,
      content: limitTokens(stored.message.content, Math.max(0, share - framing), counter),
    };
    return { ...stored, message, tokens: counter.message(message) };
  });
  return [...messages.slice(0, start), ...fitted];
}

/** Tool results belong to the assistant message that asked for them; earlier turns start at a user message. */
function belongsToPrevious(stored: StoredMessage, inRun: boolean): boolean {
  return inRun ? stored.message.role === "tool" : stored.message.role !== "user";
}

/**
 * Every assistant tool_calls message is followed by exactly one result per call, as the protocol
 * requires: a call whose result was never written (a crash, a run left waiting) gets an error
 * result, and a result whose call is not in view is dropped.
 */
export function repairToolPairs(messages: Message[], repaired: Message[] = []): Message[] {
  for (let index = 0; index < messages.length; index++) {
    const message = messages[index] as Message;
    if (message.role === "tool") continue; // placed with its assistant message below
    repaired.push(message);
    if (message.role !== "assistant" || !message.tool_calls?.length) continue;
    const calls = message.tool_calls;
    // The usual case: one result per call, right after it, in order (no lookup needed).
    if (resultsInOrder(messages, index, calls)) {
      for (let next = index + 1; next <= index + calls.length; next++) repaired.push(messages[next] as Message);
      continue;
    }
    const results = new Map<string, Message>();
    for (let next = index + 1; next < messages.length && messages[next]?.role === "tool"; next++) {
      const result = messages[next] as Extract<Message, { role: "tool" }>;
      results.set(result.tool_call_id, result);
    }
    for (const call of calls) {
      repaired.push(
        results.get(call.id) ?? {
          role: "tool",
          tool_call_id: call.id,
          content: JSON.stringify({
            status: "error",
            error: {
              type: "execution_error",
              message:
                "This call was not run to the end: the run was interrupted, or the conversation moved on before it was approved.",
            },
          }),
        },
      );
    }
  }
  return repaired;
}

/** Whether exactly one result per call follows the assistant message at `index`, in the calls' order, each id once. */
function resultsInOrder(messages: Message[], index: number, calls: Array<{ id: string }>): boolean {
  const end = index + 1 + calls.length;
  if (end > messages.length || (end < messages.length && messages[end]?.role === "tool")) return false;
  for (let at = 0; at < calls.length; at++) {
    const result = messages[index + 1 + at] as Message;
    if (result.role !== "tool" || result.tool_call_id !== calls[at]?.id) return false;
  }
  return calls.length === 1 || new Set(calls.map((call) => call.id)).size === calls.length;
}

export function limitTokens(text: string, maxTokens: number, counter: TokenCounter): string {
  const tokens = counter.text(text);
  if (tokens <= maxTokens) return text;
  const cut = (keep: number) =>
    `${text.slice(0, keep)} …[cut ${text.length - keep} of ${text.length} characters to fit the context]`;
  // Cut in proportion, then shrink until the text with its marker fits: tokens are not spread evenly.
  let keep = Math.max(0, Math.floor((text.length * maxTokens) / tokens) - 80);
  while (keep > 0 && counter.text(cut(keep)) > maxTokens) keep = Math.floor(keep * 0.9);
  return cut(keep);
}
