/**
 * `npm run demo`: the web playground on the scripted model the tests use, with the demo shop's
 * tools, in a fresh temporary directory — so anyone can watch a full run offline: a lookup, an
 * approval, and every step in the trace. A small context budget lets memory's compression show.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { demoReply } from "./adapters/web/demo-script.js";
import { exampleRequests } from "./adapters/example-requests.js";
import { startWebServer } from "./adapters/web/web-server.js";
import { loadConfig } from "./config.js";
import { createLogger } from "./logger.js";
import { createAgentConfig } from "./setup.js";
import { startScriptedModelServer } from "./testing/scripted-model-server.js";

// A little latency per model call, so tool activity and the streamed answer can be watched.
const DEMO_LATENCY_MS = 400;

async function startDemo(): Promise<void> {
  const directory = mkdtempSync(join(tmpdir(), "glassbox-demo-"));
  const model = await startScriptedModelServer({ script: (request) => demoReply(request), latencyMs: DEMO_LATENCY_MS });
  const config = loadConfig({
    ...process.env,
    OPENAI_BASE_URL: model.url,
    OPENAI_API_KEY: "demo",
    LLM_MODEL: "scripted-model",
    GLASSBOX_DB: join(directory, "glassbox.db"),
    GLASSBOX_SHOP_DB: join(directory, "shop.db"),
    GLASSBOX_DEMO: "true",
    GLASSBOX_CONTEXT_TOKENS: process.env.GLASSBOX_CONTEXT_TOKENS ?? "1500",
  });
  const log = createLogger({ level: "warn" });
  const agent = await createAgentConfig(config, log);
  const web = await startWebServer({
    agent,
    store: agent.store,
    log,
    ...config.web,
    approvalTtlSeconds: config.approvalTtlSeconds,
    prices: config.prices,
    dailyLimits: config.dailyLimits,
    modelLabel: "scripted model (demo)",
    hints: exampleRequests(agent.toolSources),
  });
  process.stdout.write(`glassbox demo: chat at ${web.url} and the trace at ${web.url}trace (scripted model, offline; Ctrl+C stops it)\n`);

  const shutdown = async () => {
    await web.stop();
    await model.close();
    await agent.close();
    rmSync(directory, { recursive: true, force: true });
    process.exit(0);
  };
  process.once("SIGINT", () => void shutdown());
  process.once("SIGTERM", () => void shutdown());
}

startDemo().catch((error: unknown) => {
  process.stderr.write(`glassbox demo: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
