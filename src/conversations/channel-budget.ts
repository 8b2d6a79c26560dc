/**
 * Budgets from the channel settings (channel-settings.ts `budget`): what a channel, its workspace or
 * a person may spend per UTC day and month, in tokens or dollars, counted from the store's steps, so
 * every process sees the same spending. A run is refused when a budget is used up, a model call
 * stops its run there (with what the run had so far), and an answer carries a note once a budget
 * passes 80 %, said once per budget and period.
 */
import { createHash } from "node:crypto";
import { dayStartOf } from "../agent/quota.js";
import { GlassboxError } from "../agent/errors.js";
import type { ChatModel, Message } from "../agent/types.js";
import type { SpendScope, StorePort } from "../store/port.js";
import {
  BUDGET_PERIODS,
  BUDGET_SCOPES,
  placeOf,
  settingsFor,
  type ChannelBudget,
  type ChannelSettings,
} from "./channel-settings.js";

type Scope = (typeof BUDGET_SCOPES)[number];
type Period = (typeof BUDGET_PERIODS)[number];

/** One budget as it stands: what was used of it, in its unit. */
export interface BudgetReading {
  scope: Scope;
  period: Period;
  unit: "tokens" | "cost";
  used: number;
  limit: number;
  /** Whose spending it counts: a place (`slack:T1:C1`, `slack:T1`) or a person's user id. */
  of: string;
  /** The period's start (its end is the next one's start). */
  since: Date;
  /** Names the budget and the place or person it is for, once per period (the 80 % note's claim). */
  key: string;
}

/** A budget as it stands, as shown to people (budgetStandings). */
export type BudgetStanding = Omit<BudgetReading, "key">;

const monthStartOf = (now: Date) => new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
const nextStart = (period: Period, since: Date) =>
  period === "daily"
    ? new Date(since.getTime() + 86_400_000)
    : new Date(Date.UTC(since.getUTCFullYear(), since.getUTCMonth() + 1, 1));

/** Whose spending a scope counts in a session: its channel's or workspace's sessions, or the person's runs. */
function spendScopeOf(scope: Scope, sessionId: string, userId: string): SpendScope | undefined {
  const [platform] = sessionId.split(":");
  const { workspace, channel } = placeOf(sessionId);
  if (scope === "user") return { userId };
  if (scope === "workspace") return workspace ? { place: `${platform}:${workspace}` } : undefined;
  if (!channel) return undefined;
  return { place: workspace ? `${platform}:${workspace}:${channel}` : `${platform}:dm:${channel}` };
}

/** Every budget that applies to `userId` in `sessionId`, with what was used of it now. */
export async function readBudgets(
  store: Pick<StorePort, "spentSince">,
  budget: ChannelBudget,
  sessionId: string,
  userId: string,
  now = new Date(),
): Promise<BudgetReading[]> {
  const readings: BudgetReading[] = [];
  for (const scope of BUDGET_SCOPES)
    for (const period of BUDGET_PERIODS) {
      const limits = budget[scope]?.[period];
      const spendScope = limits && spendScopeOf(scope, sessionId, userId);
      if (!limits || !spendScope) continue;
      const since = period === "daily" ? dayStartOf(now) : monthStartOf(now);
      const spent = await store.spentSince(spendScope, since);
      // The claim names the person by a hash: an erased person's id stays in no claim.
      const whose =
        spendScope.place ??
        createHash("sha256")
          .update(spendScope.userId ?? "")
          .digest("hex")
          .slice(0, 16);
      const key = `budget:${scope}:${period}:${whose}:${since.toISOString().slice(0, 10)}`;
      const of = spendScope.place ?? userId;
      if (limits.tokens !== undefined)
        readings.push({ scope, period, unit: "tokens", used: spent.tokens, limit: limits.tokens, of, since, key });
      // A step without a known price counts nothing toward a dollar budget.
      if (limits.cost !== undefined)
        readings.push({ scope, period, unit: "cost", used: spent.cost, limit: limits.cost, of, since, key });
    }
  return readings;
}

/**
 * Every budget of `settings` that someone spent against this month (UTC), as it stands now, for
 * `glassbox usage`, the HTTP API and the trace viewer. Given `userId`, only the budgets that concern
 * that person: theirs, and those of the places where they spent.
 */
export async function budgetStandings(
  store: Pick<StorePort, "spentSince" | "spendersSince">,
  settings: ChannelSettings,
  userId?: string,
  now = new Date(),
): Promise<BudgetStanding[]> {
  const spenders = (await store.spendersSince(monthStartOf(now))).filter(
    (spender) => userId === undefined || spender.userId === userId,
  );
  const standings = new Map<string, BudgetReading>();
  const seen = new Set<string>();
  // A person's (or a workspace's) spending is the same whichever place asks: read once.
  const spent = new Map<string, ReturnType<StorePort["spentSince"]>>();
  const once: Pick<StorePort, "spentSince"> = {
    spentSince: (scope, since) => {
      const key = `${scope.place ?? ""}|${scope.userId ?? ""}|${since.toISOString()}`;
      let reading = spent.get(key);
      if (!reading) spent.set(key, (reading = store.spentSince(scope, since)));
      return reading;
    },
  };
  for (const { sessionId, userId: spender } of spenders) {
    // A channel's threads share its settings and its budgets: one reading each.
    const { workspace, channel } = placeOf(sessionId);
    const place = `${sessionId.split(":")[0]}:${workspace ?? ""}:${channel ?? sessionId}|${spender}`;
    const budget = settingsFor(settings, sessionId).budget;
    if (!budget || seen.has(place)) continue;
    seen.add(place);
    for (const reading of await readBudgets(once, budget, sessionId, spender, now))
      standings.set(`${reading.key}|${reading.unit}|${reading.limit}`, reading);
  }
  const order = (reading: BudgetReading) =>
    [BUDGET_SCOPES.indexOf(reading.scope), reading.of, BUDGET_PERIODS.indexOf(reading.period), reading.unit].join("|");
  return [...standings.values()]
    .sort((a, b) => (order(a) < order(b) ? -1 : order(a) > order(b) ? 1 : 0))
    .map(({ key: _key, ...standing }) => standing);
}

const WHOSE: Record<Scope, string> = { channel: "This channel", workspace: "This workspace", user: "You" };
const PERIOD: Record<Period, string> = { daily: "daily", monthly: "monthly" };
const amount = (reading: Pick<BudgetReading, "unit">, value: number) =>
  reading.unit === "cost" ? `$${value.toFixed(2)}` : `${Math.round(value).toLocaleString("en-US")} tokens`;
const resetOf = (reading: BudgetReading) => {
  const next = nextStart(reading.period, reading.since);
  return reading.period === "daily" ? "at 00:00 UTC" : `on ${next.toISOString().slice(0, 10)} (UTC)`;
};
const verb = (scope: Scope) => (scope === "user" ? "have" : "has");

/** The first budget used up, or undefined. */
export const usedUp = (readings: BudgetReading[]) => readings.find((reading) => reading.used >= reading.limit);

/** Why a run cannot start or go on, in a sentence for the person. */
export function budgetSentence(reading: BudgetReading): string {
  return `${WHOSE[reading.scope]} ${verb(reading.scope)} used ${reading.scope === "user" ? "your" : "its"} ${PERIOD[reading.period]} budget (${amount(reading, reading.used)} of ${amount(reading, reading.limit)}); it starts again ${resetOf(reading)}, or ask whoever runs glassbox here to raise it.`;
}

/** The note an answer carries once a budget passes 80 %. */
export function budgetNote(reading: BudgetReading): string {
  const share = Math.min(100, Math.floor((reading.used / reading.limit) * 100));
  return `Note: ${WHOSE[reading.scope].toLowerCase()} ${verb(reading.scope)} used ${share}% of ${reading.scope === "user" ? "your" : "its"} ${PERIOD[reading.period]} budget (${amount(reading, reading.used)} of ${amount(reading, reading.limit)}).`;
}

/** What is left of a budget, for "what can you do here?". */
export function budgetLeft(reading: BudgetReading): string {
  const whose = reading.scope === "user" ? "your" : `this ${reading.scope}'s`;
  const left = Math.max(0, reading.limit - reading.used);
  return `Left of ${whose} ${PERIOD[reading.period]} budget: ${amount(reading, left)} of ${amount(reading, reading.limit)}.`;
}

/** The budgets past 80 % (not yet used up) whose note is due. */
export const nearing = (readings: BudgetReading[]) =>
  readings.filter((reading) => reading.used >= 0.8 * reading.limit && reading.used < reading.limit);

/**
 * `model`, each call of which first reads the budgets: one used up stops the run there, with a
 * sentence that says why and what the run had so far (its last words, or the tools it called).
 */
export function withBudget(model: ChatModel, read: (userId: string) => Promise<BudgetReading[]>): ChatModel {
  return {
    name: model.name,
    async chat(request) {
      const over = request.userId !== undefined ? usedUp(await read(request.userId)) : undefined;
      if (over)
        throw new GlassboxError("quota", `I stopped: ${lowerFirst(budgetSentence(over))}${soFar(request.messages)}`);
      return model.chat(request);
    },
  };
}

const lowerFirst = (text: string) => (text.startsWith("You ") ? `you${text.slice(3)}` : `t${text.slice(1)}`);

/** What this run had done before the stop: its last words to the person, else the tools it called. */
function soFar(messages: Message[]): string {
  const turn = messages.slice(messages.findLastIndex((message) => message.role === "user") + 1);
  const said = turn.findLast(
    (message) => message.role === "assistant" && typeof message.content === "string" && message.content.trim(),
  );
  if (said?.role === "assistant" && typeof said.content === "string")
    return `\n\nWhat I had so far: ${said.content.trim()}`;
  const called = turn.flatMap((message) => (message.role === "assistant" ? (message.tool_calls ?? []) : []));
  if (called.length === 0) return "";
  return `\n\nBefore stopping I called ${[...new Set(called.map((call) => call.function.name))].join(", ")}; their results are in the trace.`;
}
