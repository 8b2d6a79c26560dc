/**
 * Token counting with js-tiktoken's rank tables and pre-tokenizer, in the encoding that fits the
 * model; the byte-pair merge is this file's own (createMerge), as js-tiktoken's is quadratic. Counts
 * are estimates of what the server will bill (servers add their own framing), so memory logs the
 * drift it sees.
 */
import { Tiktoken } from "js-tiktoken/lite";
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
  windows: ByteWindows;
}

/** Token bytes as js-tiktoken keys them ("104,105" for "hi") to their rank. */
type RankTable = Map<string, number>;

const encodings = new Map<EncodingName, Encoding>();

async function loadEncoding(name: EncodingName): Promise<Encoding> {
  let encoding = encodings.get(name);
  if (!encoding) {
    // The rank tables are large; load only the one needed, once per process.
    const ranks = (name === "o200k_base" ? await import("js-tiktoken/ranks/o200k_base") : await import("js-tiktoken/ranks/cl100k_base")).default;
    const encoder = new Tiktoken(ranks);
    const table = rankTableOf(encoder);
    encoding = { pieces: new RegExp(ranks.pat_str, "gu"), ranks: table, windows: byteWindowsOf(table) };
    checkAgainst(encoder, encoding);
    encodings.set(name, encoding);
  }
  return encoding;
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
    if (piece.length <= MAX_PIECE_LENGTH) {
      yield piece;
      continue;
    }
    for (let start = 0; start < piece.length; ) {
      let end = Math.min(start + MAX_PIECE_LENGTH, piece.length);
      if (end < piece.length && isHighSurrogate(piece.charCodeAt(end - 1))) end--;
      yield piece.slice(start, end);
      start = end;
    }
  }
}

const isHighSurrogate = (code: number) => code >= 0xd800 && code <= 0xdbff;

const PIECE_CACHE_LIMIT = 200_000;
// Chat text repeats its words, not its long pieces: caching only short ones bounds the cache's memory.
const CACHED_PIECE_LENGTH = 32;

/**
 * Counts are exact for pieces up to MAX_PIECE_LENGTH and within TOKENS_PER_CUT per cut beyond: text
 * is split with the encoding's own pattern, and each piece's count (what tiktoken would give it) is
 * cached, since chat text repeats its words. Special tokens such as <|endoftext|> in a message are
 * counted as the plain text they are.
 */
export async function createTokenCounter(encoding: EncodingName): Promise<TokenCounter> {
  const { pieces, ranks, windows } = await loadEncoding(encoding);
  const merge = createMerge(ranks, windows);
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
  const text = (value: string) => {
    let count = 0;
    if (value) for (const bounded of boundedPieces(value, pieces)) count += piece(bounded);
    return count;
  };
  return {
    encoding,
    text,
    message(message) {
      let count = TOKENS_PER_MESSAGE + text(message.role) + text(textOf(message.content));
      if (message.role === "user" && typeof message.content !== "string") count += IMAGE_TOKENS * message.content.filter((part) => part.type === "image_url").length;
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

const PAIR_CACHE_LIMIT = 200_000;
const BYTE_KEYS = Array.from({ length: 256 }, (_, byte) => String(byte));
/** Ranks are below this (checked at load), so a pair of them packs into one number. */
const RANK_LIMIT = 2 ** 18;

/**
 * tiktoken's byte-pair merge, counting the tokens it makes of one piece's bytes: merge the adjacent
 * pair whose joined bytes have the lowest rank (the leftmost on a tie) until no pair is a token.
 * It is the algorithm of tiktoken and js-tiktoken, so counts are the same (the tests compare them);
 * js-tiktoken's own rescans every pair after every merge and builds a key string for each, which
 * is quadratic with a large constant (0.5 ms for 32 CJK characters) and what made a 5,000-letter
 * message cost seconds. Here the pairs wait in a heap ordered by (rank, position), parts are a
 * linked list, and a merge re-rates only its two neighbouring pairs. A lookup by key costs about
 * 1 µs in js-tiktoken's table, so two things spare most of them: every part is a token, so a pair
 * is known by its two ranks and its rank, once looked up, is remembered; and a pair whose junction
 * bytes appear in no token (`windows`) cannot join, which in CJK text rules out most neighbouring
 * characters (twice as fast on 40,000 random Chinese characters).
 */
function createMerge(ranks: RankTable, windows: ByteWindows): (bytes: Uint8Array) => number {
  const pairRanks = new Map<number, number>(); // left rank * RANK_LIMIT + right rank -> rank, or -1
  const heap = new PairHeap();
  // The piece being merged, and its parts by the offset of their first byte: key, rank, neighbours,
  // and the rank of the pair the part starts (-1: none). Reused from piece to piece, which makes
  // short pieces 1.5x faster; a bounded piece has at most 3 bytes per code unit.
  let bytes: Uint8Array = new Uint8Array(0);
  let length = 0;
  const keys: string[] = [];
  let tokens = new Int32Array(3 * MAX_PIECE_LENGTH);
  let next = new Int32Array(3 * MAX_PIECE_LENGTH);
  let previous = new Int32Array(3 * MAX_PIECE_LENGTH);
  let pairs = new Float64Array(3 * MAX_PIECE_LENGTH);

  // A pair can join only if the three bytes either side of its junction occur in some token.
  const mayJoin = (left: number, right: number) =>
    (right - left < 2 || windows.has(bytes, right - 2)) && ((next[right] as number) - right < 2 || windows.has(bytes, right - 1));
  const rankOf = (left: number, right: number) => {
    const pair = (tokens[left] as number) * RANK_LIMIT + (tokens[right] as number);
    let rank = pairRanks.get(pair);
    if (rank === undefined) {
      rank = ranks.get(`${keys[left]},${keys[right]}`) ?? -1;
      if (pairRanks.size >= PAIR_CACHE_LIMIT) pairRanks.clear();
      pairRanks.set(pair, rank);
    }
    return rank;
  };
  const rate = (left: number) => {
    const right = next[left] as number;
    const rank = right < length && mayJoin(left, right) ? rankOf(left, right) : -1;
    pairs[left] = rank;
    if (rank >= 0) heap.push(rank * length + left); // ties go to the smaller offset: the leftmost
  };

  return (piece) => {
    if (piece.length <= 1) return piece.length; // every byte is a token
    if (piece.length <= 64 && ranks.has(piece.join(","))) return 1; // as most words are
    bytes = piece;
    length = piece.length;
    if (length > tokens.length) {
      tokens = new Int32Array(length);
      next = new Int32Array(length);
      previous = new Int32Array(length);
      pairs = new Float64Array(length);
    }
    // Plain loops: Array.from with a callback made the whole merge 1.5x slower.
    keys.length = 0;
    for (let at = 0; at < length; at++) {
      const key = BYTE_KEYS[bytes[at] as number] as string;
      keys.push(key);
      tokens[at] = ranks.get(key) ?? -1;
      next[at] = at + 1;
      previous[at] = at - 1;
      pairs[at] = -1;
    }
    heap.clear();
    for (let left = 0; left < length - 1; left++) rate(left);
    let parts = length;
    while (heap.size > 0) {
      const entry = heap.pop();
      const left = entry % length;
      const rank = (entry - left) / length;
      if (pairs[left] !== rank) continue; // this pair has changed since it was queued
      const right = next[left] as number;
      keys[left] = `${keys[left]},${keys[right]}`;
      tokens[left] = rank;
      pairs[right] = -1;
      const after = next[right] as number;
      next[left] = after;
      if (after < length) previous[after] = left;
      parts--;
      rate(left);
      if ((previous[left] as number) >= 0) rate(previous[left] as number);
    }
    return parts;
  };
}

/** A binary min-heap of numbers, its storage reused from piece to piece. */
class PairHeap {
  private values = new Float64Array(1024);
  size = 0;

  clear(): void {
    this.size = 0;
  }

  push(value: number): void {
    if (this.size === this.values.length) {
      const grown = new Float64Array(this.values.length * 2);
      grown.set(this.values);
      this.values = grown;
    }
    let at = this.size++;
    while (at > 0) {
      const parent = (at - 1) >> 1;
      const above = this.values[parent] as number;
      if (above <= value) break;
      this.values[at] = above;
      at = parent;
    }
    this.values[at] = value;
  }

  pop(): number {
    const top = this.values[0] as number;
    const last = this.values[--this.size] as number;
    let at = 0;
    for (;;) {
      let child = 2 * at + 1;
      if (child >= this.size) break;
      if (child + 1 < this.size && (this.values[child + 1] as number) < (this.values[child] as number)) child++;
      const below = this.values[child] as number;
      if (below >= last) break;
      this.values[at] = below;
      at = child;
    }
    this.values[at] = last;
    return top;
  }
}

/**
 * js-tiktoken's rank table, which its typings do not declare. It is checked here and by a probe
 * (checkAgainst): if an upgrade moved or re-keyed it, counts would silently go wrong, so the counter
 * refuses to start instead.
 */
function rankTableOf(encoder: Tiktoken): RankTable {
  const table = (encoder as unknown as { rankMap?: unknown }).rankMap;
  if (table instanceof Map && [...table.values()].every((rank) => Number.isInteger(rank) && rank >= 0 && rank < RANK_LIMIT)) return table as RankTable;
  throw new Error(RANK_TABLE_MOVED);
}

function checkAgainst(encoder: Tiktoken, { pieces, ranks, windows }: Encoding): void {
  const probe = "Hello, wörld! 你好，世界 👋🏽   1234 don't <|endoftext|>";
  const merge = createMerge(ranks, windows);
  const counted = [...probe.matchAll(pieces)].reduce((sum, match) => sum + merge(new TextEncoder().encode(match[0])), 0);
  if (counted !== encoder.encode(probe, [], []).length) throw new Error(RANK_TABLE_MOVED);
}

const RANK_TABLE_MOVED =
  "js-tiktoken no longer keeps its rank table where glassbox reads it (Tiktoken.rankMap); install the js-tiktoken version in package-lock.json.";

/** Every run of three bytes inside some token, as a 2^24-bit set (2 MB). */
interface ByteWindows {
  /** Whether bytes[at], bytes[at + 1], bytes[at + 2] occur together in some token. */
  has(bytes: Uint8Array, at: number): boolean;
}

function byteWindowsOf(ranks: RankTable): ByteWindows {
  const bits = new Uint8Array(2 ** 21);
  // Keys are decimal bytes joined by commas ("228,189,160"); the last three read are the window.
  for (const key of ranks.keys()) {
    let window = 0;
    let count = 0;
    let value = 0;
    for (let at = 0; at <= key.length; at++) {
      const code = at < key.length ? key.charCodeAt(at) : 44;
      if (code !== 44) {
        value = value * 10 + code - 48;
        continue;
      }
      window = ((window << 8) | value) & 0xffffff;
      value = 0;
      if (++count >= 3) bits[window >> 3] = (bits[window >> 3] as number) | (1 << (window & 7));
    }
  }
  return {
    has(bytes, at) {
      const window = ((bytes[at] as number) << 16) | ((bytes[at + 1] as number) << 8) | (bytes[at + 2] as number);
      return (((bits[window >> 3] as number) >> (window & 7)) & 1) === 1;
    },
  };
}

/** Tokens of a whole prompt: its messages plus the reply priming. */
export const promptTokens = (messageTokens: number[]): number => messageTokens.reduce((sum, tokens) => sum + tokens, TOKENS_PER_REPLY);
