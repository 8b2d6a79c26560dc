// The model client's transport (src/undici-fetch.ts) against a real HTTP server on 127.0.0.1:
// what the openai SDK relies on from fetch — status, headers, whole and streamed bodies, a
// redirect replayed with its body, an abort — must hold as with the global fetch.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { undiciFetch, WHOLE_BODY_BYTES } from "../../src/undici-fetch.js";

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  server = undefined;
});

async function serve(
  handler: (request: IncomingMessage, body: string, response: ServerResponse) => void,
): Promise<string> {
  server = createServer((request, response) => {
    let body = "";
    request.on("data", (chunk: Buffer) => (body += chunk.toString()));
    request.on("end", () => handler(request, body, response));
  });
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server!.address() as AddressInfo).port}`;
}

describe("undiciFetch", () => {
  it("sends the method, headers and body, and returns status, repeated headers and the whole body", async () => {
    const url = await serve((request, body, response) => {
      response.writeHead(201, [
        ["content-type", "application/json"],
        ["set-cookie", "a=1"],
        ["set-cookie", "b=2"],
      ]);
      response.end(JSON.stringify({ method: request.method, auth: request.headers.authorization, body }));
    });
    const response = await undiciFetch(`${url}/v1/chat`, {
      method: "POST",
      headers: { authorization: "Bearer k" },
      body: '{"x":1}',
    });
    expect(response.status).toBe(201);
    expect(response.headers.get("content-type")).toBe("application/json");
    expect(response.headers.getSetCookie()).toEqual(["a=1", "b=2"]);
    expect(await response.json()).toEqual({ method: "POST", auth: "Bearer k", body: '{"x":1}' });
  });

  it("passes server-sent events on as they arrive, before the response ends", async () => {
    let finish: (() => void) | undefined;
    const url = await serve((_request, _body, response) => {
      response.writeHead(200, { "content-type": "text/event-stream" });
      response.write("data: first\n\n");
      finish = () => response.end("data: last\n\n");
    });
    const response = await undiciFetch(url, { method: "POST", body: "{}" });
    const reader = response.body!.getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toBe("data: first\n\n");
    finish!();
    let rest = "";
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read())
      rest += new TextDecoder().decode(chunk.value);
    expect(rest).toBe("data: last\n\n");
  });

  it("passes a body longer than WHOLE_BODY_BYTES on as it arrives, so a reader can stop one that never ends", async () => {
    let closed: Promise<void> | undefined;
    const url = await serve((_request, _body, response) => {
      closed = new Promise((resolve) => response.once("close", () => resolve()));
      response.writeHead(200, { "content-type": "application/json" });
      response.write(Buffer.alloc(2 * WHOLE_BODY_BYTES, "x")); // and never ends
    });
    const response = await undiciFetch(url, { method: "POST", body: "{}" });
    const reader = response.body!.getReader();
    let read = 0;
    while (read < 2 * WHOLE_BODY_BYTES) {
      const chunk = await reader.read();
      expect(chunk.done).toBe(false);
      read += chunk.value?.length ?? 0;
    }
    await reader.cancel();
    await closed; // the server sees the connection's end
    expect(read).toBe(2 * WHOLE_BODY_BYTES);
  });

  it("follows a redirect, sending the body again", async () => {
    const url = await serve((request, body, response) => {
      if (request.url === "/old") {
        response.writeHead(307, { location: "/new" });
        response.end();
      } else response.end(`${request.method} ${request.url} ${body}`);
    });
    const response = await undiciFetch(`${url}/old`, { method: "POST", body: "payload" });
    expect(response.status).toBe(200);
    expect(await response.text()).toBe("POST /new payload");
  });

  it("returns an empty body for 204", async () => {
    const url = await serve((_request, _body, response) => {
      response.writeHead(204);
      response.end();
    });
    const response = await undiciFetch(url);
    expect(response.status).toBe(204);
    expect(await response.text()).toBe("");
  });

  it("rejects with an AbortError when the signal fires before the answer, as the SDK expects", async () => {
    const url = await serve(() => undefined); // never answers
    const controller = new AbortController();
    const pending = undiciFetch(url, { method: "POST", body: "{}", signal: controller.signal });
    setTimeout(() => controller.abort(), 20);
    await expect(pending).rejects.toMatchObject({ name: "AbortError" });
  });

  it("rejects with the connection error when nothing listens", async () => {
    const url = await serve(() => undefined);
    server!.close();
    await expect(undiciFetch(url)).rejects.toMatchObject({ code: "ECONNREFUSED" });
  });
});
