/**
 * Files uploaded with a message in the playground (or by any caller of POST /api/runs):
 * `"attachments": [{ "name", "type", "data" }]` with the file's bytes in base64. Bounded as on
 * Slack and Discord: the body may carry a message's files and no more, and a file over its limit is
 * refused from its length before it is decoded, told to the model in its line and to the caller in
 * one sentence while the rest runs. A list longer than a message's count of files is refused whole.
 */
import {
  DEFAULT_ATTACHMENT_LIMITS,
  formatBytes,
  cleanName,
  type Attachment,
  type AttachmentLimits,
} from "../../agent/attachments.js";
import { HttpError } from "./http.js";

/** The largest POST /api/runs body: a message's files in base64 (4 bytes per 3), and room for the rest. */
export const MAX_UPLOAD_BODY_BYTES = Math.ceil((DEFAULT_ATTACHMENT_LIMITS.maxMessageBytes * 4) / 3) + 1_000_000;

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

export function uploadedAttachments(
  value: unknown,
  limits: AttachmentLimits = DEFAULT_ATTACHMENT_LIMITS,
): { attachments: Attachment[]; problems: string[] } {
  if (value === undefined) return { attachments: [], problems: [] };
  if (!Array.isArray(value))
    throw new HttpError(400, 'Give "attachments" as a list of {"name", "type", "data"} objects, the data in base64.');
  if (value.length > limits.maxFiles)
    throw new HttpError(
      400,
      `A message may carry at most ${limits.maxFiles} files, and this one has ${value.length}; send the others in another message.`,
    );
  const attachments: Attachment[] = [];
  const problems: string[] = [];
  let messageLeft = limits.maxMessageBytes;
  for (const [index, item] of value.entries()) {
    const { name, type, data } = (item ?? {}) as Record<string, unknown>;
    if (
      typeof name !== "string" ||
      !name.trim() ||
      typeof data !== "string" ||
      (type !== undefined && typeof type !== "string")
    ) {
      throw new HttpError(
        400,
        `Attachment ${index + 1} needs a "name" and its "data" in base64 (and may give its "type").`,
      );
    }
    const mimeType = type || "application/octet-stream";
    // The size is known from the length of the base64, before a byte is decoded.
    const size = Math.floor((data.length * 3) / 4) - (data.endsWith("==") ? 2 : data.endsWith("=") ? 1 : 0);
    const unread = (problem: string) => {
      attachments.push({ name, mimeType, size, problem });
      problems.push(`I could not read ${cleanName(name)}: ${problem}.`);
    };
    if (size > limits.maxFileBytes)
      unread(`it is ${formatBytes(size)}, over the ${formatBytes(limits.maxFileBytes)} limit for one file`);
    else if (size > messageLeft)
      unread(
        `the files of one message may come to ${formatBytes(limits.maxMessageBytes)} together, and this one would pass that`,
      );
    else if (!BASE64.test(data)) throw new HttpError(400, `The data of ${cleanName(name)} is not base64.`);
    else {
      messageLeft -= size;
      attachments.push({ name, mimeType, size, data: Buffer.from(data, "base64") });
    }
  }
  return { attachments, problems };
}
