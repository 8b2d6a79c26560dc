/**
 * Files attached to a Discord message (`attachments` on MESSAGE_CREATE, read through discord.js):
 * each has a signed CDN `url` that needs no token, a `size` and, when Discord could tell, a
 * `content_type`. They are fetched bounded (attachment-download.ts), with no credential at all.
 */
import type { AttachmentLimits } from "../../agent/attachments.js";
import { downloadFiles, type Downloaded } from "../attachment-download.js";

/** What glassbox reads of a discord.js Attachment. */
export interface DiscordAttachmentLike {
  name: string;
  url: string;
  size: number;
  contentType: string | null;
}

export function fetchDiscordFiles(
  attachments: Iterable<DiscordAttachmentLike>,
  options: { limits?: Partial<AttachmentLimits>; signal?: AbortSignal } = {},
): Promise<Downloaded> {
  const refs = [...attachments].map((file) => ({
    name: file.name,
    url: file.url,
    size: file.size,
    mimeType: file.contentType || "application/octet-stream",
  }));
  return downloadFiles(refs, options);
}
