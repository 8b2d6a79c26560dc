/**
 * The words a text is read as, for ranking tools and for learning from past runs: lowercased,
 * stopwords left out, each reduced to its stem.
 */

export const STOPWORDS = new Set(
  (
    "a an the and or but if of to in on at by for with from as into onto about than then so not no nor " +
    "is are was were be been being am do does did done have has had having will would can could should shall may might must " +
    "i me my mine we us our you your he him his she her it its they them their this that these those there here " +
    "what which who whom whose when where why how all any some each every both either such same other own " +
    "just also only very too more most much many again still even ever up down out over under " +
    "please pls thanks thank hey hi hello ok okay yes yeah get got want need let like know one"
  ).split(" "),
);

/**
 * Lowercase words with stopwords dropped and a light stemming, so that "orders" finds "order",
 * "cancelled" finds "cancel" and "scheduling" finds "schedule". Names split at _, - and camelCase.
 */
export function terms(text: string): string[] {
  return text
    .replace(/\S+@\S+|\bhttps?:\/\/\S+/g, " ") // addresses and links name things; they do not say what to do
    .replace(/%/g, " percent ")
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .toLowerCase()
    .split(/[^\p{L}\p{N}]+/u)
    .filter((word) => word.length > 1 && !STOPWORDS.has(word) && !/^\d+$/.test(word))
    .map(stem)
    .filter((word) => !STOPWORDS.has(word));
}

const VOWEL = /[aeiouy]/;

/** A light suffix stripper (not Porter): plurals, -ed, -ing, -ation, -ment, -er, a final e, a doubled final consonant. */
export function stem(word: string): string {
  if (word.length === 3 && /[^su]s$/.test(word)) return word.slice(0, 2); // "ids" is "id"
  if (word.length <= 3) return word;
  let stemmed = word;
  const strip = (suffix: string, replacement = "", minimum = 3) => {
    if (!stemmed.endsWith(suffix)) return false;
    const rest = stemmed.slice(0, -suffix.length);
    if (rest.length < minimum || !VOWEL.test(rest)) return false;
    stemmed = rest + replacement;
    return true;
  };
  // plurals
  if (!strip("ies", "y", 2) && !strip("sses", "ss") && !strip("xes", "x", 2) && !/(ss|us|is)$/.test(stemmed))
    strip("s");
  // verb endings
  if (!stemmed.endsWith("eed")) strip("ied", "y", 2) || strip("ed") || strip("ing");
  // a few derivations
  strip("ization", "iz") || strip("ation", "at") || strip("ment") || strip("er", "", 4) || strip("ator", "at", 4);
  if (stemmed.length > 3 && stemmed.endsWith("e")) stemmed = stemmed.slice(0, -1);
  if (/([^aeious])\1$/.test(stemmed)) stemmed = stemmed.slice(0, -1);
  return stemmed;
}
