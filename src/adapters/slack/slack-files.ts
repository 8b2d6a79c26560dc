/**
 * Files shared in a Slack message (`files` on a message or app_mention event, subtype `file_share`),
 * fetched for the model. Slack serves them at `url_private_download` (or `url_private`) to requests
 * carrying the bot token (`Authorization: Bearer xoxb-...`, scope files:read); without the scope it
 * answers with its sign-in page (HTML) instead of the file. Slack may redirect a download to
 * another host: the token goes only to Slack's own hosts (slack.com and its subdomains, GovSlack's
 * slack-gov.com, or the SLACK_API_URL host of a proxy or test), never along a redirect elsewhere.
 */
import type { AttachmentLimits } from "../../agent/attachments.js";
import { downloadFiles, type Downloaded, type FileRef } from "../attachment-download.js";

/** The fields of a Slack file object glassbox reads (as in message events). */
export interface SlackFile {
  id?: string;
  name?: string;
  title?: string;
  mimetype?: string;
  filetype?: string;
  size?: number;
  url_private?: string;
  url_private_download?: string;
  /** "tombstone" (deleted) or "hidden_by_limit" (over a free workspace's limit): nothing to fetch. */
  mode?: string;
}

const SLACK_HOSTS = /(^|\.)(slack\.com|slack-gov\.com)$/i;

/** The files of an event (anything else in `files` is ignored), as download references. */
export function slackFileRefs(files: unknown): FileRef[] {
  if (!Array.isArray(files)) return [];
  return (files as SlackFile[]).flatMap((file) => {
    const url = file.url_private_download ?? file.url_private;
    if (!url || file.mode === "tombstone" || file.mode === "hidden_by_limit") return [];
    return [
      {
        name: file.name ?? file.title ?? file.id ?? "file",
        mimeType: file.mimetype || "application/octet-stream",
        size: Number(file.size ?? 0),
        url,
      },
    ];
  });
}

/** Whether the bot token may go to `url`: Slack's hosts, or the host of SLACK_API_URL. */
export function isSlackHost(url: URL, apiUrl?: string): boolean {
  if (apiUrl && new URL(apiUrl).host === url.host) return true;
  return url.protocol === "https:" && SLACK_HOSTS.test(url.hostname);
}

export function fetchSlackFiles(files: unknown, options: SlackDownloadOptions): Promise<Downloaded> {
  return downloadSlackFiles(slackFileRefs(files), options);
}

export interface SlackDownloadOptions {
  token: string;
  apiUrl?: string;
  limits?: Partial<AttachmentLimits>;
  signal?: AbortSignal;
}

/** Files already read from an event (a worker gets them in its turn), fetched as fetchSlackFiles does. */
export function downloadSlackFiles(refs: readonly FileRef[], options: SlackDownloadOptions): Promise<Downloaded> {
  return downloadFiles(refs, {
    limits: options.limits,
    credential: { Authorization: `Bearer ${options.token}` },
    sendsCredentialTo: (url) => isSlackHost(url, options.apiUrl),
    // Slack's sign-in page where the file should be: the token lacks files:read (or is not the bot's).
    notTheFile: (response, file) =>
      response.headers.get("content-type")?.startsWith("text/html") && !file.mimeType.startsWith("text/html")
        ? "Slack sent its sign-in page instead of the file (the app needs the files:read scope; reinstall it after adding the scope)"
        : undefined,
    signal: options.signal,
  });
}
