/** `glassbox trace <session-or-run-id>`: a run, or every run of a session, step by step. */
import { formatFeedback, formatRunTimeline } from "../adapters/trace-report.js";
import { createFeedbackBook } from "../agent/feedback.js";
import { createTraceReader } from "../agent/trace.js";
import { sessionKey, type CommandInput } from "./command.js";
import { UsageError } from "./help.js";
import { openRecords } from "./records.js";

export default async function trace({ positionals, options }: CommandInput): Promise<number> {
  const target = positionals[0];
  if (!target) throw new UsageError("Name a session or a run: glassbox trace <session-or-run-id> (see glassbox sessions).");
  const { path, store } = openRecords();
  if (!store) {
    process.stdout.write(`There is no run or session ${target}: no conversations are recorded yet in ${path} (GLASSBOX_DB).\n`);
    return 1;
  }
  try {
    const traces = createTraceReader(store);
    const single = traces.run(target);
    // A sub-agent's runs are shown inside the tool calls that started them.
    const runs = single ? [single] : traces.runsOfSession(sessionKey(target)).filter((run) => !run.parentRunId);
    if (runs.length === 0) {
      process.stdout.write(`There is no run or session ${target}; see glassbox sessions.\n`);
      return 1;
    }
    const feedback = createFeedbackBook(store);
    const timelines = runs.map((run) => ({ run, steps: traces.steps(run.runId), feedback: feedback.ofRun(run.runId) }));
    if (options.json) process.stdout.write(`${JSON.stringify(timelines, null, 2)}\n`);
    else process.stdout.write(`${timelines.map(({ run, steps, feedback: given }) => [formatRunTimeline(run, steps, traces), formatFeedback(given)].filter(Boolean).join("\n")).join("\n\n")}\n`);
    return 0;
  } finally {
    store.close();
  }
}
