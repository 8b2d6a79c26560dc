// The bounds of fetching attached files, against a real local HTTP server: a time limit, a count
// limit, the message's byte limit, a failed download, and a credential kept to the hosts allowed.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { downloadFiles, type FileRef } from "../../../src/adapters/attachment-download.js";

describe("downloading attached files, bounded", () => {
  let server: Server;
  let base = "";
  const seen: Array<{ path: string; authorization?: string }> = [];
  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push({
        path: req.url ?? "",
        ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}),
      });
      if (req.url === "/hang") return; // never answers
      if (req.url === "/missing") return void res.writeHead(404).end();
      if (req.url === "/elsewhere")
        return void res
          .writeHead(302, { location: `http://localhost:${(server.address() as AddressInfo).port}/file` })
          .end();
      res.writeHead(200, { "content-type": "text/plain" }).end("x".repeat(1_000));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const file = (path: string, size = 1_000): FileRef => ({
    name: path.slice(1) || "file",
    mimeType: "text/plain",
    size,
    url: `${base}${path}`,
  });

  it("gives up on a download that takes longer than its limit, in one sentence", async () => {
    const { attachments, problems } = await downloadFiles([file("/hang")], { limits: { downloadTimeoutMs: 300 } });
    expect(problems).toEqual(["I could not read hang: the download took longer than 300 ms."]);
    expect(attachments[0]).toMatchObject({ name: "hang", problem: "the download took longer than 300 ms" });
  });

  it("reads at most the count of files, and no more bytes than the message may carry", async () => {
    const { attachments, problems } = await downloadFiles([file("/a"), file("/b"), file("/c")], {
      limits: { maxFiles: 2, maxMessageBytes: 1_500 },
    });
    expect(attachments.map((item) => ("data" in item ? "read" : item.problem))).toEqual([
      "read",
      "the files of one message may come to 1.5 KB together, and this one would pass that",
      "only the first 2 files of a message are read",
    ]);
    expect(problems).toHaveLength(2);
  });

  it("says a failed download in one sentence", async () => {
    const { problems } = await downloadFiles([file("/missing")]);
    expect(problems).toEqual(["I could not read missing: the download failed (HTTP 404)."]);
  });

  it("sends a credential to the hosts allowed, and follows a redirect to another host without it", async () => {
    seen.length = 0;
    const { attachments } = await downloadFiles([file("/elsewhere")], {
      credential: { Authorization: "Bearer secret" },
      sendsCredentialTo: (url) => url.hostname === "127.0.0.1",
    });
    expect("data" in attachments[0]!).toBe(true);
    expect(seen).toEqual([{ path: "/elsewhere", authorization: "Bearer secret" }, { path: "/file" }]);
  });
});
