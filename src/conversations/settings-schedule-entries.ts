/**
 * The channel settings file's `schedules` list (channel-settings.ts reads the rest of the file): each
 * entry a schedule in a channel of a Slack workspace or a Discord server, as a person, each key
 * checked with one sentence naming its line; settings-schedules.ts keeps the store in step with them.
 */
import { isScalar, isSeq, type Node } from "yaml";
import { approverEntry, approverMistake } from "../tools/approver-entries.js";
import { cronOf, nextTicks } from "./schedule-times.js";

/** A schedule written in the settings file: in a channel of a Slack workspace or Discord guild, as a person. */
export interface PlannedSchedule {
  name: string;
  platform: "slack" | "discord";
  workspace: string;
  channel: string;
  /** A cron expression (the file may say "weekday 09:00"; schedule-times.ts cronOf). */
  cron: string;
  timezone: string;
  prompt: string;
  /** Whose name, approvals and budget its runs are in. */
  as: string;
  missed: "once" | "skip";
}

/** How the settings file's reader points at a line and reads a mapping of known keys. */
export interface EntryReaders {
  wrong(node: Node | null | undefined, sentence: string): Error;
  mapOf<K extends string, V>(
    node: Node | null,
    where: string,
    known: readonly K[],
    read: (value: Node | null, at: string) => V,
  ): Partial<Record<K, V>>;
}

const SCHEDULE_KEYS = ["name", "workspace", "channel", "every", "timezone", "prompt", "as", "missed"] as const;
const slackWorkspaceId = /^[TE][A-Z0-9]{2,}$/;
const discordGuildId = /^\d{17,20}$/;
/** What one scheduled run may ask, as a chat-made schedule's prompt. */
const MAX_PROMPT = 2000;

/** The file's `schedules`, each checked; names must differ. */
export function plannedSchedulesOf(node: Node | null, readers: EntryReaders): PlannedSchedule[] {
  const { wrong } = readers;
  if (!isSeq(node))
    throw wrong(
      node,
      "schedules must be a list of schedules, each with name, workspace, channel, every, prompt and as.",
    );
  const planned = (node.items as Node[]).map((item, index) => entryOf(item, `schedules[${index}]`, readers));
  const names = planned.map((schedule) => schedule.name);
  const twice = names.find((name, index) => names.indexOf(name) !== index);
  if (twice) throw wrong(node, `schedules names ${twice} twice; each schedule needs a name of its own.`);
  return planned;
}

/** One schedule of the list, each key checked. */
function entryOf(node: Node | null, where: string, { wrong, mapOf }: EntryReaders): PlannedSchedule {
  const found = mapOf(node, where, SCHEDULE_KEYS, (value, at) => {
    if (!isScalar(value) || !["string", "bigint"].includes(typeof value.value) || String(value.value).trim() === "")
      throw wrong(value, `${at} must be a text.`);
    return { text: String(value.value).trim(), node: value as Node };
  });
  for (const key of ["name", "workspace", "channel", "every", "prompt", "as"] as const)
    if (!found[key]) throw wrong(node, `${where} needs ${key} (${SCHEDULE_KEYS.join(", ")}).`);
  const get = (key: (typeof SCHEDULE_KEYS)[number]) => found[key]?.text ?? "";
  const workspace = get("workspace");
  const platform = slackWorkspaceId.test(workspace) ? "slack" : discordGuildId.test(workspace) ? "discord" : undefined;
  if (!platform)
    throw wrong(
      found.workspace?.node,
      `${where}.workspace must be a Slack workspace id (T0123ABCD) or a Discord server id (a number of 17 to 20 digits).`,
    );
  const missed = get("missed") || "once";
  if (missed !== "once" && missed !== "skip") throw wrong(found.missed?.node, `${where}.missed must be once or skip.`);
  if (approverEntry(get("as")).kind !== "user" || approverMistake(get("as")))
    throw wrong(found.as?.node, `${where}.as must be the user id its runs are made as, such as U012AB3CD.`);
  if (get("prompt").length > MAX_PROMPT)
    throw wrong(found.prompt?.node, `${where}.prompt is longer than ${MAX_PROMPT} characters.`);
  const timezone = get("timezone") || "UTC";
  let cron: string;
  try {
    cron = cronOf(get("every"));
    nextTicks(cron, timezone);
  } catch (error) {
    throw wrong(found.every?.node, `${where}.every: ${(error as Error).message}`);
  }
  return {
    name: get("name"),
    platform,
    workspace,
    channel: get("channel"),
    cron,
    timezone,
    prompt: get("prompt"),
    as: get("as"),
    missed,
  };
}
