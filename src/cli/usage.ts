/**
 * `glassbox usage`: runs, tokens and cost by day, by user and by session, the 👍 / 👎 people gave,
 * and, with channel settings (GLASSBOX_CHANNELS), how their budgets stand this month.
 */
import { formatBudgets, formatFeedbackCounts, formatUsage } from "../adapters/trace-report.js";
import { styleFor } from "../adapters/terminal/style.js";
import { budgetStandings, type BudgetStanding } from "../conversations/channel-budget.js";
import { readChannelSettings, type ChannelSettings } from "../conversations/channel-settings.js";
import type { AnyStorePort, UsageTotal } from "../store/index.js";
import type { CommandInput } from "./command.js";
import { nothingRecorded, openRecords } from "./records.js";

export default async function usage({ options }: CommandInput): Promise<number> {
  // Read first: a mistake in the file is said before anything is opened.
  const channels = process.env.GLASSBOX_CHANNELS ? readChannelSettings(process.env.GLASSBOX_CHANNELS) : undefined;
  const records = await openRecords();
  const { store } = records;
  const totals: Totals = store
    ? await totalsOf(store, channels).finally(() => store.close())
    : { byDay: [], byUser: [], bySession: [], ...(channels ? { budgets: [] } : {}) };
  const style = styleFor(process.stdout);
  if (options.json) process.stdout.write(`${JSON.stringify(totals, null, 2)}\n`);
  else if (!store) process.stdout.write(`${nothingRecorded(records)}\n`);
  else
    process.stdout.write(
      `${[formatUsage("By day", "DAY", totals.byDay, style), formatUsage("By user", "USER", totals.byUser, style), formatUsage("By session", "SESSION", totals.bySession, style), formatFeedbackCounts(totals.feedback ?? { up: 0, down: 0 }, style), ...(totals.budgets ? [formatBudgets(totals.budgets, style)] : [])].join("\n\n")}\n`,
    );
  return 0;
}

interface Totals {
  byDay: UsageTotal[];
  byUser: UsageTotal[];
  bySession: UsageTotal[];
  /** Absent when nothing is recorded. */
  feedback?: { up: number; down: number };
  /** Absent without channel settings. */
  budgets?: BudgetStanding[];
}

async function totalsOf(store: AnyStorePort, channels: ChannelSettings | undefined): Promise<Totals> {
  const [byDay, byUser, bySession, feedback, budgets] = await Promise.all([
    store.totalsByDay(),
    store.totalsByUser(),
    store.totalsBySession(),
    store.feedbackCounts(),
    channels && budgetStandings(store, channels),
  ]);
  return { byDay, byUser, bySession, feedback, ...(budgets ? { budgets } : {}) };
}
