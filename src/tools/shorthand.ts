/**
 * General English chat shorthand, spelled out before a request is ranked: "pls" is "please",
 * "tmrw" "tomorrow", "1:1" a one-to-one meeting, "db" a database. Everyday abbreviations of team
 * chat only; nothing here names a tool or knows what the tools do.
 */

/** Whole words (lowercase) and what they stand for. */
const SHORTHAND: Record<string, string> = {
  // people and politeness
  u: "you",
  ur: "your",
  ya: "you",
  yall: "you all",
  pls: "please",
  plz: "please",
  thx: "thanks",
  ty: "thank you",
  // time
  tmrw: "tomorrow",
  tmr: "tomorrow",
  tmw: "tomorrow",
  tomoz: "tomorrow",
  "2moro": "tomorrow",
  "2morrow": "tomorrow",
  tdy: "today",
  tonite: "tonight",
  rn: "right now",
  atm: "at the moment",
  asap: "as soon as possible",
  eod: "end of day",
  eow: "end of week",
  eom: "end of month",
  min: "minute",
  mins: "minutes",
  hr: "hour",
  hrs: "hours",
  wk: "week",
  wks: "weeks",
  mo: "month",
  mos: "months",
  yr: "year",
  yrs: "years",
  // work
  mtg: "meeting",
  mtgs: "meetings",
  appt: "appointment",
  appts: "appointments",
  convo: "conversation",
  msg: "message",
  msgs: "messages",
  info: "information",
  prio: "priority",
  mgr: "manager",
  dept: "department",
  acct: "account",
  addr: "address",
  qty: "quantity",
  pto: "paid time off",
  ooo: "out of office",
  wfh: "work from home",
  fyi: "for your information",
  btw: "by the way",
  db: "database",
  dbs: "databases",
  svc: "service",
  svcs: "services",
  prod: "production",
  env: "environment",
  repo: "repository",
  config: "configuration",
  approx: "approximately",
  pic: "picture",
  pics: "pictures",
  // spoken forms
  gonna: "will",
  wanna: "want",
  gotta: "must",
  lemme: "let me",
  gimme: "give me",
  dunno: "do not know",
  cuz: "because",
  coz: "because",
  tho: "though",
};

/** Shorthand written with punctuation: "1:1" (a one-to-one meeting), "w/", "w/o", "b/c". */
const PUNCTUATED: Array<[RegExp, string]> = [
  [/(^|\s)1\s*[:-]\s*1s?(?=$|[\s,.;:!?])/gi, "$1 one-to-one meeting "],
  [/(^|\s)1on1s?(?=$|[\s,.;:!?])/gi, "$1 one-to-one meeting "],
  [/(^|\s)w\/o(?=\s)/gi, "$1without"],
  [/(^|\s)w\/(?=\s)/gi, "$1with"],
  [/(^|\s)b\/c(?=\s)/gi, "$1because"],
];

/** The text with chat shorthand spelled out; everything else is left as it was written. */
export function expandShorthand(text: string): string {
  let expanded = text;
  for (const [pattern, replacement] of PUNCTUATED) expanded = expanded.replace(pattern, replacement);
  return expanded.replace(/[\p{L}\p{N}]+/gu, (word) => SHORTHAND[word.toLowerCase()] ?? word);
}
