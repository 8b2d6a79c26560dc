/** The chat page, the trace viewer and their assets, served from public/ with headers that keep them to this origin. */
import { readFile } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import { HttpError } from "./http.js";

// Source (src/adapters/web) and build (dist/adapters/web) are both three levels below the root.
const PUBLIC_DIR = new URL("../../../src/adapters/web/public/", import.meta.url);
const PAGES: Record<string, string> = { "/": "index.html", "/trace": "trace.html" };
const ASSET = /^\/assets\/([a-z0-9-]+\.(?:css|js|svg))$/;
const CONTENT_TYPES: Record<string, string> = {
  html: "text/html; charset=utf-8",
  css: "text/css; charset=utf-8",
  js: "text/javascript; charset=utf-8",
  svg: "image/svg+xml",
};
const PAGE_HEADERS = {
  "content-security-policy":
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-cache",
};

/** The chat page, the trace viewer and their assets, with headers that keep them to this origin. */
export async function servePage(request: IncomingMessage, response: ServerResponse, pathname: string): Promise<void> {
  const name = PAGES[pathname] ?? ASSET.exec(pathname)?.[1];
  if (!name) throw new HttpError(404, `There is no page ${pathname}; the chat is at / and the trace viewer at /trace.`);
  if (request.method !== "GET" && request.method !== "HEAD") throw new HttpError(405, `${pathname} only takes GET.`);
  let body: Buffer;
  try {
    body = await readFile(new URL(name, PUBLIC_DIR));
  } catch {
    throw new HttpError(404, `There is no file ${name}.`);
  }
  response.writeHead(200, {
    "content-type": CONTENT_TYPES[name.split(".").pop() ?? ""] ?? "application/octet-stream",
    "content-length": body.length,
    ...PAGE_HEADERS,
  });
  response.end(request.method === "HEAD" ? undefined : body);
}
