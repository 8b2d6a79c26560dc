// What ingress shows of the live workers' tools (src/store/worker-offers.ts): several offers as one,
// each tool once and sorted, suggestions in order without repeats and bounded; a stored offer of the
// wrong shape (or not JSON) offers nothing rather than failing the page.
import { describe, expect, it } from "vitest";
import { mergeOffers, offerOf } from "../../../src/store/worker-offers.js";

describe("workers' offers", () => {
  it("merges several workers' offers: every tool once, sorted; suggestions in order, each once, at most eight", () => {
    const hints = Array.from({ length: 6 }, (_, index) => `Ask ${index}`);
    expect(mergeOffers([])).toEqual({ tools: [], hints: [] });
    expect(
      mergeOffers([
        { tools: ["search", "calculator"], hints: hints.slice(0, 4) },
        { tools: ["calculator", "wipe_cache"], hints: [...hints.slice(2), "Ask 0"] },
      ]),
    ).toEqual({
      tools: ["calculator", "search", "wipe_cache"],
      hints,
    });
    expect(
      mergeOffers([{ tools: [], hints: Array.from({ length: 20 }, (_, index) => `Ask ${index}`) }]).hints,
    ).toHaveLength(8);
  });

  it("reads a stored offer as JSON text or as an object; anything else offers nothing", () => {
    expect(offerOf('{"tools":["calculator"],"hints":["What is 2+2?"]}')).toEqual({
      tools: ["calculator"],
      hints: ["What is 2+2?"],
    });
    expect(offerOf({ tools: ["calculator", 7, null], hints: "not a list" })).toEqual({
      tools: ["calculator"],
      hints: [],
    });
    for (const stored of ["not json", "[1,2]", "null", null, 42, undefined])
      expect(offerOf(stored)).toEqual({ tools: [], hints: [] });
  });
});
