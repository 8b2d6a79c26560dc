/**
 * The second baseline's store: the textbook loop that loses nothing commits each step's messages
 * (the reply and its tool results) to SQLite before its next model call — WAL, synchronous NORMAL
 * as glassbox's store, one prepared insert per message, one transaction per step. The least a loop
 * that survives a crash can do.
 */
import Database from "better-sqlite3";
import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";

export interface DurableLog {
  /** Commits one step's messages of a conversation in one transaction. */
  commit(sessionId: string, messages: ChatCompletionMessageParam[]): void;
  close(): void;
}

export function openDurableLog(path: string): DurableLog {
  const db = new Database(path);
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.exec(
    "CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY, session_id TEXT NOT NULL, role TEXT NOT NULL, content TEXT, tool_calls TEXT, tool_call_id TEXT)",
  );
  const insert = db.prepare(
    "INSERT INTO messages (session_id, role, content, tool_calls, tool_call_id) VALUES (?, ?, ?, ?, ?)",
  );
  const commit = db.transaction((sessionId: string, messages: ChatCompletionMessageParam[]) => {
    for (const message of messages) {
      const content = typeof message.content === "string" ? message.content : JSON.stringify(message.content ?? null);
      const toolCalls = "tool_calls" in message && message.tool_calls ? JSON.stringify(message.tool_calls) : null;
      const toolCallId = "tool_call_id" in message ? message.tool_call_id : null;
      insert.run(sessionId, message.role, content, toolCalls, toolCallId);
    }
  });
  return { commit, close: () => db.close() };
}
