/**
 * `npm run demo`: the web playground on the scripted model the tests use, with the demo shop's
 * tools, so anyone can watch a full run offline: a lookup, an approval, and every step in the
 * trace. Tools of one's own (GLASSBOX_TOOLS, --tools) join, and the scripted model calls one when a
 * message names it. The conversations live in a temporary folder removed at exit, unless --db or
 * GLASSBOX_DB names a file to keep them in. A small context budget lets memory's compression show.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join, relative, resolve } from "node:path";
import { parseArgs } from "node:util";
import { demoReply } from "./demo-script.js";
import { configurationError } from "./agent/errors.js";
import { loadConfig } from "./config.js";
import { createLogger } from "./logger.js";
import { startRoles } from "./roles/start.js";
import { createAgentConfig } from "./setup.js";
import { startScriptedModelServer } from "./testing/scripted-model-server.js";

// A little latency per model call, so tool activity and the streamed answer can be watched.
const DEMO_LATENCY_MS = 400;
/** The temporary folders of demo runs, in the system's temporary folder. */
const DEMO_FOLDER = "glassbox-demo-";
const OPTIONS = "--db FILE (keep the conversations there) and --tools module.mjs (repeatable)";

/** Where the demo keeps its data: a file to keep, or a temporary folder removed at exit. */
interface DemoData {
  database: string;
  shop: string;
  temporary?: string;
}

type Stop = () => Promise<void> | void;

async function startDemo(argv: string[]): Promise<void> {
  // `npm run demo` runs in the package's folder; paths the person gives are meant from theirs.
  if (process.env.npm_lifecycle_event === "demo" && process.env.INIT_CWD) process.chdir(process.env.INIT_CWD);
  const options = readOptions(argv);
  const data = placeData(options.db ?? process.env.GLASSBOX_DB);
  // Undone last to first, on a failed start as on Ctrl+C: nothing keeps running, no folder stays.
  const stops: Stop[] = [() => (data.temporary ? rmSync(data.temporary, { recursive: true, force: true }) : undefined)];
  const stopAll = async () => {
    for (const stop of stops.splice(0).reverse())
      await Promise.resolve()
        .then(stop)
        .catch(() => undefined);
  };
  try {
    const model = await startScriptedModelServer({
      script: (request) => demoReply(request),
      latencyMs: DEMO_LATENCY_MS,
    });
    stops.push(() => model.close());
    const tools = [...list(process.env.GLASSBOX_TOOLS), ...options.tools];
    const env = {
      OPENAI_BASE_URL: model.url,
      LLM_MODEL: "scripted-model",
      GLASSBOX_DEMO: "true",
      GLASSBOX_DB: data.database,
      GLASSBOX_SHOP_DB: data.shop,
      ...(tools.length ? { GLASSBOX_TOOLS: tools.map(absoluteIfPath).join(",") } : {}),
    };
    const config = loadConfig({
      ...process.env,
      ...env,
      OPENAI_API_KEY: "demo",
      GLASSBOX_CONTEXT_TOKENS: process.env.GLASSBOX_CONTEXT_TOKENS ?? "1500",
      // The scripted model makes no schedules: their tools would only take room from that small budget.
      GLASSBOX_BUILTIN_TOOLS: process.env.GLASSBOX_BUILTIN_TOOLS ?? "current_time,calculator,memory",
    });
    const log = createLogger({ level: "warn" });
    const agent = await createAgentConfig(config, log);
    stops.push(() => agent.close());
    // The one pipeline in one process, as `npm start` runs it on SQLite.
    const roles = await startRoles({
      config,
      role: "all",
      log,
      agent,
      store: agent.port,
      modelLabel: "scripted model (demo)",
    });
    stops.push(() => roles.stop());
    const pages = roles.ingress?.api?.url;
    if (!pages) throw configurationError("the demo is the web playground: unset GLASSBOX_WEB=off to run it.");
    process.stdout.write(introduction(`${pages}/`, model.url, env, data));
  } catch (error) {
    await stopAll();
    throw error;
  }
  const shutdown = async () => {
    await stopAll();
    process.exit(0);
  };
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.once(signal, () => void shutdown());
}

function readOptions(argv: string[]): { db?: string; tools: string[] } {
  try {
    const { values } = parseArgs({
      args: argv,
      options: { db: { type: "string" }, tools: { type: "string", multiple: true, default: [] } },
    });
    return { db: nonEmpty(values.db), tools: values.tools };
  } catch (error) {
    // node:util's own text is two sentences about positional arguments; say what the demo takes.
    throw configurationError(`${(error as Error).message.split(".")[0]}; the demo takes ${OPTIONS}.`);
  }
}

/**
 * The file to keep the conversations in (its shop beside it), or a temporary folder for both. The
 * demo's own shop starts from its seed at every start, so the quick start's cancel works each time;
 * only a GLASSBOX_SHOP_DB of the person's own is kept as it is. Paths inside an earlier demo's
 * temporary folder (its export line, pasted into this terminal) are that demo's, not the person's.
 */
function placeData(keep: string | undefined): DemoData {
  const shopFile = ownPath(process.env.GLASSBOX_SHOP_DB);
  const data = placeFiles(ownPath(keep), shopFile);
  if (!shopFile) for (const suffix of ["", "-wal", "-shm"]) rmSync(`${data.shop}${suffix}`, { force: true });
  return data;
}

function placeFiles(keep: string | undefined, shopFile: string | undefined): DemoData {
  if (keep) {
    const database = resolve(keep);
    return {
      database,
      shop: shopFile
        ? resolve(shopFile)
        : join(dirname(database), `${basename(database).replace(/\.db$/, "")}-shop.db`),
    };
  }
  const temporary = mkdtempSync(join(tmpdir(), DEMO_FOLDER));
  return {
    database: join(temporary, "glassbox.db"),
    shop: shopFile ? resolve(shopFile) : join(temporary, "shop.db"),
    temporary,
  };
}

/** A path the person chose: set, and not inside a temporary folder of an earlier demo. */
function ownPath(value: string | undefined): string | undefined {
  const path = nonEmpty(value);
  return path && !relative(tmpdir(), resolve(path)).startsWith(DEMO_FOLDER) ? path : undefined;
}

/** What the demo prints: the pages, the model's address and how the command line uses it, where the data is. */
function introduction(webUrl: string, modelUrl: string, env: Record<string, string>, data: DemoData): string {
  const exports = Object.entries(env)
    .map(([name, value]) => `${name}=${shellQuoted(value)}`)
    .join(" ");
  const kept = data.temporary
    ? `Conversations are kept in ${data.database} until the demo stops; --db FILE or GLASSBOX_DB keeps them.`
    : `Conversations are kept in ${data.database}; GLASSBOX_DB=${shellQuoted(data.database)} npx glassbox sessions lists them, after the demo too.`;
  return [
    `glassbox demo: chat at ${webUrl} and the trace at ${webUrl}trace (scripted model, offline; Ctrl+C stops it)`,
    `The scripted model answers at ${modelUrl}. To use it from the command line, in another terminal:`,
    `  export ${exports}`,
    `  npx glassbox run "What is the status of order 20240410003?"`,
    kept,
    "",
  ].join("\n");
}

/** A tool module given as a path, made absolute so the command line finds it from anywhere. */
function absoluteIfPath(specifier: string): string {
  const path =
    /^\.{1,2}[/\\]/.test(specifier) || (specifier.includes("/") && !specifier.startsWith("@")) || existsSync(specifier);
  return path ? resolve(specifier) : specifier;
}

function shellQuoted(value: string): string {
  return /^[\w@%+=:,./-]+$/.test(value) ? value : `'${value.replace(/'/g, `'\\''`)}'`;
}

function list(value: string | undefined): string[] {
  return (value ?? "")
    .split(",")
    .map((part) => part.trim())
    .filter(Boolean);
}

function nonEmpty(value: string | undefined): string | undefined {
  return value?.trim() ? value.trim() : undefined;
}

startDemo(process.argv.slice(2)).catch((error: unknown) => {
  process.stderr.write(`glassbox demo: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
