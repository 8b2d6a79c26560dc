// Text from the model on its way to Slack: links, users and channels stay; no command or
// broadcast survives, however it is written or split across streamed deltas.
import { describe, expect, it } from "vitest";
import { argumentsForDisplay } from "../../../../src/adapters/describe-call.js";
import {
  createMarkdownGuard,
  markdownWithoutBroadcasts,
  mrkdwnText,
  statusText,
  withoutBroadcasts,
} from "../../../../src/adapters/slack/slack-text.js";

const COMMAND = /<!/;

describe("withoutBroadcasts (mrkdwn)", () => {
  it("keeps links, user and channel mentions, and writes every other <...> out as text", () => {
    expect(
      withoutBroadcasts(
        "see <https://example.com/a?b=1&c=2|docs>, <mailto:a@example.com|mail>, <@U123>, <@W0ABC|ann>, <#C0GENERAL|general>",
      ),
    ).toBe(
      "see <https://example.com/a?b=1&c=2|docs>, <mailto:a@example.com|mail>, <@U123>, <@W0ABC|ann>, <#C0GENERAL|general>",
    );
    const hostile = [
      "<!channel>",
      "<!here>",
      "<!everyone>",
      "<!here|here>",
      "<!channel|@channel>",
      "<!subteam^S0123ABC>",
      "<!subteam^S0123ABC|@oncall>",
      "<!date^1700000000^{time}|noon>",
      "<!HERE>",
      "< !here>",
      "<\u200b!here>",
      "<!he\nre>",
      "<https://example.com|<!channel>>",
      "<https://example.com\n!here>",
    ];
    for (const text of hostile) {
      const safe = withoutBroadcasts(text);
      expect(safe, text).not.toMatch(COMMAND);
      expect(safe, text).toContain("&lt;"); // shown as written, not dropped
    }
    expect(withoutBroadcasts("a <!here> b")).toBe("a &lt;!here&gt; b");
  });
});

describe("mrkdwnText (plain text as mrkdwn)", () => {
  it("escapes &, < and > as Slack asks, and nothing else", () => {
    expect(mrkdwnText("calling post(text: <!here> & <@U1> > *x*)")).toBe(
      "calling post(text: &lt;!here&gt; &amp; &lt;@U1&gt; &gt; *x*)",
    );
  });
});

describe("markdown for the streaming API", () => {
  it("defuses commands and broadcast words, and leaves HTML's own <!-- and <!DOCTYPE alone", () => {
    const safe = markdownWithoutBroadcasts(
      "<!here> <!subteam^S1|@team> <\u200b!channel> @everyone @here, @channel! ```html\n<!DOCTYPE html><!-- note -->\n```",
    );
    expect(safe).not.toMatch(/<[\s\p{Cf}]*!(?!DOCTYPE|--)/u);
    expect(safe).not.toMatch(/@(?:everyone|here|channel)\b/);
    expect(safe).toContain("<!DOCTYPE html><!-- note -->");
    expect(safe).toContain("&lt;!here>");
  });

  it("holds back the start of a command until the next delta says what it is", () => {
    const answer = "Ping <!everyone> and <!subteam^S0TEAM|@team>, @here and <@U1>; see <!DOCTYPE html>. The end.";
    // Every way of cutting the answer in two, and in characters one at a time.
    const cuts = [
      ...Array.from({ length: answer.length + 1 }, (_, at) => [answer.slice(0, at), answer.slice(at)]),
      [...answer],
    ];
    for (const deltas of cuts) {
      const guard = createMarkdownGuard();
      const sent = [...deltas.map((delta) => guard.push(delta)), guard.end()];
      const streamed = sent.join("");
      expect(streamed.replace(/&lt;/g, "<").replace(/\u2060/g, "")).toBe(answer); // nothing lost, nothing moved
      expect(streamed).not.toMatch(/<!(?!DOCTYPE)/);
      expect(streamed).not.toMatch(/@here\b/);
    }
  });
});

describe("statusText", () => {
  it("has no angle brackets and no broadcast word", () => {
    expect(statusText("is calling post(text: <!here> @channel)…")).toBe(
      "is calling post(text: ‹!here› @\u2060channel)…",
    );
  });
});

describe("argumentsForDisplay", () => {
  it("leaves no backtick or hidden character, and reads back as the same arguments", () => {
    const args = { text: "```\n<!channel> `x` ``\u200b` \u202eevil\u200d 🎉", nested: [{ "key`": "\u2028\u00a0" }] };
    const shown = argumentsForDisplay(args, 10_000);
    expect(shown).not.toMatch(/[`\u200b\u200d\u202e\u2028\u00a0]/);
    expect(JSON.parse(shown)).toEqual(args);
    const forSlack = argumentsForDisplay(args, 10_000, mrkdwnText);
    expect(forSlack).not.toMatch(/[<>`]/);
    expect(JSON.parse(forSlack.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&"))).toEqual(args);
  });

  it("cuts to the limit without leaving half an escape, and says how much it left out", () => {
    const shown = argumentsForDisplay({ text: "<`".repeat(2_000) }, 101, mrkdwnText);
    const [kept = "", note = ""] = shown.split("\n… ");
    expect(kept.length).toBeLessThanOrEqual(101);
    expect(kept).toMatch(/(?:&lt;|\\u0060)$/);
    expect(note).toMatch(/^\(\d+ more characters\)$/);
  });
});
