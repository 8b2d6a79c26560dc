/** `glassbox trace <session-or-run-id>`: a run, or every run of a session, step by step. */
import { formatFeedback, formatRunTimeline } from "../adapters/trace-report.js";
import { nestedRunsOf } from "../adapters/trace-readings.js";
import { sessionKey, type CommandInput } from "./command.js";
import { UsageError } from "./help.js";
import { glassboxCommand, pasteable } from "./invocation.js";
import { nothingRecorded, openRecords } from "./records.js";

export default async function trace({ positionals, options }: CommandInput): Promise<number> {
  const target = positionals[0];
  if (!target)
    throw new UsageError(
      `Name a session or a run: ${glassboxCommand()} trace <session-or-run-id> (see ${pasteable("sessions")}).`,
    );
  const records = await openRecords();
  const { store } = records;
  if (!store) {
    const nothing = nothingRecorded(records);
    process.stdout.write(`There is no run or session ${target}: ${nothing[0]?.toLowerCase()}${nothing.slice(1)}\n`);
    return 1;
  }
  try {
    const single = await store.run(target);
    // A sub-agent's runs are shown inside the tool calls that started them.
    const runs = single ? [single] : (await store.runsOfSession(sessionKey(target))).filter((run) => !run.parentRunId);
    if (runs.length === 0) {
      process.stdout.write(`There is no run or session ${target}; see ${pasteable("sessions")}.\n`);
      return 1;
    }
    const timelines = await Promise.all(
      runs.map(async (run) => ({
        run,
        steps: await store.steps(run.runId),
        feedback: await store.feedbackOf(run.runId),
      })),
    );
    if (options.json) process.stdout.write(`${JSON.stringify(timelines, null, 2)}\n`);
    else {
      const nested = await nestedRunsOf(store, runs);
      process.stdout.write(
        `${timelines.map(({ run, steps, feedback }) => [formatRunTimeline(run, steps, nested), formatFeedback(feedback)].filter(Boolean).join("\n")).join("\n\n")}\n`,
      );
    }
    return 0;
  } finally {
    await store.close();
  }
}
