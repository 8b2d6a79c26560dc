/**
 * The files of a message as its turn carries them from ingress to a worker: references only (name,
 * declared type and size, download address, platform), never a token and never a byte, since ingress
 * acknowledges at once and never downloads. The worker fetches them, bounded, with its workspace's
 * credentials (src/adapters/surfaces.ts). A turn's payload is at most MAX_PAYLOAD_BYTES of JSON, so
 * the references are bounded here: at most MAX_TURN_FILES of them, short names and types, and within
 * FILES_PAYLOAD_BYTES together; a file whose reference would not fit travels without its address,
 * with the reason, and the worker tells the model and the person that it could not be read.
 */
import { cleanName, formatBytes } from "../agent/attachments.js";
import { MAX_PAYLOAD_BYTES } from "../queue/types.js";

/** A file as the platform announced it. */
export interface FileRef {
  name: string;
  mimeType: string;
  /** The size the platform declared, in bytes. */
  size: number;
  url: string;
}

/** Where a file came from: a Slack or Discord download address, or a web upload held by the process that took it. */
export type FilePlatform = "slack" | "discord" | "web";

/** A file of a message, as its turn names it. A `type` (not an interface), so that it is a turn payload's JSON. */
export type TurnFile = {
  platform: FilePlatform;
  name: string;
  mimeType: string;
  /** The size the platform declared, in bytes. */
  size: number;
  /** Where the worker downloads it; empty when `problem` says why it cannot. */
  url: string;
  /** Why the file cannot be fetched (the end of a sentence), decided at ingress. */
  problem?: string;
};

/** Slack and Discord take at most 10 files per message; anything past that is not carried. */
export const MAX_TURN_FILES = 10;
/** What the references may take of a payload: the rest (ids, the session key) is far below the remainder. */
export const FILES_PAYLOAD_BYTES = MAX_PAYLOAD_BYTES - 2_048;
const MAX_TYPE_CHARS = 100;
const MAX_URL_BYTES = 2_000;
const TOO_LONG = "its download address was too long to pass on";

const jsonBytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value));

/** The references of a message's files, bounded to fit in its turn. */
export function turnFilesOf(refs: readonly FileRef[], platform: FilePlatform): TurnFile[] {
  const files = refs.slice(0, MAX_TURN_FILES).map((ref): TurnFile => {
    // A media type is a short ASCII token; anything else in it is dropped.
    const mimeType = ref.mimeType.replace(/[^\x21-\x7e]/g, "").slice(0, MAX_TYPE_CHARS) || "application/octet-stream";
    const size = Number.isFinite(ref.size) && ref.size > 0 ? Math.floor(ref.size) : 0;
    const base = { platform, name: cleanName(ref.name).replace(/[\u0000-\u001f\u007f]/g, " "), mimeType, size };
    let url = "";
    try {
      url = new URL(ref.url).href; // percent-encoded: plain ASCII
    } catch {
      return { ...base, url: "", problem: "its download address is not a web address" };
    }
    return jsonBytes(url) > MAX_URL_BYTES ? { ...base, url: "", problem: TOO_LONG } : { ...base, url };
  });
  // Within the payload's room: the last files give up their addresses first.
  for (let index = files.length - 1; index >= 0 && jsonBytes(files) > FILES_PAYLOAD_BYTES; index--) {
    const file = files[index] as TurnFile;
    if (file.url) files[index] = { ...file, url: "", problem: TOO_LONG };
  }
  return files;
}

/** Whether a payload's entry is a file reference ingress made (a turn from elsewhere is read with care). */
export function isTurnFile(value: unknown): value is TurnFile {
  const file = value as Partial<TurnFile> | null;
  return (
    typeof file === "object" &&
    file !== null &&
    (file.platform === "slack" || file.platform === "discord" || file.platform === "web") &&
    typeof file.name === "string" &&
    typeof file.mimeType === "string" &&
    typeof file.size === "number" &&
    typeof file.url === "string" &&
    (file.problem === undefined || typeof file.problem === "string")
  );
}

/**
 * The message as the conversation keeps it when ingress accepts it: what the person wrote, then a
 * line per file from what the platform declared. The worker shows the model the files themselves
 * (an image as an image, a text file's text) in this message's run only; later turns read these lines.
 */
export function storedTextOf(input: string, files: readonly TurnFile[]): string {
  const lines = files.map(
    (file) =>
      `[Attached file: ${file.name} (${file.mimeType}, ${formatBytes(file.size)}); what could be read of it was shown to you with this message only]`,
  );
  return [input, ...lines].filter((text) => text !== "").join("\n\n");
}
