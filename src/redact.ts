/**
 * What of a URL may be shown: never its user and password, nor the values of query keys that carry
 * credentials (key, token, password, secret, sig, ...). Every URL that reaches a sentence, a log
 * line or a trace goes through here: a person reads sentences in chat, and settings such as
 * OPENAI_BASE_URL or GLASSBOX_DATABASE_URL may carry a password.
 */

const HIDDEN = "[redacted]";
/** Query keys whose values are credentials, alone or as the last word of a key (api_key, access_token, X-Amz-Signature). */
const SECRET_KEY =
  /(?:^|[_.-])(?:key|apikey|token|password|passwd|pwd|pass|secret|sig|signature|auth|authorization|credentials?|code)$/i;
/** A URL inside free text: a scheme, "//", then up to the next space, quote or bracket. */
const URL_IN_TEXT = /\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>()[\]{}`]+/gi;

/**
 * `url` without its user and password (`keepUser`: without its password only, where the user name
 * helps a person, as for a database login) and with the values of credential query keys hidden.
 */
export function redactUrl(url: string, options: { keepUser?: boolean } = {}): string {
  const match = /^([a-z][a-z0-9+.-]*:\/\/)([^/?#]*)(.*)$/is.exec(url);
  if (!match) return url;
  const [, scheme, authority, rest] = match as unknown as [string, string, string, string];
  const at = authority.lastIndexOf("@");
  const userinfo = authority.slice(0, Math.max(at, 0));
  const user = userinfo.split(":")[0] ?? "";
  const shownUser = at === -1 ? "" : options.keepUser && user ? `${user}@` : `${HIDDEN}@`;
  return `${scheme}${shownUser}${authority.slice(at + 1)}${redactQuery(rest)}`;
}

/** Every URL in `text` as redactUrl shows it. */
export function redactUrlsIn(text: string): string {
  return text.replace(URL_IN_TEXT, redactUrl);
}

function redactQuery(rest: string): string {
  const hash = rest.indexOf("#");
  const beforeHash = hash === -1 ? rest : rest.slice(0, hash);
  const fragment = hash === -1 ? "" : rest.slice(hash);
  const question = beforeHash.indexOf("?");
  if (question === -1) return rest;
  const pairs = beforeHash
    .slice(question + 1)
    .split("&")
    .map((pair) => {
      const equals = pair.indexOf("=");
      if (equals === -1) return pair;
      const key = pair.slice(0, equals);
      let name = key;
      try {
        name = decodeURIComponent(key);
      } catch {
        // a malformed escape: judge the key as written
      }
      return SECRET_KEY.test(name) ? `${key}=${HIDDEN}` : pair;
    });
  return `${beforeHash.slice(0, question)}?${pairs.join("&")}${fragment}`;
}
