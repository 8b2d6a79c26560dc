// Who a message from the bot would notify, as the platforms read it: the fakes record it with every
// call, so tests can assert that nothing the model wrote reaches many people.

const arr = (v: unknown): unknown[] | undefined => (Array.isArray(v) ? v : undefined);

// ---- Slack -----------------------------------------------------------------------------------

// Slack's special mentions that notify many (a user group too); `<!date^...>` and `<@U...>` do not.
const SPECIAL_MENTION = /<!(?:channel|here|everyone|group|subteam\^[^|>]*)(?:\|[^>]*)?>/gi;
const BROADCAST_WORD = /(?<!\w)@(?:channel|here|everyone)\b/gi;
const UNCLEAR_FIELDS = new Set(["markdown_text", "chunks", "status", "loading_messages"]);

/** Every broadcast in a call's strings; plain words count where Slack reads (or may read) them. */
export function broadcastsOf(args: Record<string, unknown>): string[] {
  const found: string[] = [];
  const linkNames =
    args.link_names === true ||
    args.link_names === "true" ||
    args.link_names === "1" ||
    args.link_names === 1 ||
    args.parse === "full";
  const visit = (value: unknown, wordsToo: boolean): void => {
    if (typeof value === "string") {
      found.push(...(value.match(SPECIAL_MENTION) ?? []));
      if (wordsToo) found.push(...(value.match(BROADCAST_WORD) ?? []));
    } else if (Array.isArray(value)) {
      for (const item of value) visit(item, wordsToo);
    } else if (value && typeof value === "object") {
      const markdownBlock = (value as { type?: unknown }).type === "markdown";
      for (const [key, item] of Object.entries(value))
        visit(item, wordsToo || markdownBlock || UNCLEAR_FIELDS.has(key));
    }
  };
  visit(args, linkNames);
  return found;
}

// ---- Discord ---------------------------------------------------------------------------------

/** Whom a message notifies. */
export interface Pings {
  everyone: boolean /* @everyone or @here */;
  roles: string[];
  users: string[];
}

export const mentionedIds = (content: string) => [
  ...new Set([...content.matchAll(/<@!?(\d+)>/g)].map((m) => m[1] ?? "")),
];
const mentionedRoles = (content: string) => [...new Set([...content.matchAll(/<@&(\d+)>/g)].map((m) => m[1] ?? ""))];

/**
 * Whom Discord notifies for `content` under `allowed` (the allowed_mentions object): without one it
 * parses every kind; with one, only the kinds in `parse` and the ids in `users` / `roles`; the
 * author of a replied-to message only with `replied_user` (or without allowed_mentions at all).
 */
export function pingsOf(content: string, allowed: unknown, repliedUserId?: string): Pings {
  const everything = allowed === undefined || allowed === null;
  const options = (everything ? {} : allowed) as {
    parse?: unknown;
    users?: unknown;
    roles?: unknown;
    replied_user?: unknown;
  };
  const parse = everything ? ["everyone", "users", "roles"] : (arr(options.parse) ?? []);
  const only = (list: string[], kind: string, ids: unknown) =>
    parse.includes(kind) ? list : list.filter((id) => (arr(ids) ?? []).includes(id));
  const users = only(mentionedIds(content), "users", options.users);
  if (repliedUserId && (everything || options.replied_user === true) && !users.includes(repliedUserId))
    users.push(repliedUserId);
  return {
    everyone: parse.includes("everyone") && /@(?:everyone|here)/.test(content),
    roles: only(mentionedRoles(content), "roles", options.roles),
    users,
  };
}

/** What Discord refuses in allowed_mentions (an unknown kind, or a kind both parsed and listed), as its form error's parts. */
export function allowedMentionsProblem(allowed: unknown): { field: string; code: string; message: string } | undefined {
  if (allowed === undefined || allowed === null) return undefined;
  const options = allowed as { parse?: unknown; users?: unknown; roles?: unknown };
  const parse = arr(options.parse) ?? [];
  if (parse.some((kind) => kind !== "everyone" && kind !== "users" && kind !== "roles")) {
    return {
      field: "allowed_mentions.parse",
      code: "BASE_TYPE_CHOICES",
      message: "Value must be one of ('roles', 'users', 'everyone').",
    };
  }
  for (const kind of ["users", "roles"] as const) {
    if (parse.includes(kind) && (arr(options[kind]) ?? []).length > 0) {
      return {
        field: "allowed_mentions",
        code: "MESSAGE_ALLOWED_MENTIONS_PARSE_EXCLUSIVE",
        message: `parse:["${kind}"] and ${kind}: [ids] are mutually exclusive.`,
      };
    }
  }
  return undefined;
}
