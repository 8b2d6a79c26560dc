// Small HTTP helpers the tests share: a free port to give a process, and a request's JSON answer.
import { createServer } from "node:net";

/** A port nothing listens on right now, on 127.0.0.1 (for a process that must be told its port). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** The status and JSON body of a request. */
export async function fetchJson(
  url: string,
  init: RequestInit = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(url, init);
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}
