/**
 * Fetching the files attached to a message, bounded: at most `maxFiles` files, each refused from its
 * declared size before any byte is read and cut off while reading the moment it passes its limit
 * (a file's, or what is left of the message's), each within a time limit. A credential (Slack's bot
 * token) goes only to the hosts `sendsCredentialTo` names: redirects are followed one by one, and
 * a hop to any other host goes without it. What could not be fetched comes back as an UnreadFile
 * (the model is told) and one sentence for the person.
 */
import type { Attachment, AttachmentLimits, UnreadFile } from "../agent/attachments.js";
import type { FileRef } from "../conversations/turn-files.js";

export type { FileRef } from "../conversations/turn-files.js";
import { cleanName, DEFAULT_ATTACHMENT_LIMITS, formatBytes } from "../agent/attachments.js";

export interface DownloadOptions {
  limits?: Partial<AttachmentLimits>;
  /** Headers for a request to `url` (a credential), sent only where `sendsCredentialTo` allows. */
  credential?: Record<string, string>;
  sendsCredentialTo?: (url: URL) => boolean;
  /** A reply that is not the file (Slack's sign-in page for a token without files:read): the reason, or undefined. */
  notTheFile?: (response: Response, file: FileRef) => string | undefined;
  signal?: AbortSignal;
}

export interface Downloaded {
  attachments: Attachment[];
  /** One sentence per file that could not be read, for the person. */
  problems: string[];
}

const MAX_REDIRECTS = 5;

export async function downloadFiles(files: readonly FileRef[], options: DownloadOptions = {}): Promise<Downloaded> {
  const limits = { ...DEFAULT_ATTACHMENT_LIMITS, ...options.limits };
  const attachments: Attachment[] = [];
  const problems: string[] = [];
  let messageLeft = limits.maxMessageBytes;
  const unread = (file: FileRef, problem: string) => {
    const item: UnreadFile = { name: file.name, mimeType: file.mimeType, size: file.size, problem };
    attachments.push(item);
    problems.push(`I could not read ${cleanName(file.name)}: ${problem}.`);
  };
  for (const [index, file] of files.entries()) {
    if (index >= limits.maxFiles) {
      unread(file, `only the first ${limits.maxFiles} files of a message are read`);
      continue;
    }
    // Declared sizes are checked before any byte is read.
    if (file.size > limits.maxFileBytes) {
      unread(file, `it is ${formatBytes(file.size)}, over the ${formatBytes(limits.maxFileBytes)} limit for one file`);
      continue;
    }
    if (file.size > messageLeft) {
      unread(
        file,
        `the files of one message may come to ${formatBytes(limits.maxMessageBytes)} together, and this one would pass that`,
      );
      continue;
    }
    const limit = Math.min(limits.maxFileBytes, messageLeft);
    const fetched = await fetchBounded(file, limit, limits, options);
    if (typeof fetched === "string") {
      unread(file, fetched);
      continue;
    }
    messageLeft -= fetched.length;
    attachments.push({ name: file.name, mimeType: file.mimeType, size: fetched.length, data: fetched });
  }
  return { attachments, problems };
}

/** The file's bytes, or why not (the end of a sentence). Never reads more than `limit` bytes. */
async function fetchBounded(
  file: FileRef,
  limit: number,
  limits: AttachmentLimits,
  options: DownloadOptions,
): Promise<Uint8Array | string> {
  const timeout = AbortSignal.timeout(limits.downloadTimeoutMs);
  const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
  try {
    let url = new URL(file.url);
    let response: Response | undefined;
    for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
      if (url.protocol !== "https:" && url.protocol !== "http:") return "its address is not a web address";
      const headers = options.credential && options.sendsCredentialTo?.(url) ? options.credential : {};
      response = await fetch(url, { headers, redirect: "manual", signal });
      const location = response.headers.get("location");
      if (response.status < 300 || response.status >= 400 || !location) break;
      await response.body?.cancel();
      // Each hop is judged again: a credential is sent to the hosts allowed, never to where a redirect points elsewhere.
      url = new URL(location, url);
      response = undefined;
    }
    if (!response) return "the download was redirected too many times";
    if (!response.ok) {
      await response.body?.cancel();
      return `the download failed (HTTP ${response.status})`;
    }
    const wrong = options.notTheFile?.(response, file);
    if (wrong) {
      await response.body?.cancel();
      return wrong;
    }
    const declared = Number(response.headers.get("content-length") ?? Number.NaN);
    if (declared > limit) {
      await response.body?.cancel();
      return tooLarge(declared, limit, limits);
    }
    return await readAtMost(response, limit, limits);
  } catch (error) {
    if (timeout.aborted)
      return `the download took longer than ${limits.downloadTimeoutMs < 1_000 ? `${limits.downloadTimeoutMs} ms` : `${Math.round(limits.downloadTimeoutMs / 1000)} seconds`}`;
    if (options.signal?.aborted) return "the message was cancelled";
    return `the download failed (${(error as Error).message})`;
  }
}

/** The body, read until it ends or passes `limit`, when reading stops and the rest is never fetched. */
async function readAtMost(response: Response, limit: number, limits: AttachmentLimits): Promise<Uint8Array | string> {
  const reader = response.body?.getReader();
  if (!reader) return new Uint8Array();
  const chunks: Uint8Array[] = [];
  let total = 0;
  while (true) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.length;
    if (total > limit) {
      await reader.cancel();
      return tooLarge(total, limit, limits, true);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks);
}

function tooLarge(bytes: number, limit: number, limits: AttachmentLimits, whileReading = false): string {
  const what =
    limit < limits.maxFileBytes
      ? `what is left of the ${formatBytes(limits.maxMessageBytes)} limit for one message's files`
      : `the ${formatBytes(limits.maxFileBytes)} limit for one file`;
  return whileReading
    ? `it turned out larger than ${what} (the download was stopped there)`
    : `it is ${formatBytes(bytes)}, over ${what}`;
}
