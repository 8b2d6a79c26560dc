/**
 * A run's trace writes on SQLite: a step (its request kept by reference, through the trace's request
 * log), its finished tool calls, the guards' notes, the run's price. The trace recorder
 * (src/agent/trace.ts) shapes these writes; this is where they become rows.
 */
import { modelNotesJson } from "./model-note-rows.js";
import type Database from "better-sqlite3";
import { createRequestLog } from "./sqlite-requests.js";
import type { ToolCallRecord } from "../tools/types.js";
import type { StepRecord } from "./port-data.js";

export function createSqliteSteps(db: Database.Database) {
  const statements = {
    // Positional: the step's fields go straight to their columns, with no object built for the binding.
    insertStep:
      db.prepare(`INSERT INTO steps (run_id, step, model, context_messages, context_tokens, content, reasoning, reasoning_cut_chars, model_notes, requested_calls, tool_calls, notes, prompt_tokens, completion_tokens, latency_ms, cost, request_refs, tools_ref, tool_choice, streamed, created_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '[]', '[]', ?, ?, ?, ?, ?, ?, ?, ?, ?)
      ON CONFLICT (run_id, step) DO NOTHING`),
    // A step's calls usually arrive together, before any other: its list is then written as it is;
    // else appended in SQLite (json_insert at the end of the array), with no read in JavaScript.
    setToolCalls: db.prepare("UPDATE steps SET tool_calls = ? WHERE run_id = ? AND step = ? AND tool_calls = '[]'"),
    addToolCall: db.prepare(
      "UPDATE steps SET tool_calls = json_insert(tool_calls, '$[#]', json(?)) WHERE run_id = ? AND step = ?",
    ),
    addNote: db.prepare("UPDATE steps SET notes = json_insert(notes, '$[#]', ?) WHERE run_id = ? AND step = ?"),
    // The cost of a run is its steps', its sub-agents' runs' and its folds' summarising calls' (unknown if any of them is).
    priceRun:
      db.prepare(`UPDATE runs SET model = (SELECT model FROM steps WHERE run_id = @runId ORDER BY step DESC LIMIT 1),
      cost = (SELECT CASE WHEN count(*) = count(cost) THEN sum(cost) END FROM (
        SELECT cost FROM steps WHERE run_id = @runId UNION ALL SELECT cost FROM runs WHERE parent_run_id = @runId
        UNION ALL SELECT cost FROM summaries WHERE run_id = @runId))
      WHERE id = @runId`),
  };
  const requests = createRequestLog(db);

  return {
    appendStep(step: StepRecord): void {
      const kept = requests.store(step.runId, step.request, step.tools);
      const calls = step.requestedCalls.length > 0 ? JSON.stringify(step.requestedCalls) : null;
      const streamed = step.streamed === undefined ? null : Number(step.streamed);
      statements.insertStep.run(
        step.runId,
        step.step,
        step.model,
        step.contextMessages,
        step.contextTokens,
        step.content,
        step.reasoning,
        step.reasoningCutChars,
        modelNotesJson(step),
        calls,
        step.promptTokens,
        step.completionTokens,
        step.latencyMs,
        step.cost,
        kept.requestRefs,
        kept.toolsRef,
        step.toolChoice ?? null,
        streamed,
        step.at,
      );
    },
    /** What the request log holds in memory for a run: forgotten when it ends, or when its writes were taken back. */
    forgetRun(runId: string): void {
      requests.forget(runId);
    },
    addToolCalls(runId: string, step: number, records: ToolCallRecord[]): void {
      if (records.length === 0 || statements.setToolCalls.run(JSON.stringify(records), runId, step).changes === 1)
        return;
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
