// The fake Slack's files: what `url_private_download` serves, as Slack does. A request with the
// bot token gets the file; without it (or with another token) Slack's sign-in page, as HTML with
// status 200. A file added with `redirect` is answered with a 302 to another host (a second local
// server, as Slack hands downloads to its file hosts), which serves it to anyone holding the signed
// link; every request either host gets is recorded with its Authorization header, so a test can see
// where the token went.
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface FakeSlackFileInput {
  name: string;
  mimetype: string;
  data: Uint8Array;
  /** The size Slack declares in the event (default: the data's length). */
  size?: number;
  /** Serve the download through a redirect to the other host. */
  redirect?: boolean;
  /** Leave out content-length, so only reading tells the size. */
  chunked?: boolean;
}

export interface FileDownload {
  /** "slack" (the API's own host) or "redirected" (the other host). */
  host: "slack" | "redirected";
  path: string;
  authorization?: string;
}

export interface FakeSlackFiles {
  /** Adds a file; returns the file object as Slack puts it in a message event's `files`. */
  add(file: FakeSlackFileInput): Record<string, unknown>;
  downloads: FileDownload[];
  /** Answers the file paths of the fake Slack's server; false for any other path. */
  handle(req: IncomingMessage, res: ServerResponse): boolean;
  close(): Promise<void>;
}

export async function createFakeSlackFiles(
  origin: () => string,
  isBotToken: (token: string) => boolean,
  teamId: string,
): Promise<FakeSlackFiles> {
  const files = new Map<string, FakeSlackFileInput & { signature: string }>();
  const downloads: FileDownload[] = [];
  let count = 0;

  const serve = (res: ServerResponse, file: FakeSlackFileInput) => {
    res.writeHead(200, {
      "Content-Type": file.mimetype,
      ...(file.chunked ? {} : { "Content-Length": String(file.data.length) }),
    });
    res.end(Buffer.from(file.data));
  };
  // Another host (another port of 127.0.0.1 named localhost): the link's signature is its credential.
  const other = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://localhost");
    downloads.push({
      host: "redirected",
      path: url.pathname,
      ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}),
    });
    const file = files.get(url.pathname.split("/").at(-1) ?? "");
    if (!file || url.searchParams.get("sig") !== file.signature) return void res.writeHead(403).end("forbidden");
    serve(res, file);
  });
  await new Promise<void>((resolve) => other.listen(0, "127.0.0.1", resolve));
  const otherOrigin = `http://localhost:${(other.address() as AddressInfo).port}`;

  return {
    downloads,
    add(input) {
      const id = `F0FAKE${String(++count).padStart(4, "0")}`;
      files.set(id, { ...input, signature: randomBytes(8).toString("hex") });
      const path = `${origin()}/files-pri/${teamId}-${id}`;
      return {
        id,
        name: input.name,
        title: input.name,
        mimetype: input.mimetype,
        filetype: input.name.split(".").at(-1) ?? "",
        size: input.size ?? input.data.length,
        mode: "hosted",
        is_external: false,
        url_private: `${path}/${encodeURIComponent(input.name)}`,
        url_private_download: `${path}/download/${encodeURIComponent(input.name)}`,
      };
    },
    handle(req, res) {
      const match = /^\/files-pri\/[\w]+-(F\w+)\/(?:download\/)?[^/]+$/.exec((req.url ?? "").split("?")[0] ?? "");
      if (!match) return false;
      downloads.push({
        host: "slack",
        path: req.url ?? "",
        ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}),
      });
      const file = files.get(match[1] ?? "");
      const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1];
      if (!token || !isBotToken(token)) {
        res.writeHead(200, { "Content-Type": "text/html; charset=utf-8" });
        res.end("<!DOCTYPE html><html><body>Sign in to your workspace</body></html>");
        return true;
      }
      if (!file) {
        res.writeHead(404).end("not found");
        return true;
      }
      if (file.redirect) {
        res.writeHead(302, { Location: `${otherOrigin}/download/${match[1]}?sig=${file.signature}` });
        res.end();
        return true;
      }
      serve(res, file);
      return true;
    },
    close: () =>
      new Promise<void>((resolve) => {
        other.close(() => resolve());
        other.closeAllConnections();
      }),
  };
}
