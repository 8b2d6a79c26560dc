// The fake Discord's CDN: attachments of the messages "users" send, served as Discord's CDN serves
// them, at signed links (`?ex=&is=&hm=`) that need no token. Every download is recorded with any
// Authorization header it carried, so a test can see that no credential went there.
import { randomBytes } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";

export interface FakeDiscordFileInput {
  filename: string;
  /** Discord leaves content_type out when it cannot tell the type. */
  contentType?: string;
  data: Uint8Array;
  /** The size Discord declares (default: the data's length). */
  size?: number;
  /** The CDN answers this much later (a slow download). */
  delayMs?: number;
}

export interface FakeDiscordCdn {
  /** Stores a file; returns the attachment object as MESSAGE_CREATE carries it. */
  add(channelId: string, file: FakeDiscordFileInput, id: string): Record<string, unknown>;
  downloads: Array<{ path: string; authorization?: string }>;
  /** Answers /attachments/... paths; false for any other. */
  handle(req: IncomingMessage, res: ServerResponse): boolean;
}

export function createFakeDiscordCdn(origin: () => string): FakeDiscordCdn {
  const files = new Map<string, FakeDiscordFileInput & { signature: string }>();
  const downloads: FakeDiscordCdn["downloads"] = [];
  return {
    downloads,
    add(channelId, file, id) {
      const signature = randomBytes(16).toString("hex");
      files.set(id, { ...file, signature });
      const expires = Math.floor(Date.now() / 1000 + 86_400).toString(16);
      const path = `/attachments/${channelId}/${id}/${encodeURIComponent(file.filename)}?ex=${expires}&is=0&hm=${signature}`;
      return {
        id,
        filename: file.filename,
        size: file.size ?? file.data.length,
        ...(file.contentType ? { content_type: file.contentType } : {}),
        url: `${origin()}${path}`,
        proxy_url: `${origin()}${path.replace("/attachments/", "/proxy/attachments/")}`,
      };
    },
    handle(req, res) {
      const url = new URL(req.url ?? "/", "http://cdn");
      const match = /^\/(?:proxy\/)?attachments\/\d+\/(\d+)\/[^/]+$/.exec(url.pathname);
      if (!match) return false;
      downloads.push({
        path: url.pathname,
        ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}),
      });
      const file = files.get(match[1] ?? "");
      // Like Discord's CDN: an unsigned or wrongly signed link is refused.
      if (!file || url.searchParams.get("hm") !== file.signature) {
        res.writeHead(404, { "Content-Type": "text/plain" }).end("This content is no longer available.");
        return true;
      }
      setTimeout(() => {
        res.writeHead(200, {
          "Content-Type": file.contentType ?? "application/octet-stream",
          "Content-Length": String(file.data.length),
        });
        res.end(Buffer.from(file.data));
      }, file.delayMs ?? 0);
      return true;
    },
  };
}
