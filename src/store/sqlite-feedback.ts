/** The feedback book on SQLite: 👍 / 👎 per run and person, the latest click counting. */
import { boundedReason, type Feedback, type FeedbackSource, type Rating } from "../agent/feedback.js";
import type { SqliteStore } from "./sqlite-store.js";

/** A run's raters are the people in one conversation; this bounds a pathological store. */
const MAX_PER_RUN = 200;

export type RecordOutcome = "recorded" | "unknown_run";

interface FeedbackRow {
  run_id: string;
  user_id: string;
  rating: Rating;
  reason: string | null;
  source: FeedbackSource;
  created_at: string;
}

const feedbackOf = (row: FeedbackRow): Feedback => ({
  runId: row.run_id,
  userId: row.user_id,
  rating: row.rating,
  reason: row.reason,
  source: row.source,
  at: row.created_at,
});

export function createFeedbackBook(store: SqliteStore) {
  const { db } = store;
  const statements = {
    runSession: db.prepare("SELECT session_id FROM runs WHERE id = ?").pluck(),
    // A new click replaces the person's earlier one, reason and all.
    upsert:
      db.prepare(`INSERT INTO feedback (run_id, user_id, rating, reason, source, created_at) VALUES (?, ?, ?, ?, ?, ?)
      ON CONFLICT (run_id, user_id) DO UPDATE SET rating = excluded.rating, reason = excluded.reason, source = excluded.source, created_at = excluded.created_at`),
    // A reason belongs to the person's 👎: it only ever completes one.
    reason: db.prepare("UPDATE feedback SET reason = ? WHERE run_id = ? AND user_id = ? AND rating = 'down'"),
    ofRun: db.prepare(
      `SELECT run_id, user_id, rating, reason, source, created_at FROM feedback WHERE run_id = ? ORDER BY created_at, user_id LIMIT ${MAX_PER_RUN}`,
    ),
    counts: db.prepare("SELECT rating, count(*) AS count FROM feedback WHERE created_at >= ? GROUP BY rating"),
    // A run counts as rated down when anyone's latest click on it is 👎, and up when all are 👍.
    rated: db
      .prepare(`SELECT run_id FROM feedback GROUP BY run_id
      HAVING CASE ? WHEN 'down' THEN max(rating = 'down') = 1 WHEN 'up' THEN min(rating = 'up') = 1 ELSE 1 END
      ORDER BY max(created_at) DESC LIMIT ?`)
      .pluck(),
  };

  return {
    /** The session a run belongs to, for the adapter to check the click came from there. */
    sessionOf(runId: string): string | undefined {
      return statements.runSession.get(runId) as string | undefined;
    },

    /** Records a person's 👍 or 👎 (with a reason, if given), replacing what they said before. */
    record(input: {
      runId: string;
      userId: string;
      rating: Rating;
      reason?: unknown;
      source: FeedbackSource;
    }): RecordOutcome {
      if (this.sessionOf(input.runId) === undefined) return "unknown_run";
      statements.upsert.run(
        input.runId,
        input.userId,
        input.rating,
        boundedReason(input.reason),
        input.source,
        new Date().toISOString(),
      );
      return "recorded";
    },

    /** Adds the reason to a person's 👎 of the run; false when they have none (it was changed to 👍 since). */
    explain(runId: string, userId: string, reason: unknown): boolean {
      return statements.reason.run(boundedReason(reason), runId, userId).changes > 0;
    },

    ofRun(runId: string): Feedback[] {
      return (statements.ofRun.all(runId) as FeedbackRow[]).map(feedbackOf);
    },

    /** The runs people rated (down: someone's 👎; up: only 👍; all), newest rating first, at most `limit`. */
    ratedRuns(which: Rating | "all", limit: number): string[] {
      return statements.rated.all(which, limit) as string[];
    },

    /** How many 👍 and 👎 were given since `since` (an ISO time; all of them by default). */
    counts(since = ""): { up: number; down: number } {
      const rows = statements.counts.all(since) as Array<{ rating: Rating; count: number }>;
      return {
        up: rows.find((row) => row.rating === "up")?.count ?? 0,
        down: rows.find((row) => row.rating === "down")?.count ?? 0,
      };
    },
  };
}

export type FeedbackBook = ReturnType<typeof createFeedbackBook>;
