// Regression: js-tiktoken's byte-pair merge is quadratic on a long piece (a run without spaces:
// 5,000 letters took about 5 s), so one 8,000-letter Slack mention held the event loop and the next
// user's event missed Slack's 3 s acknowledgement. The counter now cuts long pieces into bounded
// chunks and merges them with its own n log n merge; these tests pin what reaches the merge, how
// far a count may drift from the exact one, and that ordinary text still counts exactly as
// js-tiktoken does. Timing belongs to bench/token-counting.ts, not here.
import { Tiktoken } from "js-tiktoken/lite";
import cl100kRanks from "js-tiktoken/ranks/cl100k_base";
import o200kRanks from "js-tiktoken/ranks/o200k_base";
import { beforeAll, describe, expect, it } from "vitest";
import {
  boundedPieces,
  createTokenCounter,
  MAX_PIECE_LENGTH,
  TOKENS_PER_CUT,
  type EncodingName,
  type TokenCounter,
} from "../../../src/agent/tokens.js";
import { seeded } from "../../../src/testing/seeded-random.js";

const ENCODINGS = [
  { name: "o200k_base", ranks: o200kRanks },
  { name: "cl100k_base", ranks: cl100kRanks },
] as const satisfies ReadonlyArray<{ name: EncodingName; ranks: unknown }>;

/** js-tiktoken itself, the reference, and the counter under test, per encoding. */
interface Subject {
  name: EncodingName;
  reference: Tiktoken;
  pattern: RegExp;
  counter: TokenCounter;
}
const subjects: Subject[] = [];
beforeAll(async () => {
  for (const { name, ranks } of ENCODINGS) {
    subjects.push({
      name,
      reference: new Tiktoken(ranks),
      pattern: new RegExp(ranks.pat_str, "gu"),
      counter: await createTokenCounter(name),
    });
  }
});

/** What js-tiktoken counts, with special tokens read as plain text (as the counter does). */
const exactly = (subject: Subject, text: string) => subject.reference.encode(text, [], []).length;

const codePoints = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => String.fromCodePoint(from + i));
/** Random picks from `alphabet` until the text is `length` UTF-16 code units (or one pick over). */
function randomText(alphabet: readonly string[], length: number, seed = 1): string {
  const random = seeded(seed);
  let text = "";
  while (text.length < length) text += alphabet[Math.floor(random() * alphabet.length)];
  return text;
}
const repeated = (unit: string, length: number) => unit.repeat(Math.ceil(length / unit.length)).slice(0, length);

const LETTERS = codePoints(0x61, 0x7a);
const HOSTILE: Array<[string, (length: number) => string]> = [
  ["one repeated letter", (length) => repeated("a", length)],
  ["random letters", (length) => randomText(LETTERS, length)],
  ["random mixed-case letters", (length) => randomText([...LETTERS, ...codePoints(0x41, 0x5a)], length)],
  [
    "base64",
    (length) => randomText([...LETTERS, ...codePoints(0x41, 0x5a), ...codePoints(0x30, 0x39), "+", "/"], length),
  ],
  ["hex", (length) => randomText([...codePoints(0x30, 0x39), ...codePoints(0x61, 0x66)], length)],
  ["CJK", (length) => randomText(codePoints(0x4e00, 0x9fff), length)],
  ["emoji", (length) => randomText(codePoints(0x1f300, 0x1faff), length)],
  ["random punctuation", (length) => randomText([..."!@#$%^&*()-_=+[]{};:,.<>?|~/\\\"`'"], length)],
  ["mixed whitespace", (length) => randomText([" ", "\t", "\n", "\u00a0", "\u3000"], length)],
  [
    "Devanagari",
    (length) =>
      randomText(
        codePoints(0x915, 0x939).flatMap((letter) => [letter, `${letter}\u093e`, `${letter}\u094d`]),
        length,
      ),
  ],
];

/** Pieces a counter with no bound would merge whole: the encoding's own pre-tokenizer pieces. */
const wholePieces = (subject: Subject, text: string) => [...text.matchAll(subject.pattern)].map((match) => match[0]);
const isWellFormed = (text: string) =>
  !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(text);

describe("counts a 40,000-character message without spaces (Slack's limit) in bounded pieces", () => {
  it.each(HOSTILE)("%s: no piece given to the merge is longer than MAX_PIECE_LENGTH", (_, make) => {
    const text = make(40_000);
    for (const subject of subjects) {
      const pieces = [...boundedPieces(text, subject.pattern)];
      expect(pieces.join("")).toBe(text);
      expect(Math.max(...pieces.map((piece) => piece.length))).toBeLessThanOrEqual(MAX_PIECE_LENGTH);
      expect(pieces.every(isWellFormed)).toBe(true);
      // A piece that was cut is cut into full-length chunks (the last one aside).
      const longest = Math.max(...wholePieces(subject, text).map((piece) => piece.length));
      if (longest > MAX_PIECE_LENGTH)
        expect(pieces.filter((piece) => piece.length === MAX_PIECE_LENGTH).length).toBeGreaterThanOrEqual(
          Math.floor(longest / MAX_PIECE_LENGTH) - 1,
        );
    }
  });

  it("cuts a piece only when it is longer than MAX_PIECE_LENGTH", () => {
    for (const subject of subjects) {
      expect([...boundedPieces(repeated("a", MAX_PIECE_LENGTH), subject.pattern)]).toEqual([
        repeated("a", MAX_PIECE_LENGTH),
      ]);
      expect([...boundedPieces(repeated("a", MAX_PIECE_LENGTH + 1), subject.pattern)]).toEqual([
        repeated("a", MAX_PIECE_LENGTH),
        "a",
      ]);
    }
  });

  it("never cuts between the two halves of a surrogate pair", () => {
    // One code unit of punctuation first puts every chunk end in the middle of an emoji.
    const text = `!${"😀".repeat(20_000)}`;
    for (const subject of subjects) {
      expect(wholePieces(subject, text)).toEqual([text]);
      const pieces = [...boundedPieces(text, subject.pattern)];
      expect(pieces.join("")).toBe(text);
      expect(pieces.length).toBeGreaterThan(text.length / MAX_PIECE_LENGTH);
      expect(pieces.every(isWellFormed)).toBe(true);
      expect(pieces.every((piece) => piece.length <= MAX_PIECE_LENGTH)).toBe(true);
    }
  });

  it("counts exactly the bounded pieces, each as js-tiktoken does", () => {
    // Random letters: cutting changes their count, so a counter that merged whole pieces fails here.
    const text = randomText(LETTERS, 1_300, 7);
    for (const subject of subjects) {
      const pieces = [...boundedPieces(text, subject.pattern)];
      const ofPieces = pieces.reduce((sum, piece) => sum + exactly(subject, piece), 0);
      expect(ofPieces).not.toBe(exactly(subject, text));
      expect(subject.counter.text(text)).toBe(ofPieces);
    }
  });
});

describe("a count stays within TOKENS_PER_CUT of the exact count", () => {
  // Sizes where js-tiktoken's exact count is still affordable: two to five cuts each.
  const LENGTHS: Record<string, number> = { CJK: 520, emoji: 520, Devanagari: 520, "mixed whitespace": 800 };
  it.each(HOSTILE.filter(([name]) => !["base64", "hex"].includes(name)))("%s", (name, make) => {
    const text = make(LENGTHS[name] ?? 1_300);
    let mostCuts = 0;
    for (const subject of subjects) {
      const cuts = [...boundedPieces(text, subject.pattern)].length - wholePieces(subject, text).length;
      mostCuts = Math.max(mostCuts, cuts);
      const drift = subject.counter.text(text) - exactly(subject, text);
      expect(drift).toBeGreaterThanOrEqual(TOKENS_PER_CUT.fewest * cuts);
      expect(drift).toBeLessThanOrEqual(TOKENS_PER_CUT.most * cuts);
    }
    // Mixed case and Devanagari make long pieces in one of the two encodings only.
    expect(mostCuts).toBeGreaterThanOrEqual(2);
  });
});

describe("ordinary text counts exactly as js-tiktoken does, in both encodings", () => {
  const ORDINARY = [
    "Hey @channel, the deploy to eu-west-1 finished at 14:05 UTC :tada: — see https://status.example.com/incidents/2024-11-30?tab=timeline#details",
    "Could you check order A-1042 and tell me whether it shipped? I've been waiting since Monday, and they're saying it's lost.",
    'export async function fetchOrders(userId: string): Promise<Order[]> {\n  const response = await fetch(`/api/orders?user=${userId}`);\n  if (!response.ok) throw new Error("HTTP " + response.status);\n  return (await response.json()) as Order[];\n}\n',
    '{"city":"Paris","unit":"celsius","days":[1,2,3],"nested":{"ok":true,"ratio":0.125,"note":null}}',
    "| name | qty | price |\n|------|----:|------:|\n| bolts | 1200 | 0.05 |\n| nuts | 800 | 0.04 |\n\n- [x] done\n- [ ] todo",
    "我们的会议改到明天下午三点，请大家准时参加。如果有问题，请在群里留言，谢谢！",
    "明日の会議は午後三時からです。資料は共有フォルダにあります。よろしくお願いします。",
    "내일 회의는 오후 세 시에 시작합니다. 자료는 공유 폴더에 있습니다.",
    "مرحبا بكم في فريق الدعم، كيف يمكننا مساعدتك اليوم؟",
    "कल की बैठक दोपहर तीन बजे शुरू होगी। कृपया समय पर आएँ।",
    "Die Donaudampfschifffahrtsgesellschaftskapitänsmütze liegt auf dem Tisch.",
    "Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο.",
    "Thanks!! 🙏🏽 👩‍👩‍👧‍👦 family photo 📸 ❤️‍🔥 soon…",
    "TypeError: Cannot read properties of undefined (reading 'map')\n    at render (/app/src/components/List.tsx:42:17)\n    at processChild (node_modules/react-dom/cjs/react-dom.development.js:3991:14)",
    "sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08, token eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0",
    "Total: 1,234,567.89 EUR on 2025-01-31; ratio 3.14159265358979; phone +44 20 7946 0958",
    "Special-token text such as <|endoftext|> and <|im_start|> is counted as the plain text it is.",
    "\t\tindented\n\n\n   trailing spaces   \r\n\r\nwindows lines\u00a0and\u3000wide spaces ",
    `${repeated("x", MAX_PIECE_LENGTH)} is one piece exactly at the limit`,
  ];

  it.each(ORDINARY)("%j", (text) => {
    for (const subject of subjects) {
      expect(subject.counter.text(text)).toBe(exactly(subject, text));
      expect(subject.counter.text(text)).toBe(exactly(subject, text)); // and again, from the cache
    }
  });

  it("counts 300 seeded texts mixing scripts, symbols and emoji exactly", () => {
    const random = seeded(42);
    const ranges = [
      [0x20, 0x7e],
      [0xa0, 0x24f],
      [0x370, 0x4ff],
      [0x590, 0x6ff],
      [0x900, 0x97f],
      [0xe00, 0xe7f],
      [0x3040, 0x30ff],
      [0x4e00, 0x9fff],
      [0xac00, 0xd7a3],
      [0x1f300, 0x1faff],
      [0x2000, 0x206f],
      [0x300, 0x36f],
    ] as const;
    const sample = () => {
      let text = "";
      while (text.length < 20 + random() * 300) {
        const [from, to] = ranges[Math.floor(random() * ranges.length)] ?? [0x61, 0x7a];
        for (let i = 1 + Math.floor(random() * 12); i > 0; i--)
          text += String.fromCodePoint(from + Math.floor(random() * (to - from + 1)));
        text += random() < 0.3 ? " " : random() < 0.1 ? "\n" : random() < 0.05 ? "'s " : "";
      }
      return text;
    };
    let compared = 0;
    for (let i = 0; i < 300; i++) {
      const text = sample();
      for (const subject of subjects) {
        if (wholePieces(subject, text).some((piece) => piece.length > MAX_PIECE_LENGTH)) continue;
        expect(subject.counter.text(text)).toBe(exactly(subject, text));
        compared++;
      }
    }
    expect(compared).toBeGreaterThan(500);
  });
});
