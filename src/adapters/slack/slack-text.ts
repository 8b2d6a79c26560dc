/**
 * Text for Slack from sources nobody vouches for (the model's answer, tool arguments, tool names):
 * it may format and link, and never broadcasts. Slack reads `<...>` as a command (`<!channel>`,
 * `<!here>`, `<!everyone>`, `<!subteam^ID>` for a user group, `<!date^...>`), a link, a user or a
 * channel, and asks for `&`, `<` and `>` to be sent as `&amp;`, `&lt;` and `&gt;` wherever they
 * are not meant that way (api.slack.com/reference/surfaces/formatting#escaping). Plain `@here`
 * is only text in mrkdwn (chat.postMessage parses nothing unless given `link_names` or
 * `parse=full`, which the bot never sends).
 *
 * User mentions (`<@U123>`) written by the model stay: Slack cannot name a person without
 * mentioning them, answers often quote who said what, and one person pinged is a nuisance, not a
 * broadcast. Discord, which can, shows them without a ping.
 */

/** What may stay in angle brackets in mrkdwn: a link, a user, a channel. No `<!...>` command. */
const POINTER = /^(?:(?:https?|mailto):[^|\s]*|@[UW][A-Z0-9]+|#[CG][A-Z0-9]+)(?:\|[^]*)?$/;

/**
 * mrkdwn (a converted answer, an error) with every `<...>` that only points somewhere kept, and the
 * rest shown as text; `alsoKeep` keeps the bot's own commands of a kind (a user group it names).
 */
export function withoutBroadcasts(mrkdwn: string, alsoKeep?: RegExp): string {
  return mrkdwn.replace(/<([^<>]*)>/g, (token, inner: string) =>
    POINTER.test(inner) || alsoKeep?.test(inner) ? token : `&lt;${inner}&gt;`,
  );
}

/** Plain text (a tool call, an argument) as mrkdwn that shows exactly it. */
export function mrkdwnText(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

// Slack does not document how its markdown (markdown_text) reads commands, entities or a plain
// @here, so those get the most cautious form: no `<` before a `!` (invisible characters between
// them included), no plain broadcast word. HTML's own `<!--`, `<!DOCTYPE` and `<![CDATA[` stay,
// so HTML in a code block reads as written.
const MARKDOWN_COMMAND = /<(?=[\s\p{Cf}]*![\s\p{Cf}]*(?!--|\[CDATA\[|doctype\b))/giu;
const BROADCAST_WORD = /@(?=(?:channel|here|everyone)\b)/gi;
const WORD_JOINER = "\u2060"; // invisible, and keeps "@here" from reading as one word

/** Markdown for Slack's streaming API with no command and no broadcast word. */
export function markdownWithoutBroadcasts(markdown: string): string {
  return markdown.replace(MARKDOWN_COMMAND, "&lt;").replace(BROADCAST_WORD, `@${WORD_JOINER}`);
}

/** The end of a streamed text that the next delta could still turn into a command or a broadcast word. */
const OPEN_TAIL = /(?:<[\s\p{Cf}]*(?:![\s\p{Cf}]*[\w[-]{0,8})?|@\w{0,8})$/iu;

/**
 * Deltas of a streamed answer, made safe as they go: a tail that may be the start of `<!here>` or
 * `@here` waits for the next delta (or the end), so no command is ever split past the check.
 */
export function createMarkdownGuard(): { push(delta: string): string; end(): string } {
  let held = "";
  return {
    push(delta) {
      const text = held + delta;
      const tail = OPEN_TAIL.exec(text);
      held = tail ? tail[0] : "";
      return markdownWithoutBroadcasts(tail ? text.slice(0, tail.index) : text);
    },
    end() {
      const rest = held;
      held = "";
      return markdownWithoutBroadcasts(rest);
    },
  };
}

/** An assistant status (Slack does not say whether it reads mrkdwn): no angle brackets, no broadcast word. */
export function statusText(text: string): string {
  return text.replace(/</g, "‹").replace(/>/g, "›").replace(BROADCAST_WORD, `@${WORD_JOINER}`);
}
