/**
 * The words a fact search looks for, and the words a fact is found by, for a store whose full-text
 * index does not tokenize like SQLite's FTS5 (PostgreSQL's parser keeps an e-mail address or a URL
 * whole). Both sides go through the same split: runs of letters and digits, lowercased, diacritics
 * removed (as FTS5's unicode61 does). The query side drops common words, as the SQLite store does.
 */

/** The words of free text to search for: each at least two letters, no common words, at most 32. */
export function queryWords(text: string): string[] {
  const words = (plain(text).match(/[\p{L}\p{N}]{2,}/gu) ?? []).filter((word) => !STOPWORDS.has(word));
  return [...new Set(words)].slice(0, 32);
}

/** A fact's words as the index keeps them, separated by spaces. */
export function indexedText(content: string): string {
  return (plain(content).match(/[\p{L}\p{N}]+/gu) ?? []).join(" ");
}

function plain(text: string): string {
  return text.normalize("NFKD").replace(/\p{M}/gu, "").toLowerCase();
}

// Words that match nearly every fact; searching on them would inject barely relevant ones (the
// same list as the SQLite store's).
const STOPWORDS = new Set(
  "a an and are as at be but by can could did do does for from had has have he her his how i if in is it its me my of on or our she so that the their them they this to was we were what when where which who why will with would you your please".split(
    " ",
  ),
);
