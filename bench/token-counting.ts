/**
 * Token counting on hostile input (src/agent/tokens.ts): js-tiktoken's byte-pair merge is
 * quadratic on a long piece (a run without spaces), so one 8,000-letter Slack mention once held the
 * event loop for seconds.
 *
 * 1. Time: counter.text() on 40,000 UTF-16 code units (Slack's limit) of each input class, in both
 *    encodings, with a fresh counter each round (cold piece and pair caches); ordinary English and
 *    Chinese prose as the baseline. The figure that matters is the worst case over all classes.
 * 2. Accuracy: where a class makes pieces long enough to be cut, its count against js-tiktoken's
 *    exact count, at a length where the exact count is still affordable (it is the slow part).
 * 3. The old behaviour as a same-run baseline: js-tiktoken's encode() on 5,000 random letters (one
 *    piece, one run: it takes seconds), against the counter on the same text.
 */
import { Tiktoken } from "js-tiktoken/lite";
import cl100kRanks from "js-tiktoken/ranks/cl100k_base";
import o200kRanks from "js-tiktoken/ranks/o200k_base";
import {
  boundedPieces,
  createTokenCounter,
  MAX_PIECE_LENGTH,
  TOKENS_PER_CUT,
  type EncodingName,
} from "../src/agent/tokens.js";
import { collectGarbage, sig3, statsOf, type Benchmark, type Row, type Stats, type Target } from "./measure.js";
import { seeded } from "../src/testing/seeded-random.js";

/** Slack's limit on a message's text. */
const LENGTH = 40_000;
/** Median of 5 by default; BENCH_ROUNDS=15 steadies the figures on a busy machine. */
const MEASURED_ROUNDS = Number(process.env.BENCH_ROUNDS) || 5;
/** "At most tens of milliseconds" a message, whatever it holds; Slack wants its ack within 3 s. */
const TARGET_WORST_MS = 100;
/** Exact counts by js-tiktoken cost about the square of a piece's bytes: 2,000 one-byte characters take ~0.3 s. */
const ACCURACY_LENGTH_ONE_BYTE = 2_000;
const ACCURACY_LENGTH_MULTIBYTE = 1_000;
const OLD_BASELINE_LENGTH = 5_000;

const ENCODINGS = [
  { name: "o200k_base", ranks: o200kRanks },
  { name: "cl100k_base", ranks: cl100kRanks },
] as const satisfies ReadonlyArray<{ name: EncodingName; ranks: unknown }>;

// ---- inputs ------------------------------------------------------------------------------------

const codePoints = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => String.fromCodePoint(from + i));
/** Random picks from `alphabet` up to `length` code units (a last pick that would split a pair is left off). */
function randomText(alphabet: readonly string[], length: number): string {
  const random = seeded(length);
  let text = "";
  for (;;) {
    const next = alphabet[Math.floor(random() * alphabet.length)] ?? "";
    if (text.length + next.length > length) return text;
    text += next;
  }
}
const repeated = (unit: string, length: number) => unit.repeat(Math.floor(length / unit.length));

const LETTERS = codePoints(0x61, 0x7a);
const COMMON_HANZI = [
  ..."的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运武半候七必城父强步完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱党倒未持取设始版双历越史商千片容研像找友孩站广改议形委早房音火际则首单据导影失拿网香似斯专石若兵弟谁校读志飞观争究包组造落视济喜离虽坏兴",
];
const WORDS =
  "the a of to in and is it that for on with as was at by this be are from or have an they which you one we all there can when your their said if do will each about how up out them then she many some so these would other into has more her two like him see time could no make than first been its who now people my made over did down only way find use may water long little very after words called just where most know get through back much before go good new write our used me man too any day same right look think also around another came come work three word must because does part even place well such here take why help put different away again off went old number great tell men say small every found still between name should home big give air line set own under read last never us left end along while might next sound below saw something thought both few those always looked show large often together asked house world going want school important until form food keep children feet land side without boy once animal life enough took sometimes four head above kind began almost live page got earth need far hand high year mother light parts country father let night following picture being study second eyes soon times story boys since white days ever paper hard near sentence better best across during today others however sure means knew try told young miles sun ways thing whole hear example heard several change answer room sea against top turned learn point city play toward five using himself usually".split(
    " ",
  );

function englishProse(length: number): string {
  const random = seeded(7);
  let text = "";
  while (text.length < length) {
    const words = Array.from(
      { length: 6 + Math.floor(random() * 14) },
      () => WORDS[Math.floor(random() * WORDS.length)] ?? "the",
    );
    const sentence = words.join(" ");
    text += `${sentence[0]?.toUpperCase() ?? ""}${sentence.slice(1)}${random() < 0.2 ? "?" : random() < 0.1 ? "!" : "."} ${random() < 0.15 ? "\n\n" : ""}`;
  }
  return text.slice(0, length);
}

function chineseProse(length: number): string {
  const random = seeded(11);
  let text = "";
  while (text.length < length) {
    for (let i = 4 + Math.floor(random() * 20); i > 0; i--)
      text += COMMON_HANZI[Math.floor(random() * COMMON_HANZI.length)] ?? "的";
    text += random() < 0.6 ? "，" : random() < 0.8 ? "。" : random() < 0.5 ? "？" : "！\n";
  }
  return text.slice(0, length);
}

interface Input {
  name: string;
  make: (length: number) => string;
  /** Two or more UTF-8 bytes a character, so its exact count is measured on a shorter text. */
  multibyte?: boolean;
  baseline?: boolean;
}

const INPUTS: Input[] = [
  { name: "ordinary English prose", make: englishProse, baseline: true },
  { name: "ordinary Chinese prose", make: chineseProse, multibyte: true, baseline: true },
  { name: "one repeated letter", make: (length) => repeated("a", length) },
  { name: "random letters", make: (length) => randomText(LETTERS, length) },
  { name: "random mixed-case letters", make: (length) => randomText([...LETTERS, ...codePoints(0x41, 0x5a)], length) },
  { name: "camelCase run", make: (length) => repeated("camelCaseRun", length) },
  {
    name: "base64",
    make: (length) => randomText([...LETTERS, ...codePoints(0x41, 0x5a), ...codePoints(0x30, 0x39), "+", "/"], length),
  },
  { name: "hex", make: (length) => randomText([...codePoints(0x30, 0x39), ...codePoints(0x61, 0x66)], length) },
  { name: "digits", make: (length) => randomText(codePoints(0x30, 0x39), length) },
  { name: "random CJK", make: (length) => randomText(codePoints(0x4e00, 0x9fff), length), multibyte: true },
  { name: "common CJK, no punctuation", make: (length) => randomText(COMMON_HANZI, length), multibyte: true },
  { name: "random emoji", make: (length) => randomText(codePoints(0x1f300, 0x1faff), length), multibyte: true },
  { name: "ZWJ family emoji", make: (length) => repeated("👩‍👩‍👧‍👦", length), multibyte: true },
  { name: "one repeated punctuation mark", make: (length) => repeated("!", length) },
  { name: "random punctuation", make: (length) => randomText([...'!@#$%^&*()-_=+[]{};:,.<>?|~/\\"`'], length) },
  { name: "apostrophes and contractions", make: (length) => repeated("'ll's'", length) },
  { name: "spaces", make: (length) => repeated(" ", length) },
  {
    name: "mixed whitespace",
    make: (length) => randomText([" ", "\t", "\n", "\u00a0", "\u3000"], length),
    multibyte: true,
  },
  {
    name: "Devanagari with marks",
    make: (length) =>
      randomText(
        codePoints(0x915, 0x939).flatMap((letter) => [letter, `${letter}\u093e`, `${letter}\u094d`]),
        length,
      ),
    multibyte: true,
  },
  { name: "Thai", make: (length) => randomText(codePoints(0xe01, 0xe2e), length), multibyte: true },
  { name: "combining marks on a letter", make: (length) => repeated("e\u0301\u0302", length), multibyte: true },
];

// ---- the benchmark -----------------------------------------------------------------------------

interface Timing {
  input: string;
  encoding: EncodingName;
  ms: Stats;
  tokens: number;
}

interface Accuracy {
  input: string;
  encoding: EncodingName;
  length: number;
  cuts: number;
  counted: number;
  exact: number;
}

const benchmark: Benchmark = {
  name: "token-counting",
  title: `token counting on hostile input: ${INPUTS.length} classes of ${LENGTH.toLocaleString("en")} characters`,
  async run() {
    const timings: Timing[] = [];
    for (const input of INPUTS) {
      const text = input.make(LENGTH);
      for (const { name } of ENCODINGS)
        timings.push({ input: input.name, encoding: name, ...(await timeCounting(name, text)) });
    }

    // js-tiktoken's own encoders only now: two more rank tables in the heap make every collection
    // during the timings above slower (up to 2-3x on short pieces), which a deployment does not pay.
    const references = new Map(
      ENCODINGS.map(({ name, ranks }) => [
        name,
        { tiktoken: new Tiktoken(ranks), pattern: new RegExp(ranks.pat_str, "gu") },
      ]),
    );
    const accuracy: Accuracy[] = [];
    for (const input of INPUTS.filter((candidate) => !candidate.baseline)) {
      const length = input.multibyte ? ACCURACY_LENGTH_MULTIBYTE : ACCURACY_LENGTH_ONE_BYTE;
      const text = input.make(length);
      for (const { name } of ENCODINGS) {
        const reference = references.get(name);
        if (!reference) continue;
        const cuts = [...boundedPieces(text, reference.pattern)].length - [...text.matchAll(reference.pattern)].length;
        if (cuts === 0) continue; // no piece that long: counted exactly, nothing to measure
        const counter = await createTokenCounter(name);
        accuracy.push({
          input: input.name,
          encoding: name,
          length,
          cuts,
          counted: counter.text(text),
          exact: reference.tiktoken.encode(text, [], []).length,
        });
      }
    }

    // Ordinary text must count exactly what js-tiktoken counts.
    const ordinary = await Promise.all(
      INPUTS.filter((input) => input.baseline).flatMap((input) =>
        ENCODINGS.map(async ({ name }) => {
          const text = input.make(LENGTH);
          const counted = (await createTokenCounter(name)).text(text);
          return {
            input: input.name,
            encoding: name,
            counted,
            exact: references.get(name)?.tiktoken.encode(text, [], []).length,
          };
        }),
      ),
    );

    // The old behaviour, once: the whole piece into js-tiktoken's merge.
    const oldText = randomText(LETTERS, OLD_BASELINE_LENGTH);
    collectGarbage();
    let started = performance.now();
    references.get("o200k_base")?.tiktoken.encode(oldText, [], []);
    const oldMs = performance.now() - started;
    const newCounter = await createTokenCounter("o200k_base");
    collectGarbage();
    started = performance.now();
    newCounter.text(oldText);
    const newMs = performance.now() - started;

    return report(timings, accuracy, ordinary, { oldMs, newMs });
  },
};
export default benchmark;

/** One warm-up round, then the measured ones; each with a fresh counter, so its caches start empty. */
async function timeCounting(encoding: EncodingName, text: string): Promise<{ ms: Stats; tokens: number }> {
  const runs: number[] = [];
  let tokens = 0;
  for (let round = 0; round < 1 + MEASURED_ROUNDS; round++) {
    const counter = await createTokenCounter(encoding);
    collectGarbage();
    const started = performance.now();
    tokens = counter.text(text);
    const ms = performance.now() - started;
    if (round > 0) runs.push(ms);
  }
  return { ms: statsOf(runs), tokens };
}

function report(
  timings: Timing[],
  accuracy: Accuracy[],
  ordinary: Array<{ input: string; encoding: EncodingName; counted: number; exact: number | undefined }>,
  old: { oldMs: number; newMs: number },
) {
  const short = (encoding: EncodingName) => encoding.replace("_base", "");
  // Per class, the slower of the two encodings.
  const slowest = INPUTS.map((input) => {
    const both = timings.filter((timing) => timing.input === input.name);
    return both.reduce((slower, timing) => (timing.ms.median > slower.ms.median ? timing : slower));
  });
  const worst = slowest.reduce((slower, timing) => (timing.ms.median > slower.ms.median ? timing : slower));
  const drifts = accuracy.map((entry) => ({ ...entry, perCut: (entry.counted - entry.exact) / entry.cuts }));
  const withinBound = drifts.every(
    (entry) =>
      entry.counted - entry.exact >= TOKENS_PER_CUT.fewest * entry.cuts &&
      entry.counted - entry.exact <= TOKENS_PER_CUT.most * entry.cuts,
  );
  const largestDrift = drifts.reduce((largest, entry) =>
    Math.abs(entry.perCut) > Math.abs(largest.perCut) ? entry : largest,
  );
  const largestShare = Math.max(...drifts.map((entry) => Math.abs(entry.counted - entry.exact) / entry.exact));
  const ordinaryExact = ordinary.every((entry) => entry.counted === entry.exact);

  const rows: Row[] = [
    { label: `worst case: ${worst.input} (${short(worst.encoding)})`, value: worst.ms, unit: "ms" },
    ...slowest.map(
      (timing): Row => ({
        label: `  ${timing.input} (${short(timing.encoding)}, ${timing.tokens} tokens)`,
        value: timing.ms,
        unit: "ms",
      }),
    ),
    {
      label: `count - exact, largest per cut: ${largestDrift.input} (${short(largestDrift.encoding)}, ${largestDrift.cuts} cuts in ${largestDrift.length})`,
      value: largestDrift.perCut,
      unit: "tokens",
    },
    { label: "count - exact, largest share of the exact count (any class)", value: largestShare * 100, unit: "%" },
    {
      label: `old: js-tiktoken encode(), ${OLD_BASELINE_LENGTH.toLocaleString("en")} random letters (1 run)`,
      value: old.oldMs,
      unit: "ms",
    },
    { label: "  the counter on the same text (1 run)", value: old.newMs, unit: "ms" },
    { label: "  old / new", value: old.oldMs / old.newMs, unit: "x" },
  ];
  const targets: Target[] = [
    {
      label: `any ${LENGTH.toLocaleString("en")}-character message <= ${TARGET_WORST_MS} ms to count`,
      pass: worst.ms.median <= TARGET_WORST_MS,
      detail: `worst ${sig3(worst.ms.median)} ms (${worst.input}, ${worst.encoding}); ordinary English ${sig3(slowest[0]?.ms.median ?? NaN)} ms, Chinese ${sig3(slowest[1]?.ms.median ?? NaN)} ms; the old whole-piece merge took ${sig3(old.oldMs)} ms for ${OLD_BASELINE_LENGTH.toLocaleString("en")} letters`,
    },
    {
      label: `counts within ${TOKENS_PER_CUT.fewest}..+${TOKENS_PER_CUT.most} tokens per cut of the exact count`,
      pass: withinBound,
      detail: drifts
        .map(
          (entry) =>
            `${entry.input} ${short(entry.encoding)} ${entry.counted - entry.exact >= 0 ? "+" : ""}${entry.counted - entry.exact}/${entry.cuts}`,
        )
        .join(", "),
    },
    {
      label: "ordinary text counts exactly as js-tiktoken",
      pass: ordinaryExact,
      detail: ordinary
        .map((entry) => `${entry.input} ${short(entry.encoding)} ${entry.counted} vs ${entry.exact}`)
        .join(", "),
    },
  ];
  return {
    notes: [
      `each class: ${LENGTH.toLocaleString("en")} UTF-16 code units, counter.text() with a fresh counter per round (cold caches); 1 warm-up + ${MEASURED_ROUNDS} rounds; each row shows the slower of o200k_base and cl100k_base`,
      `pieces longer than ${MAX_PIECE_LENGTH} code units are cut; accuracy against js-tiktoken's exact count at ${ACCURACY_LENGTH_ONE_BYTE.toLocaleString("en")} characters (${ACCURACY_LENGTH_MULTIBYTE.toLocaleString("en")} for multibyte classes), for classes that make pieces that long`,
    ],
    rows,
    targets,
    data: {
      length: LENGTH,
      maxPieceLength: MAX_PIECE_LENGTH,
      tokensPerCut: TOKENS_PER_CUT,
      measuredRounds: MEASURED_ROUNDS,
      timings,
      accuracy,
      ordinary,
      oldBaseline: { length: OLD_BASELINE_LENGTH, ...old },
    },
  };
}
