/**
 * One PostgreSQL statement made of several writes, for a commit that is atomic without BEGIN and
 * COMMIT (one statement instead of three or more, one round trip). Each write is one of its WITH
 * queries, written with its own parameters from $1 and renumbered here after the writes before it
 * (the store's statement texts hold no `$` but their parameters). PostgreSQL runs every data-modifying
 * WITH query once, to completion, on the snapshot the statement began with: none sees another's
 * changes (only what it RETURNs, by its name), and no row may be changed by two of them, so writes
 * that build on each other's rows do not belong in one statement.
 */
import type pg from "pg";
import { RETRYABLE } from "./postgres-client.js";

export class Statement {
  private readonly queries: string[] = [];
  private readonly values: unknown[] = [];

  /** Adds `text`, with its parameters `values` ($1 on), as the WITH query `name`. */
  with(name: string, text: string, values: readonly unknown[]): this {
    this.queries.push(`${name} AS (${this.numbered(text)})`);
    this.values.push(...values);
    return this;
  }

  /** The statement's text and values, ending in `final` (a SELECT or a write, with parameters of its own). */
  finish(final: string, values: readonly unknown[] = []): [string, unknown[]] {
    const text = this.numbered(final);
    const all = [...this.values, ...values];
    return [this.queries.length > 0 ? `WITH ${this.queries.join(", ")} ${text}` : text, all];
  }

  private numbered(text: string): string {
    const before = this.values.length;
    return before === 0 ? text : text.replace(/\$(\d+)/g, (_, number: string) => `$${Number(number) + before}`);
  }
}

/** Runs one statement on the pool; again, a few times, after a deadlock or a serialization failure. */
export async function runStatement<R extends pg.QueryResultRow>(
  pool: pg.Pool,
  [text, values]: [string, unknown[]],
): Promise<pg.QueryResult<R>> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await pool.query<R>(text, values);
    } catch (error) {
      if (attempt < 4 && RETRYABLE.has((error as { code?: string }).code ?? "")) continue;
      throw error;
    }
  }
}
