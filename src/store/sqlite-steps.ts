/**
 * A run's trace writes on SQLite: a step (its request kept by reference, through the trace's request
 * log), its finished tool calls, the guards' notes, the run's price. The trace recorder
 * (src/agent/trace.ts) shapes these writes; this is where they become rows. A step's row is written
 * when its unit ends, with the tool calls and notes the same unit gave it (a reply and the results
 * of its fast tools commit together): one insert, not an insert and an update per call.
 */
import type Database from "better-sqlite3";
import { createRequestLog } from "./sqlite-requests.js";
import type { ToolCallRecord } from "../tools/types.js";
import type { StepRecord } from "./port-data.js";

export function createSqliteSteps(db: Database.Database) {
  const statements = {
    // Positional parameters: binding twenty by name costs a property lookup each.
    insertStep: db.prepare(`INSERT INTO steps (run_id, step, model, context_messages, context_tokens, content, reasoning, reasoning_cut_chars, model_notes, tool_calls, notes, prompt_tokens, completion_tokens, latency_ms, cost, request_refs, tools_ref, tool_choice, streamed, created_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
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
  // Steps of the unit being applied, by run and number, with the tool calls and notes it added to them.
  const staged = new Map<string, { step: StepRecord; toolCalls: string[]; notes: string[] }>();
  const keyOf = (runId: string, step: number) => `${step}:${runId}`;
  const addToolCall = (runId: string, step: number, record: string) => statements.addToolCall.run(record, runId, step);
  const addNote = (runId: string, step: number, text: string) => statements.addNote.run(text, runId, step);

  function insert({ step, toolCalls, notes }: { step: StepRecord; toolCalls: string[]; notes: string[] }): void {
    const { runId, request, tools, toolChoice, streamed, modelNotes } = step;
    const kept = requests.store(runId, request, tools);
    const values = [runId, step.step, step.model, step.contextMessages, step.contextTokens, step.content, step.reasoning, step.reasoningCutChars, JSON.stringify(modelNotes)];
    const inserted = statements.insertStep.run(
      ...values,
      `[${toolCalls.join(",")}]`,
      JSON.stringify(notes),
      step.promptTokens,
      step.completionTokens,
      step.latencyMs,
      step.cost,
      kept.requestRefs,
      kept.toolsRef,
      toolChoice ?? null,
      streamed === undefined ? null : Number(streamed),
      step.at,
    );
    if (inserted.changes > 0) return;
    // The step was written before (a second write of it is ignored): its calls and notes go on its row.
    for (const record of toolCalls) addToolCall(runId, step.step, record);
    for (const text of notes) addNote(runId, step.step, text);
  }

  function writeStaged(): void {
    for (const entry of staged.values()) insert(entry);
    staged.clear();
  }

  return {
    /** Staged until the unit ends (writeStaged), so the unit's tool calls and notes for it join its row. */
    appendStep(step: StepRecord): void {
      const key = keyOf(step.runId, step.step);
      if (!staged.has(key)) staged.set(key, { step, toolCalls: [], notes: [] }); // a second write of a step is ignored
    },
    /** Writes the steps staged by the unit so far; at its end, and before anything that reads them. */
    writeStaged,
    /** A unit that failed: what it staged goes with it. */
    dropStaged(): void {
      staged.clear();
    },
    /** What the request log holds in memory for a run: forgotten when it ends, or when its writes were taken back. */
    forgetRun(runId: string): void {
      requests.forget(runId);
    },
    addToolCalls(runId: string, step: number, records: ToolCallRecord[]): void {
      const entry = staged.get(keyOf(runId, step));
      for (const record of records) {
        if (entry) entry.toolCalls.push(JSON.stringify(record));
        else addToolCall(runId, step, JSON.stringify(record));
      }
    },
    addNote(runId: string, step: number, text: string): void {
      const entry = staged.get(keyOf(runId, step));
      if (entry) entry.notes.push(text);
      else addNote(runId, step, text);
    },
    priceRun(runId: string): void {
      writeStaged(); // the price reads the run's steps
      statements.priceRun.run({ runId });
    },
  };
}

export type SqliteSteps = ReturnType<typeof createSqliteSteps>;
