/**
 * Each step's exact request, kept so the trace can show it, without storing the conversation again
 * on every step. A message that is exactly a row of the messages table (memory stored it, or read
 * it from there; sqlite-message-rows) is pointed at by its row id ("m12-40"); any other part (the
 * system prompt, a request with remembered facts, the tool list) is stored once per run in
 * step_messages, numbered within the run ("1-3"). A step keeps only these references, as ranges
 * ("1,m12-40,2"). A 50-step run then writes nothing of its messages a second time.
 */
import { gunzipSync } from "node:zlib";
import type Database from "better-sqlite3";
import type { Message, ToolSpec } from "../agent/types.js";
import type { RecordedRequest } from "../agent/contracts.js";
import { toStoredMessage, type MessageRow } from "./message-rows.js";
import { messageRowOf } from "./sqlite-message-rows.js";
import { seqsOf } from "./request-refs.js";

export type { RecordedRequest };

/** The columns a step row keeps for its request. */
export interface RequestRefs {
  requestRefs: string;
  toolsRef: number | null;
}

type Part = Message | ToolSpec[];

/**
 * What a run has stored so far: a part found by identity, else by its JSON (a rebuilt system
 * message), looked up by the JSON's hash and confirmed against the stored body, so a long run's
 * messages are not kept in memory a second time as JSON.
 */
interface RunParts {
  next: number;
  byObject: WeakMap<object, number>;
  /** A part's number by its JSON's hash (several numbers only when hashes collide). */
  byHash: Map<number, number | number[]>;
}

export function createRequestLog(db: Database.Database) {
  const statements = {
    lastSeq: db.prepare("SELECT coalesce(max(seq), 0) FROM step_messages WHERE run_id = ?").pluck(),
    insert: db.prepare("INSERT INTO step_messages (run_id, seq, body) VALUES (?, ?, ?)"),
    body: db.prepare("SELECT body FROM step_messages WHERE run_id = ? AND seq = ?").pluck(),
    bodies: db.prepare("SELECT seq, body FROM step_messages WHERE run_id = ?"),
    legacy: db.prepare("SELECT payload FROM steps WHERE run_id = ? AND step = ?").pluck(),
    refs: db.prepare("SELECT request_refs, tools_ref, tool_choice, streamed FROM steps WHERE run_id = ? AND step = ?"),
    rows: db.prepare(
      "SELECT id, run_id, role, content, tool_calls, tool_call_id, tokens FROM messages WHERE id IN (SELECT value FROM json_each(?))",
    ),
  };
  const runs = new Map<string, RunParts>();

  function partsOf(runId: string): RunParts {
    let parts = runs.get(runId);
    if (!parts) {
      // A resumed run (after an approval, or a restart) goes on numbering after what it stored.
      parts = { next: (statements.lastSeq.get(runId) as number) + 1, byObject: new WeakMap(), byHash: new Map() };
      runs.set(runId, parts);
    }
    return parts;
  }

  /** The number of a part in its run, storing it the first time it is seen. */
  function seqOf(runId: string, parts: RunParts, part: Part): number {
    const known = parts.byObject.get(part);
    if (known !== undefined) return known;
    const json = JSON.stringify(part);
    const hash = hashOf(json);
    const hashed = parts.byHash.get(hash);
    const candidates = hashed === undefined ? [] : typeof hashed === "number" ? [hashed] : hashed;
    let seq = candidates.find((candidate) => statements.body.get(runId, candidate) === json);
    if (seq === undefined) {
      seq = parts.next++;
      statements.insert.run(runId, seq, json);
      parts.byHash.set(hash, hashed === undefined ? seq : [...candidates, seq]);
    }
    parts.byObject.set(part, seq);
    return seq;
  }

  return {
    /** Stores what is new in a step's request (call inside the step's transaction); the refs for its row. */
    store(runId: string, messages: Message[], tools: ToolSpec[] | undefined): RequestRefs {
      const parts = partsOf(runId);
      const refs = messages.map((message): Ref => {
        const row = messageRowOf(db, message);
        return row !== undefined ? { row } : { seq: seqOf(runId, parts, message) };
      });
      return { requestRefs: refsText(refs), toolsRef: tools?.length ? seqOf(runId, parts, tools) : null };
    },
    /** The run has ended here: what it stored is on disk, and this process forgets it. */
    forget(runId: string): void {
      runs.delete(runId);
    },
    /** A step's request as it was sent; undefined when the step is not recorded. */
    read(runId: string, step: number): RecordedRequest | Message[] | undefined {
      const row = statements.refs.get(runId, step) as
        | { request_refs: string | null; tools_ref: number | null; tool_choice: string | null; streamed: number | null }
        | undefined;
      if (!row) return undefined;
      if (row.request_refs === null)
        return legacyPayload(statements.legacy.get(runId, step) as string | Buffer | null | undefined);
      const refs = refsOf(row.request_refs);
      const bodies = new Map(
        (statements.bodies.all(runId) as Array<{ seq: number; body: string }>).map((entry) => [entry.seq, entry.body]),
      );
      const part = (seq: number) => JSON.parse(bodies.get(seq) ?? "null") as unknown;
      const wanted = refs.flatMap((ref) => ("row" in ref ? [ref.row] : []));
      const rows = new Map(
        wanted.length === 0
          ? []
          : (statements.rows.all(JSON.stringify(wanted)) as MessageRow[]).map((entry) => [
              entry.id,
              toStoredMessage(entry).message,
            ]),
      );
      return {
        messages: refs.map((ref) => ("row" in ref ? (rows.get(ref.row) ?? null) : part(ref.seq)) as Message),
        ...(row.tools_ref !== null ? { tools: part(row.tools_ref) as ToolSpec[] } : {}),
        ...(row.tool_choice === "auto" || row.tool_choice === "none" ? { tool_choice: row.tool_choice } : {}),
        ...(row.streamed !== null ? { stream: row.streamed === 1 } : {}),
      };
    },
  };
}

export type RequestLog = ReturnType<typeof createRequestLog>;

/** A message of a request: a row of the messages table, or a part of the run's step_messages. */
type Ref = { row: number } | { seq: number };

/** [part 1, part 2, row 12, row 13, row 14] as "1-2,m12-14". */
function refsText(refs: Ref[]): string {
  const ranges: string[] = [];
  for (let index = 0; index < refs.length; ) {
    const ref = refs[index] as Ref;
    const isRow = "row" in ref;
    const first = isRow ? ref.row : ref.seq;
    let last = first;
    for (
      let next = refs[index + 1];
      next !== undefined && "row" in next === isRow && ("row" in next ? next.row : next.seq) === last + 1;
      next = refs[index + 1]
    ) {
      last++;
      index++;
    }
    ranges.push(`${isRow ? "m" : ""}${first === last ? first : `${first}-${last}`}`);
    index++;
  }
  return ranges.join(",");
}

/** The references of refsText (a step recorded before rows were referenced has only parts' numbers). */
function refsOf(text: string): Ref[] {
  return text === ""
    ? []
    : text
        .split(",")
        .flatMap((range) =>
          range.startsWith("m")
            ? seqsOf(range.slice(1)).map((row): Ref => ({ row }))
            : seqsOf(range).map((seq): Ref => ({ seq })),
        );
}

/** FNV-1a over a string's UTF-16 code units. */
function hashOf(text: string): number {
  let hash = 0x811c9dc5;
  for (let index = 0; index < text.length; index++) hash = Math.imul(hash ^ text.charCodeAt(index), 0x01000193);
  return hash >>> 0;
}

/** Steps recorded before migration 9 kept the whole message list, gzipped when large. */
function legacyPayload(stored: string | Buffer | null | undefined): Message[] | undefined {
  if (stored === undefined || stored === null) return undefined;
  return JSON.parse(typeof stored === "string" ? stored : gunzipSync(stored).toString("utf8")) as Message[];
}
