/**
 * What an approver entry names (a tool's `approvers`, a channel's `approvers` and `toolApprovers`,
 * SLACK_APPROVERS, DISCORD_APPROVERS): a person by their user id, every member of a Slack user group
 * (`group:S0123ABC`), or every member of a Discord role (`role:123456789012345678`). A click's
 * platform says which of the named groups or roles the person clicking is in (DecisionRequest's
 * `memberOf`, in the same notation); the rules only compare entries.
 */

export const GROUP_PREFIX = "group:";
export const ROLE_PREFIX = "role:";

export type ApproverEntry =
  | { kind: "user"; id: string }
  /** A Slack user group, by its id (S...). */
  | { kind: "group"; id: string }
  /** A Discord role, by its id (a snowflake). */
  | { kind: "role"; id: string };

const GROUP_ID = /^S[A-Z0-9]+$/;
const ROLE_ID = /^\d{15,21}$/;
// The platforms' own mention forms, which people paste: written in the notation above instead.
const SUBTEAM_MENTION = /^<!subteam\^([^|>]+)(?:\|[^>]*)?>$/;
const ROLE_MENTION = /^<@&(\d+)>$/;

export function approverEntry(entry: string): ApproverEntry {
  if (entry.startsWith(GROUP_PREFIX)) return { kind: "group", id: entry.slice(GROUP_PREFIX.length) };
  if (entry.startsWith(ROLE_PREFIX)) return { kind: "role", id: entry.slice(ROLE_PREFIX.length) };
  return { kind: "user", id: entry };
}

/** The Slack user groups among `entries`, by id. */
export const groupsAmong = (entries: readonly string[]): string[] =>
  entries.flatMap((entry) => {
    const named = approverEntry(entry);
    return named.kind === "group" ? [named.id] : [];
  });

/**
 * What is wrong with an approver entry, as the end of a sentence that begins with where it is
 * ("... names <entry>, ..."); undefined when it is well written. A user id is taken as written.
 */
export function approverMistake(entry: string): string | undefined {
  const subteam = SUBTEAM_MENTION.exec(entry);
  if (subteam) return `a Slack user group mention; write it as ${GROUP_PREFIX}${subteam[1]}.`;
  const role = ROLE_MENTION.exec(entry);
  if (role) return `a Discord role mention; write it as ${ROLE_PREFIX}${role[1]}.`;
  const named = approverEntry(entry);
  if (named.kind === "group" && !GROUP_ID.test(named.id))
    return "which is no Slack user group id; write a group as group:S0123ABC, with its id (not its @handle).";
  if (named.kind === "role" && !ROLE_ID.test(named.id))
    return "which is no Discord role id; write a role as role:123456789012345678, with its id (not its name).";
  return undefined;
}

/**
 * An entry as a person reads it in plain text (the answer to "What can you do here?"): a user id as
 * it is, a group or role with what it is.
 */
export function approverInWords(entry: string): string {
  const named = approverEntry(entry);
  if (named.kind === "group") return `the members of the Slack user group ${named.id}`;
  if (named.kind === "role") return `the members of the Discord role ${named.id}`;
  return named.id;
}
