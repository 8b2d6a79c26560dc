/** The plain data of the SQLite store: messages, summaries, sessions, facts and runs as they go in and out. */
import type { AgentEvent } from "./events.js";
import type { PipelineStage, RunResult } from "./run.js";
import type { Message } from "./types.js";

export interface StoredMessage {
  id: number;
  runId: string | null;
  message: Message;
  tokens: number;
}

export interface Summary {
  content: string;
  tokens: number;
  /** The summary covers every message of its session epoch up to and including this id. */
  lastMessageId: number;
}

/** The summarising call behind a summary: the run and step it made room for, and what it cost. */
export interface SummaryCall {
  runId: string;
  step: number;
  model: string;
  promptTokens: number;
  completionTokens: number;
  cost: number | null;
}

export interface SessionInfo {
  id: string;
  messageCount: number;
  tokens: number;
  runCount: number;
  lastActivity: string;
  /** Who started the session's first run; null for a session without runs. */
  startedBy: string | null;
}

export interface Fact {
  id: number;
  userId: string;
  scope: string;
  content: string;
  createdAt: string;
}

export interface RunRecord {
  runId: string;
  sessionId: string;
  userId: string;
  input: string;
  /** For a sub-agent's run: the run and tool call it works for. */
  parent?: { runId: string; toolCallId: string };
  pipeline?: PipelineStage;
}

export interface RunOutcome {
  runId: string;
  status: string;
  output: string;
  steps: number;
  promptTokens: number;
  completionTokens: number;
  /** JSON of a paused run while it waits for approval; null otherwise. */
  paused: string | null;
  error: string | null;
}

/** The run a run_start event starts, as the store keeps it. */
export function runRecordOf(event: Extract<AgentEvent, { type: "run_start" }>): RunRecord {
  const { runId, sessionId, userId, input, parent, pipeline } = event;
  return { runId, sessionId, userId, input, ...(parent ? { parent } : {}), ...(pipeline ? { pipeline } : {}) };
}

/** How a run ended, as its row stores it. */
export function runOutcomeOf(result: RunResult): RunOutcome {
  return {
    runId: result.runId,
    status: result.stopReason,
    output: result.output,
    steps: result.steps,
    promptTokens: result.usage.promptTokens,
    completionTokens: result.usage.completionTokens,
    paused: result.paused ? JSON.stringify(result.paused) : null,
    error: result.error ? JSON.stringify(result.error) : null,
  };
}

/** The store's operations; every write is committed before the call returns (within `atomically`, before its promise resolves). */

/** A messages row, as both stores keep it. */
export interface MessageRow {
  id: number;
  run_id: string | null;
  role: Message["role"];
  content: string | null;
  tool_calls: string | null;
  tool_call_id: string | null;
  tokens: number;
}

export function toStoredMessage(row: MessageRow): StoredMessage {
  const content = row.content ?? "";
  const message: Message =
    row.role === "assistant"
      ? {
          role: "assistant",
          content: row.content,
          ...(row.tool_calls ? { tool_calls: JSON.parse(row.tool_calls) } : {}),
        }
      : row.role === "tool"
        ? { role: "tool", content, tool_call_id: row.tool_call_id ?? "" }
        : { role: row.role, content };
  return { id: row.id, runId: row.run_id, message, tokens: row.tokens };
}
