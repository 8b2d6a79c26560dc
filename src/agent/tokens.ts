/**
 * Token counting with js-tiktoken's rank tables and pre-tokenizer, in the encoding that fits the
 * model; the byte-pair merge is this file's own (createMerge), as js-tiktoken's is quadratic. Counts
 * are estimates of what the server will bill (servers add their own framing), so memory logs the
 * drift it sees.
 */
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { createMerge, rankTableOf, type RankFile, type RankTable } from "./token-ranks.js";
import { textOf, type Message, type ToolSpec } from "./types.js";

/** An image part as a prompt counts it: OpenAI's price of a 1024x1024 image at high detail. */
export const IMAGE_TOKENS = 765;

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
  /** The encoding's own pre-tokenizer pattern: tiktoken encodes each piece it matches on its own. */
  pieces: RegExp;
  ranks: RankTable;
}

const encodings = new Map<EncodingName, Promise<Encoding>>();

/** The rank tables are large: only the one needed is loaded, once per process, and shared by every counter. */
function loadEncoding(name: EncodingName): Promise<Encoding> {
  let encoding = encodings.get(name);
  if (!encoding) {
    encoding = (async () => {
      const file = await readRankFile(name);
      const loaded = { pieces: new RegExp(file.pat_str, "gu"), ranks: rankTableOf(file, RANK_FILE_CHANGED) };
      checkProbe(name, loaded);
      return loaded;
    })();
    encodings.set(name, encoding);
    encoding.catch(() => encodings.delete(name));
  }
  return encoding;
}

/**
 * js-tiktoken's rank file for the encoding, read as data rather than imported: an imported module
 * keeps its 2 MB source and its 2 MB ranks string alive for the life of the process, and a heap's
 * growth is paced by what stays alive. Read this way, both are garbage once the table is built.
 */
async function readRankFile(name: EncodingName): Promise<RankFile> {
  const path = createRequire(import.meta.url).resolve(`js-tiktoken/ranks/${name}`);
  const text = await readFile(path, "utf8");
  try {
    // The file is `module.exports = {...}`, the object in JSON.
    const file = JSON.parse(text.slice(text.indexOf("{"), text.lastIndexOf("}") + 1)) as Partial<RankFile>;
    if (typeof file.pat_str === "string" && typeof file.bpe_ranks === "string")
      return { pat_str: file.pat_str, bpe_ranks: file.bpe_ranks };
  } catch {
    // refused below
  }
  throw new Error(RANK_FILE_CHANGED);
}

/**
 * Longest piece, in UTF-16 code units, that goes whole into the byte-pair merge; a longer one (a run
 * of letters, CJK, emoji, punctuation or whitespace without a break) is cut into chunks this long,
 * so no single merge works on more than 768 bytes whatever the message. With the merge below a
 * message's cost grows about linearly either way (40,000 characters of any class: tens of ms, see
 * bench/token-counting.ts), so the size was chosen for accuracy: words, code, URLs and prose
 * sentences are far shorter and stay exact, and each cut costs little.
 *
 * What a cut costs, measured against the exact count of the whole piece (both encodings; per input
 * class ten 5,000-character texts and up to 200 texts with a single cut): one cut changes a count by
 * -1 to +2 tokens. Over a text, random letters, random punctuation, Cyrillic and Devanagari average
 * +0.1 to +0.3 a cut and mixed whitespace +0.3; one repeated letter, mark or space, CJK, emoji (ZWJ
 * families too) and Thai 0 to +0.03, as their tokens rarely span a cut. No count was more than 0.5%
 * over the exact one. Base64, hex and digits never make a piece that long. TOKENS_PER_CUT is the
 * bound the tests and the bench hold counts to.
 */
export const MAX_PIECE_LENGTH = 256;
export const TOKENS_PER_CUT = { fewest: -1, most: 2 } as const;

/**
 * The pieces the merge is given: the encoding's pre-tokenizer pieces (`pattern` is that pattern,
 * global), each longer than MAX_PIECE_LENGTH cut into chunks. A chunk never ends between the two
 * halves of a surrogate pair, so code points stay whole (a grapheme such as a ZWJ emoji may be cut:
 * that costs only accuracy, within the bound above). The pattern itself runs in linear time on
 * 40,000 characters of every class tried (runs of digits, punctuation, whitespace, apostrophes,
 * camel case and their mixes: at most about 6 ms), so it needs no bound of its own.
 */
export function* boundedPieces(text: string, pattern: RegExp): Generator<string> {
  for (const match of text.matchAll(pattern)) {
    const piece = match[0];
    if (piece.length <= MAX_PIECE_LENGTH) yield piece;
    else yield* chunksOf(piece);
  }
}

/** A piece longer than MAX_PIECE_LENGTH in chunks that long, never ending between the halves of a surrogate pair. */
function* chunksOf(piece: string): Generator<string> {
  for (let start = 0; start < piece.length; ) {
    let end = Math.min(start + MAX_PIECE_LENGTH, piece.length);
    if (end < piece.length && isHighSurrogate(piece.charCodeAt(end - 1))) end--;
    yield piece.slice(start, end);
    start = end;
  }
}

const isHighSurrogate = (code: number) => code >= 0xd800 && code <= 0xdbff;

const PIECE_CACHE_LIMIT = 200_000;
// Chat text repeats its words, not its long pieces: caching only short ones bounds the cache's memory.
const CACHED_PIECE_LENGTH = 32;
const CACHED_TEXT_LENGTH = 64;
// Bounded small: ids are short but never recur, and a long-lived bot's heap is paced by what it keeps.
const TEXT_CACHE_LIMIT = 10_000;

/**
 * Counts are exact for pieces up to MAX_PIECE_LENGTH and within TOKENS_PER_CUT per cut beyond: text
 * is split with the encoding's own pattern, and each piece's count (what tiktoken would give it) is
 * cached, since chat text repeats its words. Special tokens such as <|endoftext|> in a message are
 * counted as the plain text they are.
 */
export async function createTokenCounter(encoding: EncodingName): Promise<TokenCounter> {
  const { pieces, ranks } = await loadEncoding(encoding);
  const merge = createMerge(ranks);
  const cache = new Map<string, number>();
  const utf8 = new TextEncoder();
  const piece = (value: string) => {
    if (value.length > CACHED_PIECE_LENGTH) return merge(utf8.encode(value));
    let count = cache.get(value);
    if (count === undefined) {
      count = merge(utf8.encode(value));
      if (cache.size >= PIECE_CACHE_LIMIT) cache.clear();
      cache.set(value, count);
    }
    return count;
  };
  // Short texts recur whole (roles, tool names, ids' shapes, small arguments): their counts are kept too.
  const texts = new Map<string, number>();
  const text = (value: string) => {
    if (!value) return 0;
    const short = value.length <= CACHED_TEXT_LENGTH;
    if (short) {
      const known = texts.get(value);
      if (known !== undefined) return known;
    }
    // boundedPieces, inlined: this runs for every message memory keeps.
    let count = 0;
    for (const match of value.matchAll(pieces)) {
      const found = match[0];
      if (found.length <= MAX_PIECE_LENGTH) count += piece(found);
      else for (const chunk of chunksOf(found)) count += piece(chunk);
    }
    if (short) {
      if (texts.size >= TEXT_CACHE_LIMIT) texts.clear();
      texts.set(value, count);
    }
    return count;
  };
  return {
    encoding,
    text,
    message(message) {
      let count = TOKENS_PER_MESSAGE + text(message.role) + text(textOf(message.content));
      if (message.role === "user" && typeof message.content !== "string")
        count += IMAGE_TOKENS * message.content.filter((part) => part.type === "image_url").length;
      if (message.role === "assistant") {
        for (const call of message.tool_calls ?? []) {
          count += TOKENS_PER_MESSAGE + text(call.function.name) + text(call.function.arguments);
          // Reasoning a server wants back on a tool-calling turn (DeepSeek) is prompt it reads too.
          if (call.message_reasoning_content) count += text(call.message_reasoning_content);
        }
      }
      if (message.role === "tool") count += text(message.tool_call_id);
      return count;
    },
    tools: (tools) => (tools.length ? text(JSON.stringify(tools)) : 0),
  };
}

/**
 * What js-tiktoken counts for a probe of mixed text (the tests check these against it): the ranks
 * are read from js-tiktoken's rank files directly, so if an upgrade changed their content or
 * shape, counts would silently go wrong; the counter refuses to start instead.
 */
export const PROBE = "Hello, wörld! 你好，世界 👋🏽   1234 don't <|endoftext|>";
export const PROBE_TOKENS: Record<EncodingName, number> = { o200k_base: 26, cl100k_base: 30 };

function checkProbe(name: EncodingName, { pieces, ranks }: Encoding): void {
  const merge = createMerge(ranks);
  const utf8 = new TextEncoder();
  const counted = [...PROBE.matchAll(pieces)].reduce((sum, match) => sum + merge(utf8.encode(match[0])), 0);
  if (counted !== PROBE_TOKENS[name]) throw new Error(RANK_FILE_CHANGED);
}

const RANK_FILE_CHANGED =
  "js-tiktoken's rank files are not what glassbox reads (js-tiktoken/ranks/*: pat_str and bpe_ranks); install the js-tiktoken version in package-lock.json.";

/** Tokens of a whole prompt: its messages plus the reply priming. */
export const promptTokens = (messageTokens: number[]): number =>
  messageTokens.reduce((sum, tokens) => sum + tokens, TOKENS_PER_REPLY);
