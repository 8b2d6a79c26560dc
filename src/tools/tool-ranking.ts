/**
 * Ranking tools against a text: BM25 over a tool's weighted fields (its name, description,
 * parameters, and the shapes of its parameters' examples), with a word no tool uses read through the
 * WordNet lexicon (related words, phrases, misspellings), and the words of past runs (usage
 * learning). Tool selection (selection.ts) asks it which tools fit the conversation.
 */
import { isPlainObject } from "./args.js";
import { irregularBase, relationWeight, wordNet, type Lexicon } from "./lexicon.js";
import { expandShorthand } from "./shorthand.js";
import type { AnyTool } from "./types.js";
import { stem, STOPWORDS, terms } from "./tool-words.js";
import type { UsageLearning } from "./usage-learning.js";

/** A word in a tool's name counts three times one in its description; a parameter's words half. */
const NAME_WEIGHT = 3;
const DESCRIPTION_WEIGHT = 1;
const PARAMETER_WEIGHT = 0.5;
/** An identifier in the request shaped like a parameter's example ("TCK-5120" like "TCK-4412"). */
const FORMAT_WEIGHT = 2;
/** A query word no tool uses, of at least this many letters, matches the words it begins, at this weight. */
const PREFIX_MINIMUM = 3;
const PREFIX_WEIGHT = 0.5;
/** A word made with "re-" ("resend") stands for the word without it, at this weight. */
const AGAIN_WEIGHT = 0.8;
/** A phrase of the request that WordNet knows as one lemma ("call off", "dig up") counts this much of a word. */
const PHRASE_WEIGHT = 1;
/** A misspelt word, known neither to the tools nor to WordNet, stands for the tool words this close to it, at this weight. */
const TYPO_WEIGHT = 0.8;
const EXPANSION_CACHE_LIMIT = 10_000;
const K1 = 1.2;
const B = 0.75;

interface Field {
  /** Term frequencies. */
  terms: Map<string, number>;
  length: number;
}

interface Document {
  name: string;
  fields: Field[];
}

/** A tool's name and its score against a text. */
export interface Ranked {
  name: string;
  score: number;
}

interface WeightedTerm {
  term: string;
  weight: number;
}

const FIELD_WEIGHTS = [NAME_WEIGHT, DESCRIPTION_WEIGHT, PARAMETER_WEIGHT, FORMAT_WEIGHT];

/** Built once: a function ranking the tools against a text. */
export function createRanker(
  definitions: AnyTool[],
  usage?: UsageLearning,
  lexicon: Lexicon | undefined = wordNet(),
): (text: string) => Ranked[] {
  const documents = definitions.map(documentOf);
  const positionOf = new Map(documents.map((document, position) => [document.name, position]));
  const count = Math.max(documents.length, 1);
  // Per field: its average length and each term's document frequency.
  const statistics = FIELD_WEIGHTS.map((_, field) => {
    const frequency = new Map<string, number>();
    let length = 0;
    for (const document of documents) {
      const { terms: fieldTerms, length: fieldLength } = document.fields[field] as Field;
      length += fieldLength;
      for (const term of fieldTerms.keys()) frequency.set(term, (frequency.get(term) ?? 0) + 1);
    }
    const idf = new Map(
      [...frequency].map(([term, df]) => [term, Math.log(1 + (documents.length - df + 0.5) / (df + 0.5))]),
    );
    return { frequency, idf, averageLength: Math.max(length / count, 1) };
  });
  const vocabulary = [...new Set(statistics.flatMap(({ frequency }) => [...frequency.keys()]))];
  const known = new Set(vocabulary);
  const expansions = new Map<string, WeightedTerm[]>();
  const expandPhrase = (phrase: string): WeightedTerm[] => {
    let related = expansions.get(phrase);
    if (!related) {
      const own = new Set(terms(phrase));
      related = expandRelated(phrase, known, lexicon, PHRASE_WEIGHT).filter(({ term }) => !own.has(term));
      if (expansions.size >= EXPANSION_CACHE_LIMIT) expansions.clear();
      expansions.set(phrase, related);
    }
    return related;
  };
  // whether WordNet has a phrase, remembered: a run's earlier messages come back on every call
  const phrases = new Map<string, boolean>();
  const isPhrase = (candidate: string): boolean => {
    let known = phrases.get(candidate);
    if (known === undefined) {
      known = lexicon?.has(candidate) ?? false;
      if (phrases.size >= EXPANSION_CACHE_LIMIT) phrases.clear();
      phrases.set(candidate, known);
    }
    return known;
  };
  const lines = new Map<string, { words: string[]; phrases: string[] }>();
  const expand = (word: string): WeightedTerm[] => {
    let related = expansions.get(word);
    if (!related) {
      related = expandWord(word, known, vocabulary, lexicon);
      if (expansions.size >= EXPANSION_CACHE_LIMIT) expansions.clear();
      expansions.set(word, related);
    }
    return related;
  };
  const bm25 = (document: Document, term: string) =>
    FIELD_WEIGHTS.reduce((sum, fieldWeight, field) => {
      const { terms: fieldTerms, length } = document.fields[field] as Field;
      const tf = fieldTerms.get(term) ?? 0;
      if (tf === 0) return sum;
      const { idf, averageLength } = statistics[field] as (typeof statistics)[number];
      return (
        sum + (fieldWeight * (idf.get(term) ?? 0) * tf * (K1 + 1)) / (tf + K1 * (1 - B + (B * length) / averageLength))
      );
    }, 0);
  // Per term, the tools using it and its BM25 score in each: computed once.
  const postings = new Map(
    vocabulary.map((term) => [
      term,
      documents.flatMap((document, position) => {
        const score = bm25(document, term);
        return score > 0 ? [{ position, score }] : [];
      }),
    ]),
  );

  return (text) => {
    // A word adds to a tool its best-scoring term there: the word itself, or one it stands for.
    // So a word the tools do not use, standing for many, adds to each tool at most once.
    const scores = new Array<number>(documents.length).fill(0);
    const best = new Array<number>(documents.length).fill(0);
    const add = (expansion: WeightedTerm[]) => {
      best.fill(0);
      for (const { term, weight } of expansion) {
        for (const { position, score } of postings.get(term) ?? [])
          best[position] = Math.max(best[position] as number, weight * score);
      }
      for (let position = 0; position < documents.length; position++)
        scores[position] = (scores[position] as number) + (best[position] as number);
    };
    // per line (a run's messages come back on every call): its words and WordNet phrases, remembered
    const textWords = new Set<string>();
    const textPhrases = new Set<string>();
    for (const line of text.split("\n")) {
      let read = lines.get(line);
      if (!read) {
        const plain = expandShorthand(line);
        read = { words: words(plain), phrases: lexicon ? phrasesOf(plain, isPhrase) : [] };
        if (lines.size >= EXPANSION_CACHE_LIMIT) lines.clear();
        lines.set(line, read);
      }
      for (const word of read.words) textWords.add(word);
      for (const phrase of read.phrases) textPhrases.add(phrase);
    }
    for (const word of textWords) add(expand(word));
    for (const phrase of textPhrases) add(expandPhrase(phrase));
    for (const format of formatsOf(text)) add([{ term: format, weight: 1 }]);
    // what past runs used for such words; a tool no longer registered is passed over
    for (const [name, learned] of usage?.scores(text) ?? []) {
      const position = positionOf.get(name);
      if (position !== undefined) scores[position] = (scores[position] as number) + learned;
    }
    return documents
      .map((document, position) => ({ name: document.name, score: scores[position] as number, position }))
      .filter((entry) => entry.score > 0)
      .sort((a, b) => b.score - a.score || a.position - b.position)
      .map(({ name, score }) => ({ name, score }));
  };
}

/**
 * The terms a query word stands for: its stem when a tool uses it; otherwise the words it begins
 * or that begin it ("doc" for "document", "euros" for "eur"); and the words the lexicon relates to it.
 */
function expandWord(
  word: string,
  known: Set<string>,
  vocabulary: string[],
  lexicon: Lexicon | undefined,
): WeightedTerm[] {
  const found = new Map<string, number>();
  const add = (term: string, weight: number) => {
    if (known.has(term) && weight > (found.get(term) ?? 0)) found.set(term, weight);
  };
  const stemmed = terms(word);
  for (const term of stemmed) add(term, 1);
  // "paid" is "pay", "sent" "send": the tools may use the plain form
  for (const term of terms(irregularBase(word) ?? "")) add(term, 1);
  const term = stemmed[0];
  if (stemmed.length === 1 && term !== undefined && !known.has(term) && term.length >= PREFIX_MINIMUM) {
    for (const other of vocabulary)
      if (other.startsWith(term) || (other.length >= PREFIX_MINIMUM && term.startsWith(other)))
        add(other, PREFIX_WEIGHT);
  }
  // "resend" is "send" again, "reschedule" "schedule"
  const again = /^re(\p{L}{3,})$/u.exec(word)?.[1];
  if (again && !known.has(term ?? "")) for (const againTerm of terms(again)) add(againTerm, AGAIN_WEIGHT);
  // the lexicon fills gaps: a word the tools use already is matched as it is
  if (lexicon && stemmed.length > 0 && !stemmed.every((stemmedTerm) => known.has(stemmedTerm))) {
    for (const { term: relatedTerm, weight } of expandRelated(word, known, lexicon, 1)) add(relatedTerm, weight);
  }
  // a misspelling ("cancle", "invoce"): a word nobody knows stands for the tool words nearest to it
  if (
    stemmed.length === 1 &&
    term !== undefined &&
    !known.has(term) &&
    word.length >= TYPO_MINIMUM &&
    !lexicon?.has(word)
  ) {
    for (const { term: nearTerm } of nearestTerms(word, vocabulary)) add(nearTerm, TYPO_WEIGHT);
  }
  return [...found].map(([term, weight]) => ({ term, weight }));
}

/** The tool terms the lexicon relates to a word or phrase, weighted by relation and sense. */
function expandRelated(word: string, known: Set<string>, lexicon: Lexicon | undefined, scale: number): WeightedTerm[] {
  const found = new Map<string, number>();
  for (const { word: relatedWord, relation, sense } of lexicon?.related(word) ?? []) {
    const weight = scale * relationWeight(relation, sense); // "parcel": package, less for rarer senses
    // "e-mail" is also "email"
    const spellings = relatedWord.includes("-") ? [relatedWord, relatedWord.replace(/-/g, "")] : [relatedWord];
    for (const relatedTerm of spellings.flatMap(terms))
      if (known.has(relatedTerm) && weight > (found.get(relatedTerm) ?? 0)) found.set(relatedTerm, weight);
  }
  return [...found].map(([term, weight]) => ({ term, weight }));
}

/** A misspelling is looked for among tool words when it has at least this many letters. */
const TYPO_MINIMUM = 4;

/**
 * The tool terms within the edit distance a word's length allows (one edit up to six letters, two
 * beyond; a swap of neighbouring letters is one edit), the closest ones only. Compared as written
 * and stemmed, against the stemmed terms: "cancle" is "cancel", "invoce" "invoice".
 */
function nearestTerms(word: string, vocabulary: string[]): WeightedTerm[] {
  const forms = [...new Set([word, stem(word)])];
  const allowed = word.length <= 6 ? 1 : 2;
  let best = allowed + 1;
  let nearest: string[] = [];
  for (const candidate of vocabulary) {
    if (candidate.length < TYPO_MINIMUM - 1 || Math.abs(candidate.length - word.length) > allowed + 1) continue;
    const distance = Math.min(...forms.map((form) => editDistance(form, candidate, best)));
    if (distance > allowed) continue;
    if (distance < best) [best, nearest] = [distance, [candidate]];
    else if (distance === best) nearest.push(candidate);
  }
  return best <= allowed ? nearest.map((term) => ({ term, weight: 1 })) : [];
}

/** Damerau–Levenshtein distance (optimal string alignment), giving up above `ceiling`. */
export function editDistance(a: string, b: string, ceiling = Number.POSITIVE_INFINITY): number {
  if (Math.abs(a.length - b.length) > ceiling) return ceiling + 1;
  let before = new Array<number>(b.length + 1).fill(0);
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    let rowBest = i;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let value = Math.min(
        (previous[j] as number) + 1,
        (current[j - 1] as number) + 1,
        (previous[j - 1] as number) + cost,
      );
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        value = Math.min(value, (before[j - 2] as number) + 1);
      current.push(value);
      rowBest = Math.min(rowBest, value);
    }
    if (rowBest > ceiling) return ceiling + 1;
    [before, previous] = [previous, current];
  }
  return previous[b.length] as number;
}

/** Particles that end a phrasal verb, also after a word in between: "call it off", "dig that mail up". */
const PARTICLES = new Set(
  "up off out in on back down over away through along around about forward together".split(" "),
);

/**
 * The phrases of a text that WordNet has as lemmas: two or three neighbouring words ("call off",
 * "time off", "in stock", "get together"), and a verb and its particle one word apart ("call it
 * off"). Each must have a word that is not a stopword.
 */
function phrasesOf(text: string, isPhrase: (candidate: string) => boolean): string[] {
  const tokens = text
    .toLowerCase()
    .split(/[^\p{L}'-]+/u)
    .filter((token) => token.length > 0);
  const candidates: string[] = [];
  for (let i = 0; i < tokens.length - 1; i++) {
    const [first, second, third] = [tokens[i] as string, tokens[i + 1] as string, tokens[i + 2]];
    candidates.push(`${first} ${second}`);
    if (third !== undefined) {
      candidates.push(`${first} ${second} ${third}`);
      if (PARTICLES.has(third)) candidates.push(`${first} ${third}`);
    }
  }
  const found = new Set<string>();
  for (const candidate of candidates) {
    const parts = candidate.split(" ");
    if (parts.every((part) => STOPWORDS.has(part) || PARTICLES.has(part))) continue;
    if (isPhrase(candidate)) found.add(candidate);
  }
  return [...found];
}

/** The words of a text as written, lowercase: what the lexicon looks up. */
function words(text: string): string[] {
  return text
    .replace(/\S+@\S+|\bhttps?:\/\/\S+/g, " ")
    .replace(/%/g, " percent ")
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .toLowerCase()
    .split(/[^\p{L}\p{N}]+/u)
    .filter((word) => word.length > 1 && !STOPWORDS.has(word) && !/^\d+$/.test(word));
}

/**
 * The shapes of the identifiers in a text, to match those of the examples in parameter
 * descriptions: "TCK-5120" and "TCK-4412" are both "TCK-9", "search-api" and "payments-api" both
 * "a-a", "#support" and "#eng-announcements" both "#a", "20240603011" a number of 11 digits. Plain
 * words and short numbers have no shape.
 */
export function formatsOf(text: string): string[] {
  const shapes = text
    .split(/[\s,;()'"`]+/)
    .map((token) => token.replace(/^[^\p{L}\p{N}#@]+|[^\p{L}\p{N}]+$/gu, ""))
    .map(shapeOf)
    .filter((shape): shape is string => shape !== undefined);
  return [...new Set(shapes)];
}

const MINIMUM_SHAPE_LENGTH = 3;

function shapeOf(token: string): string | undefined {
  if (/^[\p{Ll}]*$/u.test(token)) return undefined; // a plain word
  if (/^\d+$/.test(token)) return token.length >= 5 ? `format:${token.length}digits` : undefined;
  if (/^[#@]/.test(token)) return `format:${token[0]}a`; // a channel or a handle, whatever its name
  if (/^\p{L}/u.test(token) && /^[\p{L}]+$/u.test(token)) return undefined; // a capitalised word
  const shape = token
    .replace(/\p{Lu}\p{Ll}+/gu, "a")
    .replace(/\p{Lu}{4,}/gu, "A")
    .replace(/\p{Ll}+/gu, "a")
    .replace(/\d+/g, "9")
    .replace(/(a[-_])+a/g, "a-a");
  return shape.length >= MINIMUM_SHAPE_LENGTH ? `format:${shape}` : undefined;
}

/** The shapes of the examples in a tool's parameter descriptions ("e.g. TCK-4412"). */
function exampleFormats(schema: unknown): string[] {
  const text = parameterText(schema);
  const examples = [...text.matchAll(/e\.g\.\s*([^;)]*)/g)].map((match) => match[1] ?? "");
  return examples.flatMap(formatsOf);
}

function documentOf(tool: AnyTool): Document {
  const field = (words: string[]): Field => {
    const counts = new Map<string, number>();
    for (const term of words) counts.set(term, (counts.get(term) ?? 0) + 1);
    return { terms: counts, length: words.length };
  };
  return {
    name: tool.name,
    fields: [
      field(terms(tool.name)),
      field(terms(tool.description)),
      field(terms(parameterText(tool.parameters))),
      field(exampleFormats(tool.parameters)),
    ],
  };
}

/** Parameter names, descriptions and enum values, nested objects and arrays included. */
export function parameterText(schema: unknown): string {
  if (!isPlainObject(schema)) return "";
  const parts: string[] = [];
  if (typeof schema.description === "string") parts.push(schema.description);
  if (Array.isArray(schema.enum)) parts.push(...schema.enum.filter((value) => typeof value === "string"));
  if (isPlainObject(schema.properties)) {
    for (const [name, property] of Object.entries(schema.properties)) parts.push(name, parameterText(property));
  }
  if (schema.items !== undefined) parts.push(parameterText(schema.items));
  return parts.join(" ");
}
