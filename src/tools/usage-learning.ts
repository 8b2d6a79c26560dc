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
 * Deterministic: the same examples in the same order give the same scores.
 */
import { irregularBase } from "./lexicon.js";
import { terms } from "./selection.js";
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
  /** What a learned score is multiplied by before it joins the BM25 score (default 2). */
  weight?: number;
}

export interface UsageLearning {
  /** Adds a past run; a run with no tools teaches only that its words need none. */
  learn(example: UsageExample): void;
  /** Learned scores of the tools associated with a request's words; empty without history. */
  scores(text: string): Map<string, number>;
  /** How many examples are counted now. */
  readonly size: number;
}

const DEFAULT_MAX_RUNS = 5_000;
// Chosen by 5-fold cross-validation on the benchmark's development set (weights 0.25-4, smoothing 0.5-4).
const DEFAULT_SMOOTHING = 2;
const DEFAULT_WEIGHT = 2;
/** A request's features counted at most: a pasted page teaches nothing more than its start. */
const MAX_FEATURES = 80;

interface Counted {
  features: string[];
  tools: string[];
}

export function createUsageLearning(options: UsageLearningOptions = {}): UsageLearning {
  const maxRuns = Math.max(1, options.maxRuns ?? DEFAULT_MAX_RUNS);
  const smoothing = options.smoothing ?? DEFAULT_SMOOTHING;
  const weight = options.weight ?? DEFAULT_WEIGHT;
  // Insertion order is learning order: the first entry is the oldest.
  const examples = new Map<string, Counted>();
  const runsWith = new Map<string, number>();
  const usesWith = new Map<string, Map<string, number>>();
  let unnamed = 0;

  const count = ({ features, tools }: Counted, change: 1 | -1) => {
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
      for (const feature of requestFeatures(text)) {
        const featureRuns = runsWith.get(feature);
        if (!featureRuns) continue;
        const idf = Math.log(1 + runs / featureRuns);
        for (const [tool, used] of usesWith.get(feature) ?? []) {
          scores.set(tool, (scores.get(tool) ?? 0) + (weight * idf * used) / (featureRuns + smoothing));
        }
      }
      return scores;
    },
    get size() {
      return examples.size;
    },
  };
}

/** Particles kept in word pairs although they are stopwords: "call off", "dig up", "back out". */
const PARTICLES = new Set("up off out in on back down over away through along around about forward together".split(" "));

/**
 * What the learning counts in a request: its terms as the ranker normalises them (shorthand spelled
 * out, stemmed, irregular pasts as their base), and each pair of neighbouring words once stopwords
 * other than particles are dropped ("drop a line": "drop line"; "call it off": "call off").
 */
export function requestFeatures(text: string): string[] {
  const plain = expandShorthand(text);
  const features = new Set<string>();
  const kept: string[] = [];
  for (const token of plain.replace(/\S+@\S+|\bhttps?:\/\/\S+/g, " ").toLowerCase().split(/[^\p{L}\p{N}']+/u)) {
    const word = token.replace(/'s$|'/g, "");
    if (word === "" || /^\d+$/.test(word)) continue;
    const own = terms(irregularBase(word) ?? word);
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
