/**
 * Health routes for probes (a container's HEALTHCHECK, Kubernetes, a load balancer): `GET /healthz`
 * answers while the process lives; `GET /readyz` asks each part of the process whether it is ready
 * (the store answers, the platforms are connected, the worker takes turns) and answers 200 or 503
 * with a small JSON body naming what is not. No token is needed and nothing secret is in them: each
 * part says "ok" or a few words of its own, never an error's text.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { listenError, sendJson } from "./http.js";
import { addressesOf, type ListenAddresses } from "../listen-addresses.js";

/** A part's readiness: undefined when ready, else a few words why not ("connecting"). */
export type ReadinessCheck = () => string | undefined | Promise<string | undefined>;

export interface ReadinessReport {
  ready: boolean;
  role: string;
  /** Each part: "ok", or why it is not ready. */
  checks: Record<string, string>;
}

/** How long a part may take to say whether it is ready; a slower one is not. */
const CHECK_WITHIN_MS = 2_000;

/** What the process's parts say of themselves: parts add their checks as they start. */
export interface Health {
  /** Adds (or replaces) a part's check. */
  set(part: string, check: ReadinessCheck): void;
  readiness(): Promise<ReadinessReport>;
}

export function createHealth(role: string): Health {
  const checks = new Map<string, ReadinessCheck>();
  return {
    set: (part, check) => void checks.set(part, check),
    async readiness() {
      const entries = await Promise.all(
        [...checks].map(async ([part, check]) => [part, (await withinTime(check)) ?? "ok"] as const),
      );
      return { ready: entries.every(([, state]) => state === "ok"), role, checks: Object.fromEntries(entries) };
    },
  };
}

async function withinTime(check: ReadinessCheck): Promise<string | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<string>((resolve) => {
    timer = setTimeout(() => resolve(`no answer within ${CHECK_WITHIN_MS / 1000} s`), CHECK_WITHIN_MS);
  });
  try {
    return await Promise.race([Promise.resolve().then(check), late]);
  } catch {
    return "failing";
  } finally {
    clearTimeout(timer);
  }
}

/** Answers /healthz and /readyz (GET or HEAD); false for any other request, which is the caller's. */
export function serveHealth(request: IncomingMessage, response: ServerResponse, health: Health): boolean {
  const path = (request.url ?? "/").split("?")[0];
  if (path !== "/healthz" && path !== "/readyz") return false;
  if (request.method !== "GET" && request.method !== "HEAD") {
    sendJson(response, 405, { error: `${path} answers GET.` }, { allow: "GET, HEAD" });
    return true;
  }
  if (path === "/healthz") {
    sendJson(response, 200, { live: true });
    return true;
  }
  health.readiness().then(
    (report) => sendJson(response, report.ready ? 200 : 503, report),
    () => sendJson(response, 503, { ready: false }),
  );
  return true;
}

export interface HealthServer extends ListenAddresses {
  stop(): Promise<void>;
}

/** A server of the health routes alone, on a port of its own (GLASSBOX_HEALTH_PORT). */
export async function startHealthServer(health: Health, host: string, port: number): Promise<HealthServer> {
  const server: Server = createServer((request, response) => {
    if (!serveHealth(request, response, health))
      sendJson(response, 404, { error: "This port answers /healthz and /readyz." });
  });
  server.requestTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", (error: NodeJS.ErrnoException) =>
      reject(listenError(error, host, port, "GLASSBOX_HEALTH_PORT")),
    );
    server.listen(port, host, () => resolve());
  });
  const { port: listening } = server.address() as AddressInfo;
  return {
    ...addressesOf(host, listening),
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
