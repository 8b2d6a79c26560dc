// The shortcut for plain one-line answers must say exactly what the converter would.
import slackifyMarkdown from "slackify-markdown";
import { describe, expect, it } from "vitest";
import { mrkdwnOf } from "../../../../src/adapters/slack/slack-surface.js";

describe("mrkdwnOf", () => {
  it("gives a plain line back as the converter would", () => {
    for (const line of [
      "Thread 42: it is time for an answer.",
      "Hello, world! 50% off; (see below) 3.5 + 2 = 5.5",
      "Price: $5 — ok?",
      "It is 10:30 in Tokyo.",
      "x = 1 - 2",
    ]) {
      expect(mrkdwnOf(line)).toBe(slackifyMarkdown(line).trimEnd());
    }
  });

  it("converts anything markdown or Slack would read differently", () => {
    const cases: Array<[string, RegExp]> = [
      ["Your order was **delivered**.", /\*delivered\*/],
      ["see [tracking](https://example.com/t)", /<https:\/\/example\.com\/t\|tracking>/],
      ["1. first", /1\./],
      ["- item", /•/],
      ["fish & chips <3", /&amp;.*&lt;3/],
      ["use `npm test`", /`npm test`/],
      ["one\ntwo", /one\ntwo/],
    ];
    for (const [markdown, expected] of cases) {
      expect(mrkdwnOf(markdown)).toBe(slackifyMarkdown(markdown));
      expect(mrkdwnOf(markdown)).toMatch(expected);
    }
  });
});
