/**
 * Plain data shared by the loop, the model port, memory and adapters.
 * Messages are the OpenAI Chat Completions shapes, so they go to any compatible server unchanged.
 */

import type { ToolCall as ProtocolToolCall, ToolSpec } from "../tools/types.js";

export type { ToolSpec };

/**
 * A tool call as the model layer returns it and the conversation keeps it: the OpenAI shape plus
 * what the server asked to have back with it. The extras are plain data, so the store keeps them
 * with the call and the model layer sends them back as the server needs them.
 */
export interface ToolCall extends ProtocolToolCall {
  /** Provider data on the call (Gemini 3's `extra_content.google.thought_signature`), sent back on this call exactly as received. */
  extra_content?: Record<string, unknown>;
  /**
   * The `reasoning_content` of the assistant message this call came in (DeepSeek's thinking mode,
   * Qwen on vLLM/SGLang), on the message's first call only: the loop and the store keep calls
   * whole, and the model layer sends it back as that message's `reasoning_content`.
   */
  message_reasoning_content?: string;
}

/**
 * A part of a user message, as Chat Completions takes it: text, or an image (a data: URL; `detail`
 * as OpenAI reads it). A user message is plain text unless something was attached to it.
 */
export type ContentPart =
  | { type: "text"; text: string }
  | { type: "image_url"; image_url: { url: string; detail?: "auto" | "low" | "high" } };

export type Message =
  | { role: "system"; content: string }
  | { role: "user"; content: string | ContentPart[] }
  | { role: "assistant"; content: string | null; tool_calls?: ToolCall[] }
  | { role: "tool"; content: string; tool_call_id: string };

export interface Usage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
}

export interface ModelRequest {
  messages: Message[];
  /** Empty or absent: the model must answer in text. */
  tools?: ToolSpec[];
  /** "none" asks for an answer in text even though tools are listed (used for the stage conclusion). */
  toolChoice?: "auto" | "none";
  signal?: AbortSignal;
  /** Called with each piece of answer text as it arrives (streaming only). */
  onDelta?: (text: string) => void;
  /** The run the call is for (a decorator may stop the run, see cancel-from-store.ts); never sent to the server. */
  runId?: string;
  /** Whose daily allowance the call spends (checked by withSpendingGuard); never sent to the server. */
  userId?: string;
  /** Told of the reply as it is read, however the call ends (what it spent, see quota.ts); never sent to the server. */
  meter?: ReplyMeter;
}

/** What a model call has received so far: whether the server began a reply, and each piece of it. */
export interface ReplyMeter {
  /** The server took the request and began its reply (its headers came). */
  began(): void;
  /** A piece of the reply as it is read, streamed or whole: answer text, reasoning or call arguments. */
  received(text: string): void;
}

export interface ModelResponse {
  content: string | null;
  toolCalls: ToolCall[];
  finishReason: string;
  usage: Usage;
  /** The model that answered, as the server reports it. */
  model: string;
  /** The model's reasoning ("thinking"), however the server sent it: kept for the trace, never part of `content`. */
  reasoning?: string;
  /** What the model layer did to make the reply usable (a tool call recovered from text, an option the server refused dropped), in words, for the trace. */
  notes?: string[];
  /** For the repairs and refusals among `notes`: what went to the server and what came back, for the trace. */
  exchanges?: ModelExchange[];
  /** Whether the request asked for a streamed reply (absent: the model does not say). */
  streamed?: boolean;
}

/**
 * One repair or refusal of the model layer as the trace shows it: its note, what glassbox sent (the
 * option a server refused, as sent), what came back (the server's refusal, or the reply's raw text or
 * calls) and, for a repair, what glassbox read it as. Texts are cut for the trace, never for the model.
 */
export interface ModelExchange {
  note: string;
  sent?: string;
  received?: string;
  readAs?: string;
}

/** The model behind a one-function port; tests pass a client pointed at a scripted server. */
export interface ChatModel {
  readonly name: string;
  chat(request: ModelRequest): Promise<ModelResponse>;
}

/** The text of a message's content: its text parts joined (an image part is no text). */
export function textOf(content: string | ContentPart[] | null | undefined): string {
  if (typeof content === "string") return content;
  return (content ?? []).flatMap((part) => (part.type === "text" ? [part.text] : [])).join("\n\n");
}

export const emptyUsage = (): Usage => ({ promptTokens: 0, completionTokens: 0, totalTokens: 0 });

export function addUsage(total: Usage, more: Usage): Usage {
  return {
    promptTokens: total.promptTokens + more.promptTokens,
    completionTokens: total.completionTokens + more.completionTokens,
    totalTokens: total.totalTokens + more.totalTokens,
  };
}
