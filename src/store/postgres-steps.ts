/**
 * A run's trace writes on PostgreSQL: a step, its request kept by reference (each distinct message
 * and tool list of a run stored once, in step_messages, numbered within the run; a step keeps the
 * numbers it sent), its finished tool calls and the guards' notes appended to jsonb lists, and the
 * run's price. Sent inside the transaction of a run's writes, with the statements after them.
 */
import { modelNotesJson } from "./model-note-rows.js";
import { rangesOf } from "./request-refs.js";
import type { Message, ToolSpec } from "../agent/types.js";
import type { ToolCallRecord } from "../tools/types.js";
import type { StepRecord } from "./port-data.js";
import type { Db, PostgresTransaction } from "./postgres-client.js";
import { PRICE } from "./postgres-runs.js";

type Part = Message | ToolSpec[];

/** What a run has stored so far, as this handle knows it: a part found by identity, else by its JSON. */
interface RunParts {
  next: number;
  byObject: WeakMap<object, number>;
  byJson: Map<string, number>;
}

export function createPostgresSteps() {
  const runs = new Map<string, RunParts>();

  /** What `runId` has stored, read when this handle does not know it yet: before a step of it is sent. */
  async function loadParts(db: Db, runId: string): Promise<void> {
    if (runs.has(runId)) return;
    // A resumed run (after an approval, a restart, on another worker) goes on numbering after what it stored.
    const { rows } = await db.query<{ last: number }>(
      "SELECT coalesce(max(seq), 0) AS last FROM step_messages WHERE run_id = $1",
      [runId],
    );
    if (!runs.has(runId))
      runs.set(runId, { next: (rows[0]?.last ?? 0) + 1, byObject: new WeakMap(), byJson: new Map() });
  }

  /** What is new in a step's request, to store beside it, and the refs for its row. */
  function requestOf(
    runId: string,
    messages: Message[],
    tools: ToolSpec[] | undefined,
  ): { fresh: Array<{ seq: number; body: string }>; requestRefs: string; toolsRef: number | null } {
    const parts = runs.get(runId);
    if (!parts) throw new Error(`run ${runId}'s stored parts are not loaded: call loadParts first`);
    const fresh: Array<{ seq: number; body: string }> = [];
    const seqOf = (part: Part): number => {
      const known = parts.byObject.get(part);
      if (known !== undefined) return known;
      const body = JSON.stringify(part);
      let seq = parts.byJson.get(body);
      if (seq === undefined) {
        seq = parts.next++;
        fresh.push({ seq, body });
        parts.byJson.set(body, seq);
      }
      parts.byObject.set(part, seq);
      return seq;
    };
    const seqs = messages.map(seqOf);
    const toolsRef = tools?.length ? seqOf(tools) : null;
    return { fresh, requestRefs: rangesOf(seqs), toolsRef };
  }

  return {
    /** A run this handle has just started (from nothing, or accepted): it has stored no parts yet. */
    startedRun(runId: string): void {
      runs.set(runId, { next: 1, byObject: new WeakMap(), byJson: new Map() });
    },
    loadParts,
    /** The step and the new parts of its request, in one statement, sent (its run's parts loaded first). */
    appendStep(transaction: PostgresTransaction, step: StepRecord): void {
      const { fresh, requestRefs, toolsRef } = requestOf(step.runId, step.request, step.tools);
      transaction.send(
        `WITH parts AS (
           INSERT INTO step_messages (run_id, seq, body) SELECT $1, seq, body FROM unnest($20::integer[], $21::text[]) AS part(seq, body)
         )
         INSERT INTO steps (run_id, step, model, context_messages, context_tokens, content, reasoning, reasoning_cut_chars, model_notes,
           prompt_tokens, completion_tokens, latency_ms, cost, request_refs, tools_ref, tool_choice, streamed, created_at, requested_calls)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19::jsonb)
         ON CONFLICT (run_id, step) DO NOTHING`,
        [
          step.runId,
          step.step,
          step.model,
          step.contextMessages,
          step.contextTokens,
          step.content,
          step.reasoning,
          step.reasoningCutChars,
          modelNotesJson(step),
          step.promptTokens,
          step.completionTokens,
          step.latencyMs,
          step.cost,
          requestRefs,
          toolsRef,
          step.toolChoice ?? null,
          step.streamed ?? null,
          step.at,
          step.requestedCalls.length > 0 ? JSON.stringify(step.requestedCalls) : null,
          fresh.map((part) => part.seq),
          fresh.map((part) => part.body),
        ],
      );
    },
    addToolCalls(transaction: PostgresTransaction, runId: string, step: number, records: ToolCallRecord[]): void {
      if (records.length === 0) return;
      transaction.send("UPDATE steps SET tool_calls = tool_calls || $1::jsonb WHERE run_id = $2 AND step = $3", [
        JSON.stringify(records),
        runId,
        step,
      ]);
    },
    addNote(transaction: PostgresTransaction, runId: string, step: number, text: string): void {
      transaction.send(
        "UPDATE steps SET notes = notes || jsonb_build_array($1::text) WHERE run_id = $2 AND step = $3",
        [text, runId, step],
      );
    },
    priceRun(transaction: PostgresTransaction, runId: string): void {
      transaction.send(`UPDATE runs SET ${PRICE} WHERE id = $1`, [runId]);
    },
    /** The run has ended, or its writes were taken back: this handle forgets what it stored for it. */
    forgetRun(runId: string): void {
      runs.delete(runId);
    },
  };
}

export type PostgresSteps = ReturnType<typeof createPostgresSteps>;
