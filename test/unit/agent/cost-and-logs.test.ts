import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { costOf, parsePrices, priceOf } from "../../../src/agent/cost.js";
import { createLogger, redactSecrets } from "../../../src/logger.js";

describe("cost", () => {
  it("prices known models per million tokens, dated versions and provider prefixes included", () => {
    expect(priceOf("gpt-4o-mini")).toEqual({ input: 0.15, cachedInput: 0.075, output: 0.6 });
    expect(priceOf("gpt-4o-2024-08-06")).toEqual(priceOf("gpt-4o"));
    expect(priceOf("gpt-4o-mini-2024-07-18")).toEqual(priceOf("gpt-4o-mini")); // the longest known prefix wins
    expect(priceOf("openai/gpt-4.1-mini")).toEqual(priceOf("gpt-4.1-mini"));
    expect(costOf(priceOf("gpt-4o"), { promptTokens: 1_000_000, completionTokens: 500_000 })).toBeCloseTo(2.5 + 5, 10);
  });

  it("charges cached prompt tokens at the cached price", () => {
    const cost = costOf(priceOf("gpt-4o-mini"), { promptTokens: 2_000, completionTokens: 100, cachedTokens: 1_000 });
    expect(cost).toBeCloseTo((1_000 * 0.15 + 1_000 * 0.075 + 100 * 0.6) / 1e6, 12);
  });

  it("gives an unknown model no price: null, never a made-up zero", () => {
    expect(priceOf("qwen2.5:7b")).toBeNull();
    expect(priceOf("gpt-4omni")).toBeNull(); // a known name must be followed by "-" to count as its version
    expect(costOf(null, { promptTokens: 10, completionTokens: 10 })).toBeNull();
  });

  it("takes overrides and new models from configuration, and says what is wrong with a bad entry", () => {
    const overrides = parsePrices('{"qwen2.5:7b": {"input": 0, "output": 0}, "gpt-4o": {"input": 1, "output": 2}}');
    expect(costOf(priceOf("qwen2.5:7b", overrides), { promptTokens: 5, completionTokens: 5 })).toBe(0);
    expect(priceOf("gpt-4o", overrides)).toEqual({ input: 1, output: 2 });
    expect(() => parsePrices('{"m": {"input": "cheap"}}')).toThrow(/'m' needs numbers "input" and "output"/);
  });
});

describe("logs", () => {
  function capture() {
    const lines: string[] = [];
    const destination = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    return { lines, log: createLogger({ level: "debug", destination }) };
  }

  it("redacts secret fields at any depth", () => {
    const { lines, log } = capture();
    log.info(
      { apiKey: "sk-live-1234567890", config: { botToken: "xoxb-1-2-3", nested: { token: "abc" } } },
      "configured",
    );
    const entry = JSON.parse(lines[0] ?? "{}");
    expect(entry.apiKey).toBe("[redacted]");
    expect(entry.config.botToken).toBe("[redacted]");
    expect(entry.config.nested.token).toBe("[redacted]");
    expect(lines.join("")).not.toContain("sk-live-1234567890");
  });

  it("scrubs tokens that appear inside messages and error text", () => {
    const { lines, log } = capture();
    log.warn(
      { error: "401 for Authorization: Bearer sk-proj-abcdefghijkl" },
      "request failed with key sk-proj-abcdefghijkl and xapp-1-A0-123456789",
    );
    const text = lines.join("");
    expect(text).not.toMatch(/sk-proj-abcdefghijkl|xapp-1-A0-123456789/);
    expect(text).toContain("[redacted]");
    expect(redactSecrets("no secrets here")).toBe("no secrets here");
  });

  it("carries run and session ids as fields", () => {
    const { lines, log } = capture();
    log.child({ runId: "run_1", sessionId: "slack:T:C:1" }).info("step done");
    expect(JSON.parse(lines[0] ?? "{}")).toMatchObject({ runId: "run_1", sessionId: "slack:T:C:1", msg: "step done" });
  });
});
