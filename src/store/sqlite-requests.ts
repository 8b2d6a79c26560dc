/**
 * Each step's exact request, kept so the trace can show it, without storing the conversation again
 * on every step: a run's distinct messages (and tool lists) are stored once each, numbered within
 * the run, and a step keeps only the numbers it was sent, as ranges ("1-40,43"). A 50-step run stores
 * its messages once, not 50 growing copies of them.
 */
import { gunzipSync } from "node:zlib";
import type Database from "better-sqlite3";
import type { Message, ToolSpec } from "../agent/types.js";
import type { RecordedRequest } from "./port-data.js";
import { rangesOf, seqsOf } from "./request-refs.js";

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
      const seqs = messages.map((message) => seqOf(runId, parts, message));
      return { requestRefs: rangesOf(seqs), toolsRef: tools?.length ? seqOf(runId, parts, tools) : null };
    },
    /** The run has ended here: what it stored is on disk, and this process forgets it. */
    forget(runId: string): void {
      runs.delete(runId);
    },
    /** A step's request as it was sent; undefined when the step is not recorded. */
    read(runId: string, step: number): RecordedRequest | Message[] | undefined {
      const row = statements.refs.get(runId, step) as { request_refs: string | null; tools_ref: number | null; tool_choice: string | null; streamed: number | null } | undefined;
      if (!row) return undefined;
      if (row.request_refs === null) return legacyPayload(statements.legacy.get(runId, step) as string | Buffer | null | undefined);
      const bodies = new Map((statements.bodies.all(runId) as Array<{ seq: number; body: string }>).map((entry) => [entry.seq, entry.body]));
      const part = (seq: number) => JSON.parse(bodies.get(seq) ?? "null") as unknown;
      return {
        messages: seqsOf(row.request_refs).map((seq) => part(seq) as Message),
        ...(row.tools_ref !== null ? { tools: part(row.tools_ref) as ToolSpec[] } : {}),
        ...(row.tool_choice === "auto" || row.tool_choice === "none" ? { tool_choice: row.tool_choice } : {}),
        ...(row.streamed !== null ? { stream: row.streamed === 1 } : {}),
      };
    },
  };
}

export type RequestLog = ReturnType<typeof createRequestLog>;

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
