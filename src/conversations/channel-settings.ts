/**
 * Per-channel settings (GLASSBOX_CHANNELS): a YAML or JSON file saying what the bot is and may do
 * where: `defaults`, then `workspaces` (a Slack team or a Discord guild, by id), then `channels` (by
 * id), each level overriding the one before. A level sets `systemPrompt` (or `systemPromptFile`),
 * `model`, `tools` (names or patterns such as `crm_*`; `[]` for none), `users` (who may use the bot there),
 * and who decides the dangerous calls made there (`approvers`, `requesterMayApprove`, `toolApprovers`
 * per tool, `twoPersonRule` for the tools that need two people's approval); what a run
 * makes of them is channel-agent.ts. A mistake is one sentence naming the line, with the setting it
 * likely means; the file is read again when it changes (or on SIGHUP), and a file that became wrong
 * leaves the settings as they were.
 */
import { createHash } from "node:crypto";
import { readFileSync, watch } from "node:fs";
import { basename, dirname, resolve } from "node:path";
import { LineCounter, parseDocument, isMap, isScalar, isSeq, type Node, type Pair } from "yaml";
import { configurationError } from "../agent/errors.js";
import type { Logger } from "../logger.js";
import type { NotesScope } from "../agent/run.js";
import { approverEntry, approverMistake } from "../tools/approver-entries.js";
import { closestNames } from "../tools/closest-names.js";
import { plannedSchedulesOf, type PlannedSchedule } from "./settings-schedule-entries.js";

/** What one level of the file says; what it leaves out comes from the level before. */
export interface ChannelLevel {
  systemPrompt?: string;
  /** The model the runs there call, on the same model server (LLM_MODEL's otherwise). */
  model?: string;
  /** Names or patterns (`*` matches any run of characters) of the tools allowed. */
  tools?: string[];
  /** The people who may use the bot there (Slack or Discord user ids); unset: everyone. */
  users?: string[];
  /**
   * Who may decide the dangerous calls made there, instead of the tool's or the platform's: user ids,
   * Slack user groups (`group:S0123ABC`) and Discord roles (`role:123456789012345678`).
   */
  approvers?: string[];
  /** Whether the person who asked may decide their own dangerous call there. */
  requesterMayApprove?: boolean;
  /** Approvers of one tool's calls there (by name or pattern), instead of `approvers`. */
  toolApprovers?: Record<string, string[]>;
  /** Tools (names or patterns) whose calls there need two different people's approval. */
  twoPersonRule?: string[];
  /** Which remembered notes runs there are shown: the person's and the channel's, the person's alone, or none. */
  notes?: NotesScope;
  /** What may be spent there (see channel-budget.ts); each scope's overrides the level before's. */
  budget?: ChannelBudget;
  /** Whether and how much a mention in a thread reads of it first (thread-context.ts); each key overrides the level before's. */
  threadContext?: ThreadContextSettings;
}

/** Reading a thread before answering a mention in it: on or off, and its bounds. */
export interface ThreadContextSettings {
  threads?: boolean;
  /** Whether a mention outside a thread first reads the channel's recent history (off by default). */
  channel?: boolean;
  maxMessages?: number;
  maxTokens?: number;
}

export const THREAD_CONTEXT_KEYS = ["threads", "channel", "maxMessages", "maxTokens"] as const;
/** The bounds a setting may take: enough to be useful, never more than one request should carry. */
export const THREAD_CONTEXT_LIMITS = { maxMessages: [1, 200], maxTokens: [100, 32_000] } as const;

/** At most this many tokens or dollars in a period. */
export interface BudgetLimit {
  tokens?: number;
  cost?: number;
}

export type BudgetPeriods = Partial<Record<(typeof BUDGET_PERIODS)[number], BudgetLimit>>;

/** Budgets by whose spending they count: the channel's, the workspace's (a Slack team, a Discord guild), each person's. */
export type ChannelBudget = Partial<Record<(typeof BUDGET_SCOPES)[number], BudgetPeriods>>;

export const BUDGET_SCOPES = ["channel", "workspace", "user"] as const;
export const BUDGET_PERIODS = ["daily", "monthly"] as const;
const BUDGET_UNITS = ["tokens", "cost"] as const;
const NOTES_SCOPES: readonly NotesScope[] = ["channel", "mine", "none"];

export interface ChannelSettings {
  /** The file's path and a short hash of what it held when read: the version a run used. */
  source: { path: string; version: string };
  defaults: ChannelLevel;
  workspaces: Record<string, ChannelLevel>;
  channels: Record<string, ChannelLevel>;
  /** Runs on a schedule the file asks for (settings-schedules.ts keeps the store's in step with them). */
  schedules: PlannedSchedule[];
}

const LEVEL_KEYS = [
  "systemPrompt",
  "systemPromptFile",
  "model",
  "tools",
  "users",
  "approvers",
  "requesterMayApprove",
  "toolApprovers",
  "twoPersonRule",
  "budget",
  "notes",
  "threadContext",
] as const;
const TOP_KEYS = ["defaults", "workspaces", "channels", "schedules"] as const;

/**
 * Reads and checks the file; a mistake is a configuration error naming the file, the line and the
 * fix. Given `toolNames` (the process's tools), a tool named without a pattern must be one of them.
 */
export function readChannelSettings(path: string, toolNames?: readonly string[]): ChannelSettings {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw configurationError(
      `GLASSBOX_CHANNELS names ${path}, which cannot be read (${(error as NodeJS.ErrnoException).code ?? "unreadable"}); fix the path or unset it.`,
    );
  }
  const lines = new LineCounter();
  // Discord's ids are past 2^53: read as exact integers, so that an id written unquoted stays itself.
  const document = parseDocument(text, { lineCounter: lines, prettyErrors: false, intAsBigInt: true });
  const at = (node: Node | null | undefined) => (node?.range ? `${path}:${lines.linePos(node.range[0]).line}` : path);
  const wrong = (node: Node | null | undefined, sentence: string) => configurationError(`${at(node)}: ${sentence}`);
  const [syntax] = document.errors;
  if (syntax)
    throw configurationError(`${path}:${lines.linePos(syntax.pos[0]).line}: ${syntax.message.split("\n")[0]}`);
  const root = document.contents;
  if (root === null) return { source: sourceOf(path, text), defaults: {}, workspaces: {}, channels: {}, schedules: [] };
  if (!isMap(root)) throw wrong(root, "the file must be a mapping of defaults, workspaces and channels.");

  const level = (node: Node | null, where: string): ChannelLevel => {
    if (!isMap(node)) throw wrong(node, `${where} must be a mapping of ${LEVEL_KEYS.join(", ")}.`);
    const found: ChannelLevel = {};
    for (const pair of node.items as Pair<Node, Node>[]) {
      const key = keyOf(pair, wrong);
      const value = pair.value;
      if (key === "systemPrompt") found.systemPrompt = text_(value, `${where}.systemPrompt`);
      else if (key === "model") found.model = text_(value, `${where}.model`).trim();
      else if (key === "systemPromptFile") {
        const file = resolve(dirname(path), text_(value, `${where}.systemPromptFile`));
        try {
          found.systemPrompt = readFileSync(file, "utf8").trim();
        } catch {
          throw wrong(value, `${where}.systemPromptFile names ${file}, which cannot be read.`);
        }
      } else if (key === "tools" || key === "twoPersonRule") found[key] = toolList(value, `${where}.${key}`);
      else if (key === "users") found.users = idList(value, `${where}.users`, "people");
      else if (key === "approvers") found.approvers = idList(value, `${where}.approvers`, "approvers");
      else if (key === "budget") found.budget = budgetOf(value, `${where}.budget`);
      else if (key === "threadContext") found.threadContext = threadContextOf(value, `${where}.threadContext`);
      else if (key === "notes") {
        if (!isScalar(value) || !NOTES_SCOPES.includes(value.value as NotesScope))
          throw wrong(value, `${where}.notes must be one of ${NOTES_SCOPES.join(", ")}.`);
        found.notes = value.value as NotesScope;
      } else if (key === "toolApprovers") {
        if (!isMap(value))
          throw wrong(
            value,
            `${where}.toolApprovers must map tool names or patterns to approvers, such as cancel_order: [U012AB3CD, group:S0123ABC].`,
          );
        found.toolApprovers = Object.fromEntries(
          (value.items as Pair<Node, Node>[]).map((pair) => {
            const name = toolName(pair.key, keyOf(pair, wrong), `${where}.toolApprovers`);
            return [name, idList(pair.value, `${where}.toolApprovers.${name}`, "approvers")];
          }),
        );
      } else if (key === "requesterMayApprove") {
        if (!isScalar(value) || typeof value.value !== "boolean")
          throw wrong(value, `${where}.requesterMayApprove must be true or false.`);
        found.requesterMayApprove = value.value;
      } else throw wrong(pair.key as Node, unknownKey(`${where}.${key}`, key, LEVEL_KEYS));
    }
    return found;
  };
  /** A tool's name or pattern; a name must be one of the process's tools. */
  const toolName = (node: Node | null, name: string, where: string): string => {
    if (toolNames && !name.includes("*") && !toolNames.includes(name)) {
      const [closest] = closestNames(name, [...toolNames]);
      throw wrong(
        node,
        `${where} names ${name}, which is no tool here; ${closest ? `did you mean ${closest}?` : `the tools are ${toolNames.join(", ")}.`}`,
      );
    }
    return name;
  };
  const toolList = (value: Node | null, where: string): string[] => {
    if (!isSeq(value) || !value.items.every((item) => isScalar(item) && typeof item.value === "string"))
      throw wrong(value, `${where} must be a list of tool names or patterns, such as [calculator, "crm_*"].`);
    return value.items.map((item) => toolName(item as Node, String((item as { value: string }).value), where));
  };
  /** User ids; for approvers also Slack user groups and Discord roles (approver-entries.ts), each checked. */
  const idList = (value: Node | null, where: string, of: "people" | "approvers"): string[] => {
    const id = (item: unknown) => isScalar(item) && ["string", "bigint"].includes(typeof item.value);
    if (!isSeq(value) || !value.items.every(id))
      throw wrong(
        value,
        of === "people"
          ? `${where} must be a list of user ids, such as [U012AB3CD].`
          : `${where} must be a list of user ids, Slack user groups or Discord roles, such as [U012AB3CD, group:S0123ABC, role:123456789012345678].`,
      );
    return (value.items as Node[]).map((item) => {
      const entry = String((item as unknown as { value: string | bigint }).value);
      const mistake = approverMistake(entry);
      if (of === "people" && (mistake || approverEntry(entry).kind !== "user"))
        throw wrong(item, `${where} names ${entry}; it lists people by user id (groups and roles name approvers).`);
      if (mistake) throw wrong(item, `${where} names ${entry}, ${mistake}`);
      return entry;
    });
  };
  /** A mapping whose keys are among `known`, each value read by `read`. */
  const mapOf = <K extends string, V>(
    node: Node | null,
    where: string,
    known: readonly K[],
    read: (value: Node | null, at: string) => V,
  ) => {
    if (!isMap(node)) throw wrong(node, `${where} must be a mapping of ${known.join(", ")}.`);
    const found: Partial<Record<K, V>> = {};
    for (const pair of node.items as Pair<Node, Node>[]) {
      const key = keyOf(pair, wrong);
      if (!known.includes(key as K)) throw wrong(pair.key as Node, unknownKey(`${where}.${key}`, key, known));
      found[key as K] = read(pair.value, `${where}.${key}`);
    }
    return found;
  };
  const budgetOf = (node: Node | null, where: string): ChannelBudget =>
    mapOf(node, where, BUDGET_SCOPES, (scope, at) =>
      mapOf(scope, at, BUDGET_PERIODS, (period, inPeriod) =>
        mapOf(period, inPeriod, BUDGET_UNITS, (value, atUnit) => {
          const amount = isScalar(value) ? Number(value.value) : Number.NaN;
          const whole = atUnit.endsWith(".tokens");
          if (!(amount > 0) || (whole && !Number.isInteger(amount)))
            throw wrong(
              value,
              `${atUnit} must be ${whole ? "a whole number of tokens" : "an amount of dollars"} above 0.`,
            );
          return amount;
        }),
      ),
    );
  const threadContextOf = (node: Node | null, where: string): ThreadContextSettings =>
    mapOf(node, where, THREAD_CONTEXT_KEYS, (value, at) => {
      if (at.endsWith(".threads") || at.endsWith(".channel")) {
        if (!isScalar(value) || typeof value.value !== "boolean") throw wrong(value, `${at} must be true or false.`);
        return value.value;
      }
      const [least, most] = at.endsWith(".maxMessages")
        ? THREAD_CONTEXT_LIMITS.maxMessages
        : THREAD_CONTEXT_LIMITS.maxTokens;
      const amount = isScalar(value) ? Number(value.value) : Number.NaN;
      if (!Number.isInteger(amount) || amount < least || amount > most)
        throw wrong(value, `${at} must be a whole number from ${least} to ${most.toLocaleString("en-US")}.`);
      return amount;
    }) as ThreadContextSettings;
  const text_ = (node: Node | null, where: string): string => {
    if (!isScalar(node) || typeof node.value !== "string" || node.value.trim() === "")
      throw wrong(node, `${where} must be a text.`);
    return node.value;
  };
  const byId = (node: Node | null, where: string): Record<string, ChannelLevel> => {
    if (!isMap(node)) throw wrong(node, `${where} must be a mapping of ids to settings.`);
    return Object.fromEntries(
      (node.items as Pair<Node, Node>[]).map((pair) => {
        const id = keyOf(pair, wrong);
        return [id, level(pair.value, `${where}.${id}`)];
      }),
    );
  };

  const settings: ChannelSettings = {
    source: sourceOf(path, text),
    defaults: {},
    workspaces: {},
    channels: {},
    schedules: [],
  };
  for (const pair of root.items as Pair<Node, Node>[]) {
    const key = keyOf(pair, wrong);
    if (key === "defaults") settings.defaults = level(pair.value, "defaults");
    else if (key === "workspaces") settings.workspaces = byId(pair.value, "workspaces");
    else if (key === "channels") settings.channels = byId(pair.value, "channels");
    else if (key === "schedules") settings.schedules = plannedSchedulesOf(pair.value, { wrong, mapOf });
    else throw wrong(pair.key as Node, unknownKey(key, key, TOP_KEYS));
  }
  return settings;
}

function keyOf(pair: Pair<Node, Node>, wrong: (node: Node | null, sentence: string) => Error): string {
  const key = pair.key;
  if (!isScalar(key) || !["string", "bigint"].includes(typeof key.value))
    throw wrong(key, "a key must be a plain name or id.");
  return String(key.value);
}

function unknownKey(where: string, key: string, known: readonly string[]): string {
  const [closest] = closestNames(key, [...known]);
  return closest
    ? `${where} is not a setting; did you mean ${closest}?`
    : `${where} is not a setting; the settings are ${known.join(", ")}.`;
}

function sourceOf(path: string, text: string): ChannelSettings["source"] {
  return { path, version: createHash("sha256").update(text).digest("hex").slice(0, 12) };
}

/** Where a session is: its workspace (Slack team, Discord guild) and channel; none for the web and the command line. */
export function placeOf(sessionId: string): { workspace?: string; channel?: string } {
  const [platform, first, second] = sessionId.split(":");
  if (platform === "slack") return { workspace: first, channel: second };
  if (platform === "discord") return first === "dm" ? { channel: second } : { workspace: first, channel: second };
  return {};
}

/** What applies in a session: the defaults, then its workspace's, then its channel's. */
export function settingsFor(settings: ChannelSettings, sessionId: string): ChannelLevel {
  const { workspace, channel } = placeOf(sessionId);
  const levels = [
    settings.defaults,
    workspace ? settings.workspaces[workspace] : {},
    channel ? settings.channels[channel] : {},
  ];
  // Budgets merge by scope: a channel's own budget leaves its workspace's in force; thread reading by key.
  const budget = Object.assign({}, ...levels.map((level) => level?.budget ?? {})) as ChannelBudget;
  const threadContext = Object.assign(
    {},
    ...levels.map((level) => level?.threadContext ?? {}),
  ) as ThreadContextSettings;
  return Object.assign(
    {},
    ...levels,
    Object.keys(budget).length > 0 ? { budget } : {},
    Object.keys(threadContext).length > 0 ? { threadContext } : {},
  ) as ChannelLevel;
}

/** The settings as the file says now: read at start (a mistake stops it), again on change or SIGHUP. */
export interface LiveChannelSettings {
  current(): ChannelSettings;
  /** Reads the file again now; false (the settings kept) when it has a mistake, which is logged. */
  reload(): boolean;
  stop(): void;
}

/** How long a burst of change events (an editor's save) settles before the file is read. */
const SETTLE_MS = 100;

export function watchChannelSettings(path: string, log: Logger, toolNames?: readonly string[]): LiveChannelSettings {
  let settings = readChannelSettings(path, toolNames);
  const reload = () => {
    try {
      const read = readChannelSettings(path, toolNames);
      if (read.source.version !== settings.source.version)
        log.info({ file: path, version: read.source.version }, "channels: settings read again");
      settings = read;
      return true;
    } catch (error) {
      log.warn(
        { file: path, problem: (error as Error).message },
        "channels: the file has a mistake; the settings stay as they were",
      );
      return false;
    }
  };
  let timer: NodeJS.Timeout | undefined;
  // The folder, not the file: an editor that saves by replacing the file would leave a file watch behind.
  const watcher = watch(dirname(resolve(path)), (_event, name) => {
    if (name !== basename(path)) return;
    clearTimeout(timer);
    timer = setTimeout(reload, SETTLE_MS);
  });
  watcher.unref();
  const onHangUp = () => void reload();
  process.on("SIGHUP", onHangUp);
  return {
    current: () => settings,
    reload,
    stop() {
      clearTimeout(timer);
      watcher.close();
      process.off("SIGHUP", onHangUp);
    },
  };
}
