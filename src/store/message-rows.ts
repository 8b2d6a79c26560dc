/** A messages row, as both stores keep it, and the stored message it reads as. */
import type { StoredMessage } from "../agent/contracts.js";
import type { Message } from "../agent/types.js";

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
