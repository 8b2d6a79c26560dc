/**
 * Token counting with js-tiktoken, in the encoding that fits the model. Counts are estimates of
 * what the server will bill (servers add their own framing), so memory logs the drift it sees.
 */
import { Tiktoken } from "js-tiktoken/lite";
import type { Message, ToolSpec } from "./types.js";

export type EncodingName = "o200k_base" | "cl100k_base";

export interface TokenCounter {
  readonly encoding: EncodingName;
  text(text: string): number;
  message(message: Message): number;
  tools(tools: ToolSpec[]): number;
}

/** o200k_base for the gpt-4o / 4.1 / o-series / gpt-5 families, cl100k_base for everything else. */
export function encodingForModel(model: string): EncodingName {
  return /^(gpt-4o|gpt-4\.1|gpt-5|o\d|chatgpt-4o)/i.test(model.replace(/^.*\//, "")) ? "o200k_base" : "cl100k_base";
}

/** The model's context window in tokens, where known; undefined means "trust the budget". */
export function contextWindowOf(model: string): number | undefined {
  const name = model.replace(/^.*\//, "").toLowerCase();
  if (/^gpt-4\.1/.test(name)) return 1_047_576;
  if (/^gpt-5/.test(name)) return 400_000;
  if (/^o\d/.test(name)) return 200_000;
  if (/^(gpt-4o|chatgpt-4o|gpt-4-turbo)/.test(name)) return 128_000;
  if (/^gpt-3\.5-turbo/.test(name)) return 16_385;
  if (/^gpt-4(-0613)?$/.test(name)) return 8_192;
  return undefined;
}

// Each message costs a few tokens of framing besides its text (OpenAI's published rule of thumb).
const TOKENS_PER_MESSAGE = 3;
const TOKENS_PER_REPLY = 3;

interface Encoding {
  encoder: Tiktoken;
  /** The encoding's own pre-tokenizer pattern: tiktoken encodes each piece it matches on its own. */
  pieces: RegExp;
}

const encodings = new Map<EncodingName, Encoding>();

async function loadEncoding(name: EncodingName): Promise<Encoding> {
  let encoding = encodings.get(name);
  if (!encoding) {
    // The rank tables are large; load only the one needed, once per process.
    const ranks = (name === "o200k_base" ? await import("js-tiktoken/ranks/o200k_base") : await import("js-tiktoken/ranks/cl100k_base")).default;
    encoding = { encoder: new Tiktoken(ranks), pieces: new RegExp(ranks.pat_str, "gu") };
    encodings.set(name, encoding);
  }
  return encoding;
}

const PIECE_CACHE_LIMIT = 200_000;

/**
 * Counts are exact: text is split with the encoding's own pattern, and each piece's count (what
 * tiktoken would give it) is cached, since chat text repeats its words. Special tokens such as
 * <|endoftext|> in a message are counted as the plain text they are.
 */
export async function createTokenCounter(encoding: EncodingName): Promise<TokenCounter> {
  const { encoder, pieces } = await loadEncoding(encoding);
  const cache = new Map<string, number>();
  const piece = (value: string) => {
    let count = cache.get(value);
    if (count === undefined) {
      count = encoder.encode(value, [], []).length;
      if (cache.size >= PIECE_CACHE_LIMIT) cache.clear();
      cache.set(value, count);
    }
    return count;
  };
  const text = (value: string) => {
    let count = 0;
    if (value) for (const match of value.matchAll(pieces)) count += piece(match[0]);
    return count;
  };
  return {
    encoding,
    text,
    message(message) {
      let count = TOKENS_PER_MESSAGE + text(message.role) + text(message.content ?? "");
      if (message.role === "assistant") {
        for (const call of message.tool_calls ?? []) count += TOKENS_PER_MESSAGE + text(call.function.name) + text(call.function.arguments);
      }
      if (message.role === "tool") count += text(message.tool_call_id);
      return count;
    },
    tools: (tools) => (tools.length ? text(JSON.stringify(tools)) : 0),
  };
}

/** Tokens of a whole prompt: its messages plus the reply priming. */
export const promptTokens = (messageTokens: number[]): number => messageTokens.reduce((sum, tokens) => sum + tokens, TOKENS_PER_REPLY);
