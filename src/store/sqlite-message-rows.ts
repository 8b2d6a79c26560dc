/**
 * Which message objects are exactly a row of the messages table, per connection: a step's recorded
 * request then points at that row instead of storing the message a second time (sqlite-requests).
 * Only committed rows are known (a unit that was taken back registers nothing), and only messages
 * that the row gives back as the same JSON (toStoredMessage's shape, keys in its order).
 */
import type Database from "better-sqlite3";
import type { Message } from "../agent/types.js";

const byConnection = new WeakMap<Database.Database, WeakMap<object, number>>();

function rowsOf(db: Database.Database): WeakMap<object, number> {
  let rows = byConnection.get(db);
  if (!rows) byConnection.set(db, (rows = new WeakMap()));
  return rows;
}

/** The id of the messages row this object is exactly, if known. */
export function messageRowOf(db: Database.Database, message: object): number | undefined {
  return byConnection.get(db)?.get(message);
}

/** Remembers committed rows; a message the row would not give back as the same JSON is left out. */
export function knowMessageRows(db: Database.Database, messages: readonly Message[], ids: readonly number[]): void {
  const rows = rowsOf(db);
  messages.forEach((message, index) => {
    const id = ids[index];
    if (id !== undefined && isRowShaped(message)) rows.set(message, id);
  });
}

/** Rows read back from the table (toStoredMessage's objects): always the row's JSON. */
export function knowReadRows(db: Database.Database, rows: ReadonlyArray<{ id: number; message: Message }>): void {
  const known = rowsOf(db);
  for (const row of rows) known.set(row.message, row.id);
}

/** Whether toStoredMessage(row of this message) serialises as this message does. */
function isRowShaped(message: Message): boolean {
  const keys = Object.keys(message);
  switch (message.role) {
    case "assistant":
      if (message.content !== null && typeof message.content !== "string") return false;
      if (keys.length === 2) return keys[0] === "role" && keys[1] === "content";
      return (
        keys.length === 3 &&
        keys[0] === "role" &&
        keys[1] === "content" &&
        keys[2] === "tool_calls" &&
        Array.isArray(message.tool_calls) &&
        message.tool_calls.length > 0
      );
    case "tool":
      return (
        keys.length === 3 &&
        keys[0] === "role" &&
        keys[1] === "content" &&
        keys[2] === "tool_call_id" &&
        typeof message.content === "string" &&
        typeof message.tool_call_id === "string"
      );
    default:
      return keys.length === 2 && keys[0] === "role" && keys[1] === "content" && typeof message.content === "string";
  }
}
