/**
 * Tool-call ids. A server may send none, send one twice, or (Mistral) accept only its own format,
 * nine letters and digits ("Tool call id was call_0fypS1hVX but must be a-z, A-Z, 0-9, with a
 * length of 9"). The ids glassbox makes are always of that format, which every server accepts;
 * a server's own id is kept unless it is missing or taken, and every change is a note, so the
 * trace can tell which id the server sent for which call.
 */
import { createHash, randomBytes } from "node:crypto";

const ALPHANUMERIC = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const NINE_ALPHANUMERIC = /^[A-Za-z0-9]{9}$/;

/** A new id: nine letters and digits, the strictest format a server is known to require. */
export function newToolCallId(): string {
  return alphanumeric(randomBytes(9), 9);
}

/**
 * Gives every call of a reply an id that is its own: the server's, unless it sent none or one that
 * is already used in this reply or the conversation so far. Says what it changed in `notes`.
 */
export function settleIds<T extends { id: string; function: { name: string } }>(
  calls: T[],
  isTaken: (id: string) => boolean,
  notes: string[],
): T[] {
  // Ids of this reply; the conversation's are asked of isTaken, which scans without copying them.
  const used = new Set<string>();
  const free = (id: string) => !used.has(id) && !isTaken(id);
  return calls.map((call) => {
    const sent = call.id.trim();
    if (sent !== "" && sent !== "null" && free(sent)) {
      used.add(sent);
      return sent === call.id ? call : { ...call, id: sent };
    }
    let id = newToolCallId();
    while (!free(id)) id = newToolCallId();
    used.add(id);
    notes.push(
      sent === "" || sent === "null"
        ? `the server sent no id for the call to '${call.function.name}'; glassbox named it ${id}`
        : `the server reused the id '${sent}' for the call to '${call.function.name}'; glassbox named it ${id}`,
    );
    return { ...call, id };
  });
}

/**
 * What the client knows of the ids a server accepts. It learns from the ids the server makes and
 * from a refusal that names the format; until then any id goes out as it is.
 */
export class IdFormat {
  private length: number | undefined; // set: ids must be this many letters and digits
  private pattern: RegExp | undefined;
  private seenOwnIds = 0;
  private allNineAlphanumeric = true;

  /** The ids the server made for its own calls. */
  observe(ids: readonly string[]): void {
    for (const id of ids) {
      this.seenOwnIds++;
      if (!NINE_ALPHANUMERIC.test(id)) this.allNineAlphanumeric = false;
    }
    if (this.length === undefined && this.seenOwnIds >= 2 && this.allNineAlphanumeric) this.length = 9;
  }

  /** A 400 that says which ids the server takes; true when it taught something new. */
  learnFromRefusal(message: string): boolean {
    const match = /tool ?call ?id.*?a-z, ?A-Z, ?0-9.*?length of (\d+)/is.exec(message);
    const length = match ? Number(match[1]) : undefined;
    if (length === undefined || !(length > 0 && length <= 64) || this.length === length) return false;
    this.length = length;
    this.pattern = undefined;
    return true;
  }

  /** The id to send for `id`: itself when the server takes it, else the same stand-in every time. */
  outgoing(id: string): string {
    if (this.length === undefined) return id;
    this.pattern ??= new RegExp(`^[A-Za-z0-9]{${this.length}}$`);
    if (this.pattern.test(id)) return id;
    return alphanumeric(createHash("sha256").update(id).digest(), this.length);
  }

  get constrained(): boolean {
    return this.length !== undefined;
  }
}

function alphanumeric(bytes: Uint8Array, length: number): string {
  let id = "";
  for (let index = 0; index < length; index++)
    id += ALPHANUMERIC[(bytes[index % bytes.length] ?? 0) % ALPHANUMERIC.length];
  return id;
}
