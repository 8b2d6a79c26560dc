/**
 * How a reply's length limit (GLASSBOX_MAX_OUTPUT_TOKENS) is sent. OpenAI's own API takes
 * `max_completion_tokens` (its reasoning models refuse `max_tokens`); other servers take `max_tokens`,
 * the older name. A server that refuses the name it was sent (a reasoning model behind another
 * address, such as Azure's; a server that does not know the newer name) is sent the other one.
 */
import { detailsOf } from "./capabilities.js";

export type OutputLimitName = "max_tokens" | "max_completion_tokens";

/** The name to send first: by the server's address, OpenAI's hosts taking the newer one. */
export function outputLimitNameFor(baseURL: string): OutputLimitName {
  let host = "";
  try {
    host = new URL(baseURL).hostname;
  } catch {
    // not a URL the SDK could use either; the request fails on its own
  }
  return /(^|\.)openai\.com$/i.test(host) ? "max_completion_tokens" : "max_tokens";
}

export const otherLimitName = (name: OutputLimitName): OutputLimitName =>
  name === "max_tokens" ? "max_completion_tokens" : "max_tokens";

/**
 * Whether `error` is the server refusing the limit's name `sent` (not its value): a 400 that names it
 * as unsupported or unknown. OpenAI: "Unsupported parameter: 'max_tokens' is not supported with this
 * model. Use 'max_completion_tokens' instead." (param max_tokens, code unsupported_parameter); an older
 * Azure API version: "Unrecognized request argument supplied: max_completion_tokens".
 */
export function refusesLimitName(error: unknown, sent: OutputLimitName): boolean {
  const details = detailsOf(error);
  if (details?.status !== 400) return false;
  // The field the error names, where it names one: OpenAI's refusal of max_tokens mentions the other name too.
  const named = details.param ? details.param === sent : new RegExp(`(?<![\\w])${sent}(?![\\w])`).test(details.message);
  const refused =
    /^(unsupported_parameter|unknown_parameter)$/.test(String(details.code ?? "")) ||
    /unsupported parameter|not supported|unrecognized request argument|unknown (parameter|field|name)|extra inputs are not permitted/i.test(
      details.message,
    );
  return named && refused;
}
