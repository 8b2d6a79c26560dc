/**
 * Files uploaded with a web message, kept in memory from the moment the web server accepts the
 * message until its run reads them: the turn carries only a reference ("upload:<id>"), as a Slack
 * or Discord turn carries a download address. Only a worker in the same process can read them, so
 * the web server takes files only where one runs (`all`). Kept for a while after the first read,
 * since a run that is taken over reads its message's files again.
 */
import { randomUUID } from "node:crypto";
import type { Attachment } from "../../agent/attachments.js";
import type { TurnFile } from "../../conversations/turn-files.js";

/** How long uploaded files wait for their run, and stay for a run that starts again. */
const KEEP_MS = 60 * 60_000;
/** Files kept at once, and their bytes together; past either, the oldest go first. */
const MAX_FILES = 2_000;
const MAX_BYTES = 256 * 1024 * 1024;

export interface UploadShelf {
  /** Keeps a message's files and gives their references, in order (a file not read keeps its problem). */
  keep(attachments: readonly Attachment[]): TurnFile[];
  /** The file a reference names, or why it cannot be read. */
  take(file: TurnFile): Attachment;
}

export function createUploadShelf(limits: { maxFiles?: number; maxBytes?: number } = {}): UploadShelf {
  const maxFiles = limits.maxFiles ?? MAX_FILES;
  const maxBytes = limits.maxBytes ?? MAX_BYTES;
  const kept = new Map<string, { file: Attachment; until: number; bytes: number }>();
  let bytes = 0;
  const forget = (url: string) => {
    bytes -= kept.get(url)?.bytes ?? 0;
    kept.delete(url);
  };
  const forgetOld = () => {
    const now = Date.now();
    for (const [url, entry] of kept) if (entry.until < now) forget(url);
    for (const url of kept.keys()) {
      if (kept.size <= maxFiles && bytes <= maxBytes) break;
      forget(url);
    }
  };
  return {
    keep(attachments) {
      const references = attachments.map((file): TurnFile => {
        const base = { platform: "web" as const, name: file.name, mimeType: file.mimeType, size: file.size };
        if ("problem" in file) return { ...base, url: "", problem: file.problem };
        const url = `upload:${randomUUID()}`;
        kept.set(url, { file, until: Date.now() + KEEP_MS, bytes: file.data.byteLength });
        bytes += file.data.byteLength;
        return { ...base, url };
      });
      forgetOld(); // after adding: the shelf never holds more than its bounds, the newest kept
      return references;
    },
    take(file) {
      const entry = kept.get(file.url);
      if (entry) return entry.file;
      const problem = "it was uploaded to a glassbox process that has since stopped, or too long ago";
      return { name: file.name, mimeType: file.mimeType, size: file.size, problem };
    },
  };
}
