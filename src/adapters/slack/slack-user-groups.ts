/**
 * Which Slack user groups a person is in, for approvers named as `group:S...`: asked of Slack
 * (usergroups.users.list, scope usergroups:read) with the workspace's own token, never read from a
 * click's body. Each group's members are kept briefly, so a burst of clicks asks once; a lookup
 * Slack refuses (a missing scope, a deleted group) or that fails counts as "not a member", is logged,
 * and is asked again at the next click.
 */
import type { WebClient } from "@slack/web-api";
import type { Logger } from "../../logger.js";
import { GROUP_PREFIX } from "../../tools/approver-entries.js";

/** How long a group's members are kept: a person added to a group can approve within this. */
export const GROUP_MEMBERS_TTL_MS = 60_000;
/** A click is decided before Slack's 3 s acknowledgement: a slower lookup counts as "not a member". */
const LOOKUP_TIMEOUT_MS = 1_500;

export interface UserGroupLookup {
  /** Of `groups` (ids, S...), the ones `userId` is in, as approver entries (`group:S...`). */
  memberOf(client: WebClient, teamId: string, userId: string, groups: readonly string[]): Promise<string[]>;
}

export function createUserGroupLookup(log: Logger, ttlMs = GROUP_MEMBERS_TTL_MS): UserGroupLookup {
  // By workspace and group; a pending lookup is shared by the clicks that wait for it.
  const members = new Map<string, { users: Promise<ReadonlySet<string> | undefined>; until: number }>();

  const usersOf = (client: WebClient, teamId: string, group: string): Promise<ReadonlySet<string> | undefined> => {
    const key = `${teamId}:${group}`;
    const kept = members.get(key);
    if (kept && kept.until > Date.now()) return kept.users;
    const users = lookUp(client, teamId, group).then((found) => {
      if (!found) members.delete(key); // a refusal is not kept: the next click asks again
      return found;
    });
    members.set(key, { users, until: Date.now() + ttlMs });
    return users;
  };

  async function lookUp(client: WebClient, teamId: string, group: string): Promise<ReadonlySet<string> | undefined> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${LOOKUP_TIMEOUT_MS} ms`)), LOOKUP_TIMEOUT_MS);
    });
    try {
      const answer = await Promise.race([client.usergroups.users.list({ usergroup: group }), late]);
      return new Set(answer.users ?? []);
    } catch (error) {
      const problem = (error as { data?: { error?: string } }).data?.error ?? (error as Error).message;
      log.warn(
        { team: teamId, usergroup: group, problem },
        "Slack: a user group's members could not be read (scope usergroups:read?); its approvers count as not members",
      );
      return undefined;
    } finally {
      clearTimeout(timer);
    }
  }

  return {
    async memberOf(client, teamId, userId, groups) {
      const found = await Promise.all(
        [...new Set(groups)].map(async (group) => ((await usersOf(client, teamId, group))?.has(userId) ? group : "")),
      );
      return found.filter((group) => group !== "").map((group) => `${GROUP_PREFIX}${group}`);
    },
  };
}
