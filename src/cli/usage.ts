/** `glassbox usage`: runs, tokens and cost by day, by user and by session, and the 👍 / 👎 people gave. */
import { formatFeedbackCounts, formatUsage } from "../adapters/trace-report.js";
import { createFeedbackBook } from "../agent/feedback.js";
import { styleFor } from "../adapters/terminal/style.js";
import { createTraceReader } from "../agent/trace.js";
import type { CommandInput } from "./command.js";
import { nothingRecorded, openRecords } from "./records.js";

export default async function usage({ options }: CommandInput): Promise<number> {
  const { path, store } = openRecords();
  const traces = store && createTraceReader(store);
  const totals = {
    byDay: traces?.totalsByDay() ?? [],
    byUser: traces?.totalsByUser() ?? [],
    bySession: traces?.totalsBySession() ?? [],
    ...(store ? { feedback: createFeedbackBook(store).counts() } : {}),
  };
  store?.close();
  const style = styleFor(process.stdout);
  if (options.json) process.stdout.write(`${JSON.stringify(totals, null, 2)}\n`);
  else if (!store) process.stdout.write(`${nothingRecorded(path)}\n`);
  else process.stdout.write(`${[formatUsage("By day", "DAY", totals.byDay, style), formatUsage("By user", "USER", totals.byUser, style), formatUsage("By session", "SESSION", totals.bySession, style), formatFeedbackCounts(totals.feedback ?? { up: 0, down: 0 }, style)].join("\n\n")}\n`);
  return 0;
}
