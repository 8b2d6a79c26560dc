// Shared set-up for the web playground tests: the one pipeline in one process (startRoles, role
// `all`, on a SQLite store: the web server, the in-process queue, the worker) over the agent as
// `npm start` builds it (the openai SDK against the scripted model server running the demo's
// rules), with real SQLite files in a temp dir. Waiting is done on events and polled state with
// generous timeouts, never on fixed delays.
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { pino } from "pino";
import { demoReply } from "../../src/demo-script.js";
import type { WebEvent } from "../../src/adapters/web/event-hub.js";
import type { DailyLimits } from "../../src/agent/quota.js";
import type { AgentConfig } from "../../src/agent/run.js";
import type { SqliteStore } from "../../src/store/sqlite-store.js";
import { type GlassboxConfig, loadConfig } from "../../src/config.js";
import type { Logger } from "../../src/logger.js";
import type { Deployment } from "../../src/roles/deployment.js";
import { type StartedRoles, startRoles } from "../../src/roles/start.js";
import type { GlassboxAgent } from "../../src/setup.js";
import type { StorePortOptions } from "../../src/store/index.js";
import type { StorePort } from "../../src/store/port.js";
import { sqliteAgentConfig } from "./sqlite-agent.js";
import {
  startScriptedModelServer,
  type Script,
  type ScriptedModelServer,
} from "../../src/testing/scripted-model-server.js";

/** A paid order of the demo shop: it can still be cancelled. */
export const CANCELLABLE_ORDER = "20240410003";
/** A pending order of the demo shop, also cancellable. */
export const PENDING_ORDER = "20240418004";
export const WAIT = { timeout: 15_000, interval: 25 };
export const ARTIFACTS = "test-artifacts";
export const NO_MODEL =
  "No model is configured: set OPENAI_API_KEY, or OPENAI_BASE_URL for a local server such as Ollama or vLLM.";

export const CHROMIUM = process.env.GLASSBOX_CHROMIUM ?? "/usr/bin/chromium";
export const VISIBLE = { state: "visible" as const, timeout: 15_000 };
export const PHONE = { viewport: { width: 390, height: 740 }, isMobile: true, hasTouch: true };
export const DESKTOP = { viewport: { width: 1280, height: 800 } };

/** Headless Chromium (Debian's, driven by playwright-core); one per test file is enough. */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM))
    throw new Error(
      `No Chromium at ${CHROMIUM}: install it (apt-get install chromium) or set GLASSBOX_CHROMIUM to its path.`,
    );
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
      "--disable-quic",
    ],
  });
}

/** How far the page is wider than the window (0: no horizontal page overflow). */
export async function pageOverflow(page: Page): Promise<number> {
  return Number(await page.evaluate("document.scrollingElement.scrollWidth - innerWidth"));
}

/** Errors the page logged or threw, collected for a final `expect(...).toEqual([])`. */
export function collectPageErrors(page: Page, into: string[]): Page {
  page.on("pageerror", (error) => into.push(error.message));
  page.on("console", (message) => {
    if (message.type() === "error") into.push(message.text());
  });
  return page;
}

/** The web server's settings a test may change: tokens, and users' daily caps. */
export interface ServerSettings {
  /** GLASSBOX_WEB_HOST; 127.0.0.1 unless told. */
  host?: string;
  apiToken?: string;
  apiUsers?: Record<string, string>;
  dailyLimits?: DailyLimits;
}

/** What the pipeline's web server is to a test: where it is, and how to stop everything. */
export interface WebServer {
  url: string;
  stop(): Promise<void>;
}

export interface Playground {
  url: string;
  web: WebServer;
  /** The store and the in-process queue the pipeline runs on (for a message of another platform, say). */
  deployment: Deployment;
  model: ScriptedModelServer;
  agent: AgentConfig & { store: SqliteStore };
  store: SqliteStore;
}

const cleanups: Array<() => Promise<void> | void> = [];

/** Call from afterAll / afterEach: stops servers, closes stores, removes temp files (last started, first stopped). */
export async function cleanUp(): Promise<void> {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
}

export function quietLogger(): Logger {
  return pino({ level: "silent" });
}

export function tempDir(): string {
  const directory = mkdtempSync(join(tmpdir(), "glassbox-web-"));
  cleanups.push(() => rmSync(directory, { recursive: true, force: true }));
  return directory;
}

/** The scripted model (the demo's rules unless told otherwise), the agent over temp SQLite files, and the pipeline with its web server on a free port. */
export async function startPlayground(
  options: { script?: Script; server?: ServerSettings; env?: Record<string, string> } = {},
): Promise<Playground> {
  const directory = tempDir();
  const model = await startScriptedModelServer({ script: options.script ?? ((request) => demoReply(request)) });
  cleanups.push(() => model.close());
  const config = withServer(
    loadConfig({
      OPENAI_BASE_URL: model.url,
      OPENAI_API_KEY: "test-key",
      LLM_MODEL: "scripted-model",
      GLASSBOX_DB: join(directory, "glassbox.db"),
      GLASSBOX_SHOP_DB: join(directory, "shop.db"),
      GLASSBOX_DEMO: "true",
      GLASSBOX_WEB_PORT: "0",
      ...options.env,
    }),
    options.server,
  );
  const log = quietLogger();
  const agent = await sqliteAgentConfig(config, log);
  cleanups.push(() => {
    if (agent.store.db.open) agent.store.close();
  });
  const roles = await startRoles({
    config,
    role: "all",
    log,
    agent,
    store: agent.port,
    modelLabel: "scripted model (demo)",
  });
  const web = webOf(roles);
  cleanups.push(() => web.stop());
  return { url: web.url, web, deployment: roles.deployment, model, agent, store: agent.store };
}

/** The web server without a model, as `npm start` runs it when none is configured. */
export async function startWithoutModel(
  options: ServerSettings = {},
): Promise<{ url: string; web: WebServer; store: SqliteStore; databasePath: string }> {
  const directory = tempDir();
  const { openSqliteStore } = await import("../../src/store/sqlite-store.js");
  const { sqlitePortOf } = await import("../../src/store/sqlite.js");
  const databasePath = join(directory, "glassbox.db");
  const store = openSqliteStore(databasePath);
  cleanups.push(() => store.close());
  const config = withServer(
    loadConfig({ GLASSBOX_DB: databasePath, GLASSBOX_WEB_PORT: "0", LLM_MODEL: "gpt-4o-mini" }),
    options,
  );
  const roles = await startRoles({ config, role: "all", log: quietLogger(), store: sqlitePortOf(store) });
  const web = webOf(roles);
  cleanups.push(() => web.stop());
  return { url: web.url, web, store, databasePath };
}

/**
 * The pipeline in one process (startRoles, role all) on a store the test opened, with the test's
 * agent, and its web server on a free port; `where` is the store's address (PostgreSQL's queue needs it).
 */
export async function startPipeline(options: {
  config: GlassboxConfig;
  agent: GlassboxAgent;
  store: StorePort;
  where?: StorePortOptions;
  modelLabel?: string;
}): Promise<WebServer> {
  const config = { ...options.config, web: { ...options.config.web, host: "127.0.0.1", port: 0 } };
  const roles = await startRoles({ ...options, config, role: "all", log: quietLogger() });
  return webOf(roles);
}

/** The settings with a test's tokens and caps. */
function withServer(config: GlassboxConfig, server: ServerSettings = {}): GlassboxConfig {
  return {
    ...config,
    web: {
      ...config.web,
      ...(server.host ? { host: server.host } : {}),
      ...(server.apiToken ? { apiToken: server.apiToken } : {}),
      ...(server.apiUsers ? { apiUsers: server.apiUsers } : {}),
    },
    ...(server.dailyLimits ? { dailyLimits: server.dailyLimits } : {}),
  };
}

/** The pipeline's web server, at the address with a closing slash as the pages are linked. */
function webOf(roles: StartedRoles): WebServer {
  const api = roles.ingress?.api;
  if (!api) throw new Error("the pipeline started without its web server");
  return { url: `${api.url}/`, stop: roles.stop };
}

export function artifactsDir(): string {
  mkdirSync(ARTIFACTS, { recursive: true });
  return ARTIFACTS;
}

export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

export async function getJson<T = Record<string, unknown>>(url: string, headers: Record<string, string> = {}) {
  const response = await fetch(url, { headers });
  return { status: response.status, body: (await response.json()) as T };
}

export interface StreamedEvent {
  id: number;
  event: WebEvent;
}

/**
 * Reads a Server-Sent Events stream until `until` says stop (or the server ends it). Returns what
 * came, and whether the server ended the stream.
 */
export async function readEvents(
  url: string,
  options: {
    until?: (event: WebEvent, all: StreamedEvent[]) => boolean;
    headers?: Record<string, string>;
    /** Called once the server has answered: from then on, nothing published is missed. */
    onOpen?: () => void;
    timeoutMs?: number;
  } = {},
): Promise<{ events: StreamedEvent[]; endedByServer: boolean }> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), options.timeoutMs ?? 15_000);
  const events: StreamedEvent[] = [];
  let stopped = false;
  try {
    const response = await fetch(url, {
      headers: { accept: "text/event-stream", ...options.headers },
      signal: controller.signal,
    });
    if (!response.ok || !response.body)
      throw new Error(`event stream answered HTTP ${response.status}: ${await response.text()}`);
    options.onOpen?.();
    const decoder = new TextDecoder();
    let buffer = "";
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      let boundary: number;
      while ((boundary = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, boundary);
        buffer = buffer.slice(boundary + 2);
        const data = block
          .split("\n")
          .filter((line) => line.startsWith("data: "))
          .map((line) => line.slice(6))
          .join("\n");
        if (!data) continue;
        const id = Number(/^id: (\d+)$/m.exec(block)?.[1] ?? 0);
        const streamed = { id, event: JSON.parse(data) as WebEvent };
        events.push(streamed);
        if (options.until?.(streamed.event, events)) {
          stopped = true;
          controller.abort();
          return { events, endedByServer: false };
        }
      }
    }
    return { events, endedByServer: true };
  } catch (error) {
    if (stopped) return { events, endedByServer: false };
    if (controller.signal.aborted)
      throw new Error(
        `the event stream did not get there in time; it sent: ${events.map((streamed) => streamed.event.type).join(", ")}`,
      );
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

export const typesOf = (events: StreamedEvent[]) => events.map((streamed) => streamed.event.type);
