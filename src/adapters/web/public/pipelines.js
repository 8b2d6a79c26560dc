// Which stored runs are the later stages of a pipeline. The store keeps each stage as a run of its
// own without a link to the first; a stage is known by what a pipeline does: it starts at once,
// for the same user, with the previous stage's answer as its whole input.

const PIPELINE_COMMAND = /^\/pipeline\s+(\S+)\s/i;
/** A later stage starts as soon as the stage before it ends (the same turn); a person takes longer. */
const STAGE_GAP_MS = 2_000;

/** The pipeline a run's input names ("/pipeline triage …"), or null. */
export function pipelineNameOf(run) {
  return PIPELINE_COMMAND.exec(run.input ?? "")?.[1] ?? null;
}

/** Whether `run` is the stage after `previous`, the session's run just before it. */
export function isNextStage(run, previous) {
  if (!previous || run.parentRunId || previous.parentRunId || run.userId !== previous.userId) return false;
  if (previous.status !== "final" && previous.status !== "max_steps") return false;
  if (!previous.output || run.input !== previous.output || !previous.endedAt) return false;
  return Date.parse(run.startedAt) - Date.parse(previous.endedAt) <= STAGE_GAP_MS;
}

/** The session's own runs (no sub-agents') grouped: a run alone, or a pipeline's stages in order. */
export function groupStages(runs) {
  const groups = [];
  let previous = null;
  for (const run of runs) {
    if (run.parentRunId) continue;
    const last = groups.at(-1);
    if (last && isNextStage(run, previous)) last.push(run);
    else groups.push([run]);
    previous = run;
  }
  return groups;
}
