/**
 * Long-term facts on PostgreSQL, found by full-text search: a fact's words (split as search-words.ts
 * splits them, the way SQLite's FTS5 would) are indexed as a tsvector; a query's words, each quoted,
 * any of them matching, are ranked by ts_rank (more of the words matched ranks higher).
 */
import type pg from "pg";
import { factOf, originColumn, type FactRow } from "./fact-rows.js";
import type { Fact, FactOrigin } from "./port-data.js";
import { indexedText, queryWords } from "./search-words.js";

export function createPostgresFacts(pool: pg.Pool) {
  return {
    async addFact(userId: string, scope: string, content: string, origin?: FactOrigin): Promise<number> {
      const { rows } = await pool.query<{ id: number }>(
        "INSERT INTO facts (user_id, scope, content, words, created_at, origin) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
        [userId, scope, content, indexedText(content), new Date().toISOString(), originColumn(origin)],
      );
      return (rows[0] as { id: number }).id;
    },
    async forgetFact(userId: string, factId: number, channel?: string, approverOf?: string): Promise<boolean> {
      if (!Number.isSafeInteger(factId)) return false;
      // A note shared with a channel: anyone there, or an approver of its platform (a prefix of its scope).
      const deleted = await pool.query(
        `DELETE FROM facts WHERE id = $1 AND (user_id = $2 OR (scope <> 'user' AND (scope = $3
           OR left(scope, length($4::text)) = $4::text)))`,
        [factId, userId, channel ?? null, approverOf || null],
      );
      return (deleted.rowCount ?? 0) > 0;
    },
    /** The user's own facts and those shared with `channel` that match any word of `query`, best first. */
    async searchFacts(userId: string, channel: string, query: string, limit: number): Promise<Fact[]> {
      const words = queryWords(query);
      if (words.length === 0) return [];
      // Words are letters and digits only, so quoting each leaves no tsquery syntax in them.
      const tsquery = words.map((word) => `'${word}'`).join(" | ");
      const { rows } = await pool.query<FactRow>(
        `SELECT f.id, f.user_id AS "userId", f.scope, f.content, f.created_at AS "createdAt", f.origin
         FROM facts f, to_tsquery('simple', $1) AS query
         WHERE f.search @@ query AND ((f.scope = 'user' AND f.user_id = $2) OR f.scope = $3)
         ORDER BY ts_rank(f.search, query) DESC, f.id LIMIT $4`,
        [tsquery, userId, channel, limit],
      );
      return rows.map(factOf);
    },
  };
}
