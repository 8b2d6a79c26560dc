// The compact rank table read straight from js-tiktoken's rank files: every token's rank is the one
// js-tiktoken's own Tiktoken gives it, the load-time probe's counts are js-tiktoken's, and a rank
// file of another shape is refused rather than read into wrong counts.
import { Tiktoken } from "js-tiktoken/lite";
import cl100kRanks from "js-tiktoken/ranks/cl100k_base";
import o200kRanks from "js-tiktoken/ranks/o200k_base";
import { describe, expect, it } from "vitest";
import { rankTableOf } from "../../../src/agent/token-ranks.js";
import { PROBE, PROBE_TOKENS } from "../../../src/agent/tokens.js";

describe.each([
  ["o200k_base", o200kRanks],
  ["cl100k_base", cl100kRanks],
] as const)("%s", (name, file) => {
  const reference = new Tiktoken(file);
  const table = rankTableOf(file, "malformed");

  it("gives every token js-tiktoken's rank, and no rank to bytes that are not a token", () => {
    const rankMap = (reference as unknown as { rankMap: Map<string, number> }).rankMap;
    expect(table.size).toBe(rankMap.size);
    let wrong = 0;
    for (const [key, rank] of rankMap) {
      const bytes = Uint8Array.from(key.split(",").map(Number));
      if (table.rank(bytes, 0, bytes.length) !== rank) wrong++;
    }
    expect(wrong).toBe(0);
    // "hello" followed by 300 bytes of 0xff is no token; neither is a slice that ends mid-token.
    const notToken = new Uint8Array([104, 101, 108, 108, 111, ...new Array(300).fill(0xff)]);
    expect(table.rank(notToken, 0, notToken.length)).toBe(-1);
    const hello = new TextEncoder().encode("xhellox");
    expect(table.rank(hello, 1, 6)).toBe(rankMap.get("104,101,108,108,111"));
  });

  it("knows the probe's count as js-tiktoken gives it", () => {
    expect(PROBE_TOKENS[name]).toBe(reference.encode(PROBE, [], []).length);
  });
});

describe("a rank file of another shape", () => {
  it.each([
    ["a rank that is not a number", "! x IQ== Ig==\n"],
    ["a token that is not base64", "! 0 I*Q==\n"],
    ["a line without ranks", "!\n"],
    ["no tokens at all", ""],
  ])("is refused: %s", (_, bpe_ranks) => {
    expect(() => rankTableOf({ pat_str: ".", bpe_ranks }, "malformed")).toThrow("malformed");
  });
});
