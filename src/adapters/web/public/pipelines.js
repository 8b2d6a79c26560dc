// A pipeline's stages are runs of their own; the store links each to the pipeline's first stage
// (pipelineRunId), with its place (pipelineStage) and the pipeline's name.

/** The pipeline a run is a stage of, by name, or null. */
export function pipelineNameOf(run) {
  return run.pipelineName ?? null;
}

/** Whether `run` is the stage after `previous`, the session's run just before it. */
export function isNextStage(run, previous) {
  return Boolean(
    previous && run.pipelineRunId && run.pipelineStage > 1 && run.pipelineRunId === previous.pipelineRunId,
  );
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
