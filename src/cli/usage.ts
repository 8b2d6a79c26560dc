/** `glassbox usage`: runs, tokens and cost by day, by user and by session, and the 👍 / 👎 people gave. */
import { formatFeedbackCounts, formatUsage } from "../adapters/trace-report.js";
import { styleFor } from "../adapters/terminal/style.js";
import type { AnyStorePort, UsageTotal } from "../store/index.js";
import type { CommandInput } from "./command.js";
import { nothingRecorded, openRecords } from "./records.js";

export default async function usage({ options }: CommandInput): Promise<number> {
  const records = await openRecords();
  const { store } = records;
  const totals: Totals = store
    ? await totalsOf(store).finally(() => store.close())
    : { byDay: [], byUser: [], bySession: [] };
  const style = styleFor(process.stdout);
  if (options.json) process.stdout.write(`${JSON.stringify(totals, null, 2)}\n`);
  else if (!store) process.stdout.write(`${nothingRecorded(records)}\n`);
  else
    process.stdout.write(
      `${[formatUsage("By day", "DAY", totals.byDay, style), formatUsage("By user", "USER", totals.byUser, style), formatUsage("By session", "SESSION", totals.bySession, style), formatFeedbackCounts(totals.feedback ?? { up: 0, down: 0 }, style)].join("\n\n")}\n`,
    );
  return 0;
}

interface Totals {
  byDay: UsageTotal[];
  byUser: UsageTotal[];
  bySession: UsageTotal[];
  /** Absent when nothing is recorded. */
  feedback?: { up: number; down: number };
}

async function totalsOf(store: AnyStorePort): Promise<Totals> {
  const [byDay, byUser, bySession, feedback] = await Promise.all([
    store.totalsByDay(),
    store.totalsByUser(),
    store.totalsBySession(),
    store.feedbackCounts(),
  ]);
  return { byDay, byUser, bySession, feedback };
}
