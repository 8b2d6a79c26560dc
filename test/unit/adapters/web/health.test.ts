// The health routes' server: what /readyz says of parts that are ready, not ready, failing or too slow,
// and what it answers to anything else.
import { afterEach, describe, expect, it } from "vitest";
import { createHealth, startHealthServer, type HealthServer } from "../../../../src/adapters/web/health.js";

let server: HealthServer | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

describe("the health routes", () => {
  it("/readyz is 200 when every part is ready, else 503 naming each part's state; a failing or silent part is not ready", async () => {
    const health = createHealth("worker");
    health.set("store", () => undefined);
    server = await startHealthServer(health, "127.0.0.1", 0);
    const readyz = async () => {
      const response = await fetch(`${server?.url}/readyz`);
      return { status: response.status, body: await response.json() };
    };
    expect(await readyz()).toEqual({ status: 200, body: { ready: true, role: "worker", checks: { store: "ok" } } });

    health.set("worker", () => "starting");
    health.set("queue", async () => {
      throw new Error("password=hunter2 in an error text");
    });
    health.set("slow", () => new Promise<undefined>(() => {}));
    expect(await readyz()).toEqual({
      status: 503,
      body: {
        ready: false,
        role: "worker",
        // An error's text never reaches the body: only the part's own words.
        checks: { store: "ok", worker: "starting", queue: "failing", slow: "no answer within 2 s" },
      },
    });
  });

  it("/healthz answers while the process lives; other methods and paths are refused", async () => {
    const health = createHealth("ingress");
    health.set("store", () => "opening the database");
    server = await startHealthServer(health, "127.0.0.1", 0);
    const live = await fetch(`${server.url}/healthz`);
    expect(live.status).toBe(200);
    expect(await live.json()).toEqual({ live: true });
    expect((await fetch(`${server.url}/readyz?verbose=1`)).status).toBe(503);
    const posted = await fetch(`${server.url}/healthz`, { method: "POST" });
    expect(posted.status).toBe(405);
    expect(posted.headers.get("allow")).toBe("GET, HEAD");
    expect((await fetch(`${server.url}/`)).status).toBe(404);
  });
});
