/**
 * An encoding's byte-pair ranks in a compact form, and the merge that counts a piece's tokens with
 * them. js-tiktoken's Tiktoken keeps two Maps of 200,000 entries each (a string key and a Uint8Array
 * per token); building them took 140 MB of resident memory that the process never gave back, most of
 * a bot's footprint. Here the ranks file's text (the same data js-tiktoken reads) is decoded once
 * into one byte buffer and an open-addressing hash table of typed arrays: about 5 MB for o200k_base,
 * built in one pass, and a lookup hashes the bytes in place instead of joining them into a key.
 */

/** The shape of js-tiktoken's rank files (js-tiktoken/ranks/*): the pre-tokenizer pattern and the ranks as text. */
export interface RankFile {
  pat_str: string;
  bpe_ranks: string;
}

export interface RankTable {
  /** How many tokens the encoding has (special tokens aside). */
  readonly size: number;
  /** The rank of the token whose bytes are bytes[start, end); -1 when they are not one token. */
  rank(bytes: Uint8Array, start: number, end: number): number;
  /** Whether bytes[at], bytes[at + 1], bytes[at + 2] occur together in some token. */
  window(bytes: Uint8Array, at: number): boolean;
}

/** Ranks are below this (checked when the table is built), so a pair of them packs into one number. */
export const RANK_LIMIT = 2 ** 18;

const BASE64 = new Int8Array(128).fill(-1);
for (const [index, char] of [..."ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"].entries())
  BASE64[char.charCodeAt(0)] = index;

/**
 * The table of a rank file. Its `bpe_ranks` is lines of "<prefix> <first rank> <token> <token> ...",
 * each token its bytes in base64, ranked in order from the first rank (as js-tiktoken reads it).
 * A file that is not of that shape is refused (`malformed`), never read into wrong counts.
 */
export function rankTableOf(file: RankFile, malformed: string): RankTable {
  const text = file.bpe_ranks;
  // Two passes over the text: the first sizes the arrays exactly, so loading leaves no garbage
  // buffers behind (what a process allocates once it tends to keep as resident memory).
  let size = 0;
  let used = 0;
  let ordered = true; // the usual case: token i has rank i, and no rank array is needed
  tokensOf(text, malformed, (rank, start, end) => {
    let length = end - start;
    while (length > 0 && text.charCodeAt(start + length - 1) === 61) length--; // "=": padding
    used += Math.floor((length * 6) / 8);
    ordered &&= rank === size;
    size++;
  });
  if (size === 0) throw new Error(malformed);
  const bytes = new Uint8Array(used);
  const starts = new Int32Array(size);
  const ranks = ordered ? undefined : new Int32Array(size);
  let token = 0;
  let at = 0;
  tokensOf(text, malformed, (rank, start, end) => {
    starts[token] = at;
    if (ranks) ranks[token] = rank;
    token++;
    at = decodeBase64(text, start, end, bytes, at, malformed);
  });
  return buildTable(bytes, starts, ranks, used);
}

/** Calls `each` with every token's rank and where its base64 is in the text, in order. */
function tokensOf(text: string, malformed: string, each: (rank: number, start: number, end: number) => void): void {
  for (let lineStart = 0; lineStart < text.length; ) {
    let lineEnd = text.indexOf("\n", lineStart);
    if (lineEnd < 0) lineEnd = text.length;
    const prefixEnd = text.indexOf(" ", lineStart);
    const firstEnd = prefixEnd < 0 || prefixEnd >= lineEnd ? -1 : text.indexOf(" ", prefixEnd + 1);
    if (lineEnd > lineStart && firstEnd < 0) throw new Error(malformed);
    if (lineEnd > lineStart) {
      let rank = Number(text.slice(prefixEnd + 1, firstEnd));
      if (!Number.isInteger(rank) || rank < 0) throw new Error(malformed);
      for (let at = firstEnd + 1; at < lineEnd; rank++) {
        let end = text.indexOf(" ", at);
        if (end < 0 || end > lineEnd) end = lineEnd;
        if (rank >= RANK_LIMIT) throw new Error(malformed);
        each(rank, at, end);
        at = end + 1;
      }
    }
    lineStart = lineEnd + 1;
  }
}

function decodeBase64(
  text: string,
  start: number,
  end: number,
  into: Uint8Array,
  at: number,
  malformed: string,
): number {
  let bits = 0;
  let count = 0;
  for (let index = start; index < end; index++) {
    const code = text.charCodeAt(index);
    if (code === 61) break; // "=": padding
    const value = code < 128 ? (BASE64[code] as number) : -1;
    if (value < 0) throw new Error(malformed);
    bits = (bits << 6) | value;
    count += 6;
    if (count >= 8) {
      count -= 8;
      into[at++] = (bits >> count) & 0xff;
    }
  }
  return at;
}

/** FNV-1a over bytes[start, end). */
function hashOf(bytes: Uint8Array, start: number, end: number): number {
  let hash = 0x811c9dc5;
  for (let at = start; at < end; at++) hash = Math.imul(hash ^ (bytes[at] as number), 0x01000193);
  return hash >>> 0;
}

function buildTable(
  tokenBytes: Uint8Array,
  starts: Int32Array,
  ranks: Int32Array | undefined,
  used: number,
): RankTable {
  const size = starts.length;
  const endOf = (token: number) => (token + 1 < size ? (starts[token + 1] as number) : used);
  // Open addressing with linear probing, at most half full; a slot holds a token's index, -1 when empty.
  let capacity = 1024;
  while (capacity < size * 2) capacity *= 2;
  const mask = capacity - 1;
  const slots = new Int32Array(capacity).fill(-1);
  // Every run of three bytes inside some token, as a 2^24-bit set (2 MB).
  const windows = new Uint8Array(2 ** 21);
  for (let token = 0; token < size; token++) {
    const start = starts[token] as number;
    const end = endOf(token);
    let slot = hashOf(tokenBytes, start, end) & mask;
    while ((slots[slot] as number) >= 0) slot = (slot + 1) & mask;
    slots[slot] = token;
    for (let at = start; at + 3 <= end; at++) {
      const window =
        ((tokenBytes[at] as number) << 16) | ((tokenBytes[at + 1] as number) << 8) | (tokenBytes[at + 2] as number);
      windows[window >> 3] = (windows[window >> 3] as number) | (1 << (window & 7));
    }
  }
  return {
    size,
    rank(bytes, start, end) {
      const length = end - start;
      for (let slot = hashOf(bytes, start, end) & mask; ; slot = (slot + 1) & mask) {
        const token = slots[slot] as number;
        if (token < 0) return -1;
        const tokenStart = starts[token] as number;
        if (endOf(token) - tokenStart !== length) continue;
        let at = 0;
        while (at < length && tokenBytes[tokenStart + at] === bytes[start + at]) at++;
        if (at === length) return ranks ? (ranks[token] as number) : token;
      }
    },
    window(bytes, at) {
      const window = ((bytes[at] as number) << 16) | ((bytes[at + 1] as number) << 8) | (bytes[at + 2] as number);
      return (((windows[window >> 3] as number) >> (window & 7)) & 1) === 1;
    },
  };
}

const PAIR_CACHE_LIMIT = 200_000;

/**
 * tiktoken's byte-pair merge, counting the tokens it makes of one piece's bytes: merge the adjacent
 * pair whose joined bytes have the lowest rank (the leftmost on a tie) until no pair is a token.
 * It is the algorithm of tiktoken and js-tiktoken, so counts are the same (the tests compare them);
 * js-tiktoken's own rescans every pair after every merge and builds a key string for each, which
 * is quadratic with a large constant (0.5 ms for 32 CJK characters) and what made a 5,000-letter
 * message cost seconds. Here the pairs wait in a heap ordered by (rank, position), parts are a
 * linked list of byte ranges, and a merge re-rates only its two neighbouring pairs. Every part is a
 * token, so a pair is known by its two ranks and its rank, once looked up, is remembered; and a pair
 * whose junction bytes appear in no token (`window`) cannot join, which in CJK text rules out most
 * neighbouring characters (twice as fast on 40,000 random Chinese characters).
 */
export function createMerge(ranks: RankTable): (bytes: Uint8Array) => number {
  const byteRanks = Int32Array.from({ length: 256 }, (_, byte) => ranks.rank(Uint8Array.of(byte), 0, 1));
  const pairRanks = new Map<number, number>(); // left rank * RANK_LIMIT + right rank -> rank, or -1
  const heap = new PairHeap();
  // The piece being merged, and its parts by the offset of their first byte: rank, neighbours, and
  // the rank of the pair the part starts (-1: none). Reused from piece to piece, which makes short
  // pieces 1.5x faster.
  let bytes: Uint8Array = new Uint8Array(0);
  let length = 0;
  let tokens = new Int32Array(768);
  let next = new Int32Array(768);
  let previous = new Int32Array(768);
  let pairs = new Float64Array(768);

  // A pair can join only if the three bytes either side of its junction occur in some token.
  const mayJoin = (left: number, right: number) =>
    (right - left < 2 || ranks.window(bytes, right - 2)) &&
    ((next[right] as number) - right < 2 || ranks.window(bytes, right - 1));
  const rankOf = (left: number, right: number) => {
    const pair = (tokens[left] as number) * RANK_LIMIT + (tokens[right] as number);
    let rank = pairRanks.get(pair);
    if (rank === undefined) {
      rank = ranks.rank(bytes, left, next[right] as number);
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
    if (piece.length <= 64 && ranks.rank(piece, 0, piece.length) >= 0) return 1; // as most words are
    bytes = piece;
    length = piece.length;
    if (length > tokens.length) {
      tokens = new Int32Array(length);
      next = new Int32Array(length);
      previous = new Int32Array(length);
      pairs = new Float64Array(length);
    }
    // Plain loops: Array.from with a callback made the whole merge 1.5x slower.
    for (let at = 0; at < length; at++) {
      tokens[at] = byteRanks[bytes[at] as number] as number;
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
