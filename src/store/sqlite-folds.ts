/**
 * Where memory folded older turns of a session into its rolling summary, read from what the store
 * keeps: each summary (its text, its size, the messages it covers, when it was written), placed at
 * the step it was made for, with the summarising call's model, tokens and cost. Summaries written
 * before the store kept their step are placed by time: memory folds while it builds a step's
 * context, so such a fold belongs to the first step of the session's own runs recorded after it.
 */
import type { Fold } from "./port-data.js";
import type { SqliteStore } from "./sqlite-store.js";

/** A session's folds are few (each one makes room for many turns); this bounds a pathological store. */
const MAX_FOLDS = 500;

interface SummaryRow {
  epoch: number;
  content: string;
  tokens: number;
  first_message_id: number;
  last_message_id: number;
  created_at: string;
  run_id: string | null;
  step: number | null;
  model: string | null;
  prompt_tokens: number | null;
  completion_tokens: number | null;
  cost: number | null;
}

export function createFoldReader(store: SqliteStore) {
  const { db } = store;
  const statements = {
    summaries: db.prepare(
      `SELECT epoch, content, tokens, first_message_id, last_message_id, created_at, run_id, step, model, prompt_tokens, completion_tokens, cost FROM summaries WHERE session_id = ? ORDER BY id LIMIT ${MAX_FOLDS}`,
    ),
    folded: db
      .prepare("SELECT count(*) FROM messages WHERE session_id = ? AND epoch = ? AND id BETWEEN ? AND ?")
      .pluck(),
    // Sub-agents have no memory: only the session's own runs fold.
    nextStep: db.prepare(`SELECT st.run_id AS runId, st.step FROM steps st JOIN runs r ON r.id = st.run_id
      WHERE r.session_id = ? AND r.parent_run_id IS NULL AND st.created_at >= ? ORDER BY st.created_at, st.id LIMIT 1`),
  };

  return function foldsOf(sessionId: string): Fold[] {
    const rows = statements.summaries.all(sessionId) as SummaryRow[];
    return rows.map((row, index) => {
      const previous = rows.slice(0, index).findLast((earlier) => earlier.epoch === row.epoch);
      const next =
        row.run_id !== null && row.step !== null
          ? { runId: row.run_id, step: row.step }
          : (statements.nextStep.get(sessionId, row.created_at) as { runId: string; step: number } | undefined);
      const call =
        row.model !== null
          ? {
              model: row.model,
              promptTokens: row.prompt_tokens ?? 0,
              completionTokens: row.completion_tokens ?? 0,
              cost: row.cost,
            }
          : null;
      return {
        runId: next?.runId ?? null,
        step: next?.step ?? null,
        call,
        at: row.created_at,
        summary: row.content,
        summaryTokens: row.tokens,
        foldedMessages: statements.folded.get(
          sessionId,
          row.epoch,
          row.first_message_id,
          row.last_message_id,
        ) as number,
        summaryFailed: previous === undefined ? row.content === "" : previous.content === row.content,
      };
    });
  };
}
