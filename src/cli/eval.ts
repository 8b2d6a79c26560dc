/**
 * `glassbox eval`: recorded runs (by id, the rated ones with --feedback, or eval case files with
 * --cases) replayed on the configured model (or --model, --system-prompt, --tools) and tabulated; it
 * exits 1 when any now calls different tools, so it can guard a prompt or model change in CI. Where
 * there is a store, each replay is kept there as a run (session `eval:<run>`), and each row links to
 * the recorded run and its replay side by side in the trace viewer.
 */
import { formatNumber, formatTable } from "../adapters/terminal/table.js";
import { readEvalCases } from "../adapters/eval-case-files.js";
import { recordedRunOf } from "../adapters/trace-readings.js";
import { createOpenAIModel } from "../agent/llm/index.js";
import { recordingOf, replayRecording, type Recording, type ReplayComparison } from "../agent/replay.js";
import { createTraceRecorder } from "../agent/trace.js";
import { assertModelConfigured, loadConfig, type GlassboxConfig } from "../config.js";
import type { CommandInput } from "./command.js";
import { UsageError } from "./help.js";
import { glassboxCommand } from "./invocation.js";
import { nothingRecorded, openRecords } from "./records.js";
import { ms, readPrompt, toolSpecs, total } from "./replay.js";

/** The most rated runs eval takes with --feedback. */
const MAX_RATED_RUNS = 200;

interface EvalRow extends ReplayComparison {
  /** The eval case file it came from. */
  case?: string;
  /** The recorded run and its replay side by side in the trace viewer; absent when the replay was not kept. */
  compareUrl?: string;
}

export default async function evalCommand({ positionals, options }: CommandInput): Promise<number> {
  const which = options.feedback;
  if (which !== undefined && which !== "down" && which !== "up" && which !== "all")
    throw new UsageError("--feedback takes down, up or all.");
  if (positionals.length === 0 && which === undefined && options.cases.length === 0)
    throw new UsageError(
      `Name the recorded runs to replay (${glassboxCommand()} eval <run-id>...), take the rated ones (--feedback down|up|all), or eval case files (--cases evals/).`,
    );
  const config = loadConfig();
  assertModelConfigured(config);
  const systemPrompt = options["system-prompt"] === undefined ? undefined : readPrompt(options["system-prompt"]);
  const tools = options.tools.length > 0 ? await toolSpecs(options.tools) : undefined;
  const cases = readEvalCases(options.cases);
  const wantsStore = positionals.length > 0 || which !== undefined;
  const records = await openRecords({ write: true });
  const { store } = records;
  if (!store && wantsStore) {
    process.stdout.write(`${nothingRecorded(records)}\n`);
    return 1;
  }
  try {
    const runIds = [
      ...new Set([...positionals, ...(which && store ? await store.ratedRuns(which, MAX_RATED_RUNS) : [])]),
    ];
    const recordings: Array<{ recording: Recording; file?: string }> = cases.map(({ file, evalCase }) => ({
      recording: evalCase,
      file,
    }));
    if (store)
      for (const runId of runIds) recordings.push({ recording: recordingOf(await recordedRunOf(store, runId), runId) });
    if (recordings.length === 0) {
      process.stdout.write(
        options.cases.length > 0
          ? `No eval case files in ${options.cases.join(", ")}; save some from the trace viewer.\n`
          : `No run is rated${which === "all" ? "" : ` ${which}`} yet; people rate answers with 👍 / 👎.\n`,
      );
      return 0;
    }
    const model = createOpenAIModel({
      ...config.model,
      ...(options.model ? { model: options.model } : {}),
      stream: false,
    });
    const trace = store && createTraceRecorder(store, { prices: config.prices });
    const rows: EvalRow[] = [];
    for (const { recording, file } of recordings) {
      const comparison = await replayRecording(recording, {
        model,
        systemPrompt,
        tools,
        ...(trace ? { trace, sessionId: `eval:${recording.runId}` } : {}),
      });
      rows.push({
        ...comparison,
        ...(file ? { case: file } : {}),
        ...(trace ? { compareUrl: compareUrl(config, recording.runId, comparison.replayRunId) } : {}),
      });
    }
    print(rows, options.json);
    return rows.every((row) => row.sameToolCalls) ? 0 : 1;
  } finally {
    await store?.close();
  }
}

/** The trace viewer's compare of two runs, where people open it: GLASSBOX_PUBLIC_URL, else this machine's web server. */
export function compareUrl(config: Pick<GlassboxConfig, "publicUrl" | "web">, a: string, b: string): string {
  const { host, port } = config.web;
  const local = ["0.0.0.0", "::", ""].includes(host) ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host;
  const base = config.publicUrl ?? `http://${local}:${port}`;
  return `${base}/trace#compare=${encodeURIComponent(a)},${encodeURIComponent(b)}`;
}

function print(rows: EvalRow[], json: boolean): void {
  const changed = rows.filter((row) => !row.sameToolCalls);
  if (json) {
    process.stdout.write(`${JSON.stringify({ runs: rows, changedToolCalls: changed.length }, null, 2)}\n`);
    return;
  }
  const linked = rows.some((row) => row.compareUrl);
  const table = formatTable(
    [
      { header: "run" },
      { header: "tool calls" },
      { header: "answer" },
      { header: "tokens", align: "right" },
      { header: "model time", align: "right" },
      ...(linked ? [{ header: "compare" }] : []),
    ],
    rows.map((row) => [
      row.runId,
      row.sameToolCalls ? "same" : `differ at call ${row.divergesAtCall}`,
      row.sameAnswer ? "same" : "changed",
      `${formatNumber(total(row.original))} -> ${formatNumber(total(row.replay))}`,
      `${ms(row.original.latencyMs)} -> ${ms(row.replay.latencyMs)}`,
      ...(linked ? [row.compareUrl ?? "—"] : []),
    ]),
  );
  const verdict =
    changed.length === 0
      ? `All ${rows.length} replayed runs call the same tools.`
      : `${changed.length} of ${rows.length} replayed runs call different tools.`;
  const kept = linked
    ? ""
    : "\nThe replays were not kept (no store yet), so the rows link to nothing; set GLASSBOX_DB to keep them.";
  process.stdout.write(`${table}\n\n${verdict}${kept}\n`);
}
