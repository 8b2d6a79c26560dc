// GLASSBOX_RETENTION_DAYS: whole days above 0, or unset to keep every conversation. Anything else
// (0, which some read as "keep" and others as "remove all", a negative, a word, a fraction) stops the
// start with one sentence naming the value and what to set.
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";

const sentence = (value: string) =>
  `GLASSBOX_RETENTION_DAYS is '${value}'; set it to a whole number of days above 0 (such as 90), ` +
  "or leave it unset to keep every conversation.";

describe("GLASSBOX_RETENTION_DAYS", () => {
  it("keeps every conversation when unset or blank", () => {
    expect(loadConfig({}).retentionDays).toBeUndefined();
    expect(loadConfig({ GLASSBOX_RETENTION_DAYS: "  " }).retentionDays).toBeUndefined();
  });

  it("takes a whole number of days", () => {
    expect(loadConfig({ GLASSBOX_RETENTION_DAYS: "90" }).retentionDays).toBe(90);
    expect(loadConfig({ GLASSBOX_RETENTION_DAYS: " 1 " }).retentionDays).toBe(1);
  });

  it.each(["0", "-30", "ninety", "90d", "1.5", "0.5", "Infinity"])("refuses '%s' with one sentence", (value) => {
    let message: string | undefined;
    try {
      loadConfig({ GLASSBOX_RETENTION_DAYS: value });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toBe(sentence(value));
  });
});
