/**
 * A run's trace writes on SQLite: a step (its request kept by reference, through the trace's request
 * log), its finished tool calls, the guards' notes, the run's price. The trace recorder
 * (src/agent/trace.ts) shapes these writes; this is where they become rows.
 */
import type Database from "better-sqlite3";
import { createRequestLog } from "./sqlite-requests.js";
import type { ToolCallRecord } from "../tools/types.js";
import type { StepRecord } from "./port-data.js";

export function createSqliteSteps(db: Database.Database) {
  const statements = {
    insertStep: db.prepare(`INSERT INTO steps (run_id, step, model, context_messages, context_tokens, content, reasoning, reasoning_cut_chars, model_notes, requested_calls, tool_calls, notes, prompt_tokens, completion_tokens, latency_ms, cost, request_refs, tools_ref, tool_choice, streamed, created_at)
      VALUES (@runId, @step, @model, @contextMessages, @contextTokens, @content, @reasoning, @reasoningCutChars, @modelNotes, @requestedCalls, '[]', '[]', @promptTokens, @completionTokens, @latencyMs, @cost, @requestRefs, @toolsRef, @toolChoice, @streamed, @at)
      ON CONFLICT (run_id, step) DO NOTHING`),
    // Appended in SQLite (json_insert at the end of the array): no read, parse and rewrite in JavaScript.
    addToolCall: db.prepare("UPDATE steps SET tool_calls = json_insert(tool_calls, '$[#]', json(?)) WHERE run_id = ? AND step = ?"),
    addNote: db.prepare("UPDATE steps SET notes = json_insert(notes, '$[#]', ?) WHERE run_id = ? AND step = ?"),
    // The cost of a run is its steps', its sub-agents' runs' and its folds' summarising calls' (unknown if any of them is).
    priceRun: db.prepare(`UPDATE runs SET model = (SELECT model FROM steps WHERE run_id = @runId ORDER BY step DESC LIMIT 1),
      cost = (SELECT CASE WHEN count(*) = count(cost) THEN sum(cost) END FROM (
        SELECT cost FROM steps WHERE run_id = @runId UNION ALL SELECT cost FROM runs WHERE parent_run_id = @runId
        UNION ALL SELECT cost FROM summaries WHERE run_id = @runId))
      WHERE id = @runId`),
  };
  const requests = createRequestLog(db);

  return {
    appendStep(step: StepRecord): void {
      const { request, tools, toolChoice, streamed, modelNotes, requestedCalls, ...columns } = step;
      const kept = requests.store(step.runId, request, tools);
      const calls = requestedCalls.length > 0 ? JSON.stringify(requestedCalls) : null;
      statements.insertStep.run({ ...columns, modelNotes: JSON.stringify(modelNotes), requestedCalls: calls, ...kept, toolChoice: toolChoice ?? null, streamed: streamed === undefined ? null : Number(streamed) });
    },
    /** What the request log holds in memory for a run: forgotten when it ends, or when its writes were taken back. */
    forgetRun(runId: string): void {
      requests.forget(runId);
    },
    addToolCalls(runId: string, step: number, records: ToolCallRecord[]): void {
      for (const record of records) statements.addToolCall.run(JSON.stringify(record), runId, step);
    },
    addNote(runId: string, step: number, text: string): void {
      statements.addNote.run(text, runId, step);
    },
    priceRun(runId: string): void {
      statements.priceRun.run({ runId });
    },
  };
}

export type SqliteSteps = ReturnType<typeof createSqliteSteps>;
