/** 👍 / 👎 on PostgreSQL: the rules of sqlite-feedback.ts (the SQLite book), one row per person and run. */
import type pg from "pg";
import { boundedReason, type Feedback, type Rating } from "../agent/feedback.js";
import type { FeedbackInput } from "./port.js";

/** A run's raters are the people in one conversation; this bounds a pathological store. */
const MAX_PER_RUN = 200;

export function createPostgresFeedback(pool: pg.Pool) {
  return {
    async recordFeedback(input: FeedbackInput): Promise<"recorded" | "unknown_run"> {
      const { rowCount } = await pool.query(
        `INSERT INTO feedback (run_id, user_id, rating, reason, source, created_at)
         SELECT $1, $2, $3, $4, $5, $6 WHERE EXISTS (SELECT 1 FROM runs WHERE id = $1)
         ON CONFLICT (run_id, user_id) DO UPDATE SET rating = excluded.rating, reason = excluded.reason, source = excluded.source, created_at = excluded.created_at`,
        [input.runId, input.userId, input.rating, boundedReason(input.reason), input.source, new Date().toISOString()],
      );
      return (rowCount ?? 0) > 0 ? "recorded" : "unknown_run";
    },
    async explainFeedback(runId: string, userId: string, reason: unknown): Promise<boolean> {
      const { rowCount } = await pool.query(
        "UPDATE feedback SET reason = $1 WHERE run_id = $2 AND user_id = $3 AND rating = 'down'",
        [boundedReason(reason), runId, userId],
      );
      return (rowCount ?? 0) > 0;
    },
    async feedbackOf(runId: string): Promise<Feedback[]> {
      const { rows } = await pool.query<Feedback>(
        `SELECT run_id AS "runId", user_id AS "userId", rating, reason, source, created_at AS "at" FROM feedback WHERE run_id = $1 ORDER BY created_at, user_id COLLATE "C" LIMIT ${MAX_PER_RUN}`,
        [runId],
      );
      return rows;
    },
    async ratedRuns(which: Rating | "all", limit: number): Promise<string[]> {
      const having =
        which === "down" ? "bool_or(rating = 'down')" : which === "up" ? "bool_and(rating = 'up')" : "true";
      const { rows } = await pool.query<{ run_id: string }>(
        `SELECT run_id FROM feedback GROUP BY run_id HAVING ${having} ORDER BY max(created_at) DESC LIMIT $1`,
        [limit],
      );
      return rows.map((row) => row.run_id);
    },
    async feedbackCounts(since = ""): Promise<{ up: number; down: number }> {
      const { rows } = await pool.query<{ rating: Rating; count: number }>(
        "SELECT rating, count(*)::int AS count FROM feedback WHERE ($1::timestamptz IS NULL OR created_at >= $1::timestamptz) GROUP BY rating",
        [since || null],
      );
      return {
        up: rows.find((row) => row.rating === "up")?.count ?? 0,
        down: rows.find((row) => row.rating === "down")?.count ?? 0,
      };
    },
  };
}
