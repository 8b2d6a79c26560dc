/**
 * Ending a turn's job from inside its task, on graphile-worker 0.17's own tables (the same
 * statements as its complete_job and force_unlock_workers), where its own ending would not do:
 *
 * - finishJob: graphile-worker writes a job's completion without waiting for it and looks for the
 *   next job at once, while the conversation's queue is still locked by the job just done; the
 *   conversation's next turn would then wait for a poll. Finishing the job before the task returns
 *   lets the next turn start straight away (graphile-worker's own completion then finds nothing).
 * - releaseJob: after a lost lease, graphile-worker's failure path would push the job's run_at back,
 *   behind the conversation's later turns; this gives it back unchanged, in its place.
 *
 * Both touch only a lock this worker holds, so a job another worker has taken over is left alone.
 */
export type Query = (text: string, values: unknown[]) => Promise<unknown>;

export async function finishJob(query: Query, schema: string, jobId: string, workerId: string): Promise<void> {
  await query(
    `with job as (
       delete from "${schema}"._private_jobs where id = $1 and locked_by = $2 returning job_queue_id
     )
     update "${schema}"._private_job_queues set locked_at = null, locked_by = null where id in (select job_queue_id from job) and locked_by = $2`,
    [jobId, workerId],
  );
}

export async function releaseJob(query: Query, schema: string, jobId: string, workerId: string): Promise<void> {
  await query(
    `with job as (
       update "${schema}"._private_jobs set locked_at = null, locked_by = null where id = $1 and locked_by = $2 returning job_queue_id
     ), conversation as (
       update "${schema}"._private_job_queues set locked_at = null, locked_by = null where id in (select job_queue_id from job) and locked_by = $2
     )
     select pg_notify('jobs:insert', '{"count":1}') from job`,
    [jobId, workerId],
  );
}
