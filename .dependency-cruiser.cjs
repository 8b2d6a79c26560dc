/**
 * The import rule: dependencies point one way, roles -> adapters -> conversations -> store, queue ->
 * the engine (src/agent, src/tools). `npm run check` fails on an import that runs back up. Imports
 * that already ran back when the rule arrived are listed in .dependency-cruiser-known-violations.json
 * (they are moved out one by one; the list only shrinks: `npm run check:baseline` rewrites it).
 */
const ROLES = "^src/(roles|cli)/|^src/(main|cli|demo|demo-script|index|setup)\\.ts$";
const ADAPTERS = "^src/adapters/";
const CONVERSATIONS = "^src/conversations/";
const STORE_AND_QUEUE = "^src/(store|queue)/";
// Leaf modules anyone may import: settings, the logger, the HTTP client, SQLite's WAL helper.
const LEAVES = "^src/(config|settings|logger|redact|undici-fetch|sqlite-wal)\\.ts$";
const ENGINE = "^src/(agent|tools)/";

const above = (...layers) => ({ path: layers.join("|") });

module.exports = {
  forbidden: [
    {
      name: "engine-imports-upward",
      comment: "The engine (loop, model layer, memory, trace records, tools) imports no store, queue, conversation, platform or role.",
      severity: "error",
      from: { path: ENGINE },
      to: above(STORE_AND_QUEUE, CONVERSATIONS, ADAPTERS, ROLES, "^src/testing/", "^src/config\\.ts$"),
    },
    {
      name: "store-or-queue-imports-upward",
      comment: "The store and the queue know nothing of conversations, platforms or roles.",
      severity: "error",
      from: { path: STORE_AND_QUEUE },
      to: above(CONVERSATIONS, ADAPTERS, ROLES, "^src/testing/"),
    },
    {
      name: "conversations-import-upward",
      comment: "Conversations (turns, queueing, approvals, stop) know no platform and no role.",
      severity: "error",
      from: { path: CONVERSATIONS },
      to: above(ADAPTERS, ROLES, "^src/testing/"),
    },
    {
      name: "adapters-import-roles",
      comment: "An adapter (a platform's inbound and surface) is wired by a role and never imports one.",
      severity: "error",
      from: { path: ADAPTERS },
      to: above(ROLES, "^src/testing/"),
    },
    {
      name: "leaves-import-upward",
      comment: "Settings, the logger and the HTTP client are leaves: they import only the engine and each other.",
      severity: "error",
      from: { path: LEAVES },
      to: above(STORE_AND_QUEUE, CONVERSATIONS, ADAPTERS, ROLES, "^src/testing/"),
    },
    {
      name: "testing-imports-glassbox",
      comment: "The wire-level fakes in src/testing depend on nothing of glassbox's own.",
      severity: "error",
      from: { path: "^src/testing/" },
      to: { path: "^src/", pathNot: "^src/testing/" },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "^src/adapters/web/public/" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { exportsFields: ["exports"], conditionNames: ["import", "require", "node", "default", "types"], extensions: [".ts", ".js"] },
  },
};
