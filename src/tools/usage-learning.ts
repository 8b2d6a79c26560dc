/**
 * Selection that learns from the bot's own past runs. Each finished run is an example: its request
 * and the tools the model called for it. From these the learning counts which words (the ranker's
 * normalised terms, and pairs of neighbouring words for idioms: "drop line", "call off") went with
 * which tools, and scores a new request's tools by those associations, so a tool the model keeps
 * using for "nudge me" gets in even though no word of its description says "nudge".
 *
 * The score of a tool for a request is, over the request's features f seen before,
 *   weight · Σ idf(f) · uses(f, tool) / (runs(f) + smoothing),   idf(f) = ln(1 + runs / runs(f))
 * a smoothed share of the runs with that feature that used the tool, rare features counting more.
 * Counts cover the latest `maxRuns` examples only (older ones are forgotten), so memory is bounded.
 *
 * A word of the request that history has not seen (or seen too rarely to trust) borrows the
 * associations of learned words that WordNet relates to it — its synonyms, similar words, its family
 * (derivations), broader words and the words of its definitions — at a discount by relation and
 * sense: "scrap the standup" borrows what "cancel" taught once "scrap" relates to it. Each borrowed
 * feature counts at most once per word, at its best relation.
 * Deterministic: the same examples in the same order give the same scores.
 */
import { irregularBase, relationWeight, wordNet, type Lexicon } from "./lexicon.js";
import { terms } from "./tool-words.js";
import { expandShorthand } from "./shorthand.js";

/** One past run: what was asked and the tools used for it. */
export interface UsageExample {
  /** The run's id: a run learned again (ended again after a pause) replaces its earlier example. */
  runId?: string;
  request: string;
  tools: string[];
}

export interface UsageLearningOptions {
  /** Only the latest this many examples count (default 5,000). */
  maxRuns?: number;
  /** Added to a feature's run count, so a word seen once says less than a word seen often (default 1). */
  smoothing?: number;
  /** What a learned score is multiplied by before it joins the BM25 score (default 3). */
  weight?: number;
  /**
   * Where an unseen word finds related learned words: WordNet by default; null turns borrowing off.
   */
  lexicon?: Lexicon | null;
  /** What a borrowed association counts, times its relation's weight (default 1). */
  borrow?: number;
  /** A word seen in fewer runs than this borrows too (default 1: only words never seen). */
  familiarRuns?: number;
}

export interface UsageLearning {
  /** Adds a past run; a run with no tools teaches only that its words need none. */
  learn(example: UsageExample): void;
  /** Learned scores of the tools associated with a request's words; empty without history. */
  scores(text: string): Map<string, number>;
  /**
   * The tools past runs used together with `tool`: those used in at least `minimumShare` of the runs
   * that used it, and in at least `minimumRuns` of them. Empty for a tool never used.
   */
  usedWith(tool: string, minimumShare: number, minimumRuns?: number): string[];
  /** How many examples are counted now. */
  readonly size: number;
}

const DEFAULT_MAX_RUNS = 5_000;
// Chosen by 5-fold cross-validation on the benchmark's development set (weights 1.5-4, smoothing 0.5-4,
// borrowing 0-3, familiar from 1 or 3 runs; round 5, 365 requests).
const DEFAULT_SMOOTHING = 2;
const DEFAULT_WEIGHT = 3;
const DEFAULT_BORROW = 1;
const DEFAULT_FAMILIAR_RUNS = 1;
/** A request's features counted at most: a pasted page teaches nothing more than its start. */
const MAX_FEATURES = 80;
/** Request words whose related features are kept for the next calls. */
const RELATED_CACHE_LIMIT = 10_000;

interface Counted {
  features: string[];
  tools: string[];
}

export function createUsageLearning(options: UsageLearningOptions = {}): UsageLearning {
  const maxRuns = Math.max(1, options.maxRuns ?? DEFAULT_MAX_RUNS);
  const smoothing = options.smoothing ?? DEFAULT_SMOOTHING;
  const weight = options.weight ?? DEFAULT_WEIGHT;
  const lexicon = options.lexicon === undefined ? wordNet() : (options.lexicon ?? undefined);
  const borrow = options.borrow ?? DEFAULT_BORROW;
  const familiarRuns = options.familiarRuns ?? DEFAULT_FAMILIAR_RUNS;
  // Insertion order is learning order: the first entry is the oldest.
  const examples = new Map<string, Counted>();
  const runsWith = new Map<string, number>();
  const usesWith = new Map<string, Map<string, number>>();
  // per tool, the runs that used it and the other tools those runs used
  const toolRuns = new Map<string, number>();
  const pairRuns = new Map<string, Map<string, number>>();
  // per request word, the learned features WordNet relates to it (the lexicon never changes)
  const related = new Map<string, Map<string, number>>();
  // per line of a request (a run's messages come back on every call), its words
  const lines = new Map<string, RequestWord[]>();
  const wordsOf = (text: string): RequestWord[] =>
    text.split("\n").flatMap((line) => {
      let found = lines.get(line);
      if (!found) {
        found = requestWords(line);
        if (lines.size >= RELATED_CACHE_LIMIT) lines.clear();
        lines.set(line, found);
      }
      return found;
    });
  let unnamed = 0;

  const count = ({ features, tools }: Counted, change: 1 | -1) => {
    for (const tool of tools) {
      const used = (toolRuns.get(tool) ?? 0) + change;
      if (used <= 0) toolRuns.delete(tool);
      else toolRuns.set(tool, used);
      let pairs = pairRuns.get(tool);
      if (!pairs) pairRuns.set(tool, (pairs = new Map()));
      for (const other of tools) {
        if (other === tool) continue;
        const together = (pairs.get(other) ?? 0) + change;
        if (together <= 0) pairs.delete(other);
        else pairs.set(other, together);
      }
      if (pairs.size === 0) pairRuns.delete(tool);
    }
    for (const feature of features) {
      const runs = (runsWith.get(feature) ?? 0) + change;
      if (runs <= 0) {
        runsWith.delete(feature);
        usesWith.delete(feature);
        continue;
      }
      runsWith.set(feature, runs);
      let uses = usesWith.get(feature);
      if (!uses) usesWith.set(feature, (uses = new Map()));
      for (const tool of tools) {
        const used = (uses.get(tool) ?? 0) + change;
        if (used <= 0) uses.delete(tool);
        else uses.set(tool, used);
      }
    }
  };

  return {
    learn({ runId, request, tools }) {
      const key = runId ?? `#${unnamed++}`;
      const counted = { features: requestFeatures(request).slice(0, MAX_FEATURES), tools: [...new Set(tools)] };
      const earlier = examples.get(key);
      if (earlier) {
        count(earlier, -1);
        examples.delete(key);
      }
      examples.set(key, counted);
      count(counted, 1);
      // forget the oldest beyond the window
      for (const [oldest, example] of examples) {
        if (examples.size <= maxRuns) break;
        count(example, -1);
        examples.delete(oldest);
      }
    },
    scores(text) {
      const scores = new Map<string, number>();
      const runs = examples.size;
      if (runs === 0) return scores;
      const add = (feature: string, share: number) => {
        const featureRuns = runsWith.get(feature);
        if (!featureRuns) return;
        const idf = Math.log(1 + runs / featureRuns);
        for (const [tool, used] of usesWith.get(feature) ?? []) {
          scores.set(tool, (scores.get(tool) ?? 0) + (share * weight * idf * used) / (featureRuns + smoothing));
        }
      };
      const textWords = wordsOf(text);
      const own = featuresOf(textWords);
      for (const feature of own) add(feature, 1);
      // words history has not seen borrow what related learned words taught
      if (lexicon && borrow > 0) {
        const present = new Set(own);
        for (const { word, terms: wordTerms } of textWords) {
          if (wordTerms.length === 0 || wordTerms.every((term) => (runsWith.get(term) ?? 0) >= familiarRuns)) continue;
          let features = related.get(word);
          if (!features) {
            features = relatedFeatures(word, lexicon);
            if (related.size >= RELATED_CACHE_LIMIT) related.clear();
            related.set(word, features);
          }
          for (const [feature, share] of features) {
            if (!present.has(feature) && runsWith.has(feature)) add(feature, borrow * share);
          }
        }
      }
      return scores;
    },
    usedWith(tool, minimumShare, minimumRuns = 1) {
      const runs = toolRuns.get(tool) ?? 0;
      const found: string[] = [];
      for (const [other, together] of pairRuns.get(tool) ?? [])
        if (together >= minimumRuns && together >= minimumShare * runs) found.push(other);
      return found.sort();
    },
    get size() {
      return examples.size;
    },
  };
}

/** Particles kept in word pairs although they are stopwords: "call off", "dig up", "back out". */
const PARTICLES = new Set(
  "up off out in on back down over away through along around about forward together".split(" "),
);

/**
 * What the learning counts in a request: its terms as the ranker normalises them (shorthand spelled
 * out, stemmed, irregular pasts as their base), and each pair of neighbouring words once stopwords
 * other than particles are dropped ("drop a line": "drop line"; "call it off": "call off").
 */
export function requestFeatures(text: string): string[] {
  return featuresOf(requestWords(text));
}

function featuresOf(requestWords: RequestWord[]): string[] {
  const features = new Set<string>();
  const kept: string[] = [];
  for (const { word, terms: own } of requestWords) {
    for (const term of own) features.add(term);
    if (own.length > 0) kept.push(own.join(" "));
    else if (PARTICLES.has(word)) kept.push(word);
  }
  for (let i = 0; i + 1 < kept.length; i++) {
    const [first, second] = [kept[i] as string, kept[i + 1] as string];
    if (PARTICLES.has(first) && PARTICLES.has(second)) continue;
    features.add(`${first}+${second}`);
  }
  return [...features];
}

interface RequestWord {
  word: string;
  terms: string[];
}

/** A request's words as written (shorthand spelled out, lowercase), each with its normalised terms. */
function requestWords(text: string): RequestWord[] {
  const found: RequestWord[] = [];
  for (const token of expandShorthand(text)
    .replace(/\S+@\S+|\bhttps?:\/\/\S+/g, " ")
    .toLowerCase()
    .split(/[^\p{L}\p{N}']+/u)) {
    const word = token.replace(/'s$|'/g, "");
    if (word === "" || /^\d+$/.test(word)) continue;
    found.push({ word, terms: terms(irregularBase(word) ?? word) });
  }
  return found;
}

/**
 * The features of the words WordNet relates to a word, each at its best weight by relation and
 * sense: a one-word relative gives its terms, a phrase its word pair ("call off": "call+off").
 */
function relatedFeatures(word: string, lexicon: Lexicon): Map<string, number> {
  const found = new Map<string, number>();
  for (const { word: relatedWord, relation, sense } of lexicon.related(word)) {
    const share = relationWeight(relation, sense);
    const features = requestFeatures(relatedWord);
    const chosen = relatedWord.includes(" ") ? features.filter((feature) => feature.includes("+")) : features;
    for (const feature of chosen) if (share > (found.get(feature) ?? 0)) found.set(feature, share);
  }
  return found;
}
