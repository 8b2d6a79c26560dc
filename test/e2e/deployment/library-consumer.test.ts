// glassbox as another project installs it: `npm pack` (which builds dist/ through `prepare`), then
// the tarball installed into a fresh project with `npm ci --offline` from npm's cache, then imported
// and type-checked there. No network: the consumer's lock file is this project's own (its
// production part), so every package comes from the cache `npm ci` filled. Install scripts are
// skipped (better-sqlite3's would compile or download); its built binding is copied instead.
import { execFile } from "node:child_process";
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startScriptedModelServer, type ScriptedModelServer } from "../../../src/testing/scripted-model-server.js";

const root = process.cwd();
const folder = mkdtempSync(join(tmpdir(), "glassbox-consumer-"));
const consumer = join(folder, "consumer");
let server: ScriptedModelServer;

interface Outcome {
  code: number;
  stdout: string;
  stderr: string;
}

function run(command: string, args: string[], cwd: string, env: Record<string, string> = {}): Promise<Outcome> {
  return new Promise((resolve) => {
    execFile(
      command,
      args,
      { cwd, env: { ...process.env, ...env }, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

async function succeed(command: string, args: string[], cwd: string): Promise<string> {
  const outcome = await run(command, args, cwd);
  if (outcome.code !== 0)
    throw new Error(`${command} ${args.join(" ")} failed (${outcome.code}): ${outcome.stderr || outcome.stdout}`);
  return outcome.stdout;
}

interface LockEntry {
  dev?: boolean;
  link?: boolean;
  [key: string]: unknown;
}

/** The consumer's lock file: glassbox from the tarball, and this project's production packages as they are locked here. */
function consumerLock(tarball: string): unknown {
  const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as Record<string, unknown>;
  const lock = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8")) as {
    packages: Record<string, LockEntry>;
  };
  const packages: Record<string, unknown> = {
    "": { name: "consumer", version: "1.0.0", dependencies: { glassbox: `file:${tarball}` } },
    "node_modules/glassbox": {
      version: manifest.version,
      resolved: `file:${tarball}`,
      license: manifest.license,
      dependencies: manifest.dependencies,
      bin: manifest.bin,
      engines: manifest.engines,
    },
  };
  for (const [path, entry] of Object.entries(lock.packages)) {
    if (path === "" || entry.dev || entry.link) continue;
    // This lock file leaves registry addresses out; given one, npm takes the tarball from its cache by
    // integrity instead of first asking the registry (offline: its cache) for the package's metadata.
    const name =
      typeof entry.name === "string"
        ? entry.name
        : path.slice(path.lastIndexOf("node_modules/") + "node_modules/".length);
    packages[path] = {
      resolved: `https://registry.npmjs.org/${name}/-/${name.split("/").pop()}-${String(entry.version)}.tgz`,
      ...entry,
    };
  }
  return { name: "consumer", version: "1.0.0", lockfileVersion: 3, requires: true, packages };
}

beforeAll(async () => {
  server = await startScriptedModelServer();
  await succeed("npm", ["pack", "--pack-destination", folder], root);
  const tarball = readdirSync(folder).find((name) => name.endsWith(".tgz"));
  if (!tarball) throw new Error("npm pack made no tarball");
  mkdirSync(consumer);
  copyFileSync(join(folder, tarball), join(consumer, tarball));
  writeFileSync(
    join(consumer, "package.json"),
    JSON.stringify({
      name: "consumer",
      version: "1.0.0",
      private: true,
      type: "module",
      dependencies: { glassbox: `file:${tarball}` },
    }),
  );
  writeFileSync(join(consumer, "package-lock.json"), JSON.stringify(consumerLock(tarball)));
  await succeed("npm", ["ci", "--offline", "--ignore-scripts", "--no-audit", "--no-fund"], consumer);
  const binding = "node_modules/better-sqlite3/build/Release";
  mkdirSync(join(consumer, binding), { recursive: true });
  copyFileSync(join(root, binding, "better_sqlite3.node"), join(consumer, binding, "better_sqlite3.node"));
}, 240_000);

afterAll(async () => {
  await server?.close();
  rmSync(folder, { recursive: true, force: true });
});

// The library example of docs/library.md, with an approval that waits and a resume that decides it.
const PROGRAM = `
import { createOpenAIModel, createToolRegistry, defineTool, openStorePort, pendingApprovals, resumeAgent, runAgent } from "glassbox";

const restock = defineTool({
  name: "restock",
  description: "Orders more of a fruit.",
  dangerous: true,
  parameters: { type: "object", properties: { fruit: { type: "string" }, units: { type: "integer" } }, required: ["fruit", "units"], additionalProperties: false },
  handler: async ({ fruit, units }) => ({ fruit, ordered: units }),
});
const config = {
  model: createOpenAIModel({ baseURL: process.env.MODEL_URL, apiKey: "test-key", model: "scripted-model" }),
  tools: createToolRegistry([restock]),
  approve: async () => "pending",
};
const first = await runAgent(config, { input: "Restock 5 pears", sessionId: "library" });
const [request] = pendingApprovals(first.paused);
const decision = { approved: true, by: "me", argumentsHash: request.argumentsHash };
const unknownId = await resumeAgent(config, first.paused, { call_typo: decision }).then(() => "no error", (error) => error.message);
const resumed = await resumeAgent(config, first.paused, { [request.toolCallId]: decision });
const store = await openStorePort({ databasePath: ":memory:" });
await store.close();
console.log(JSON.stringify({ first: first.stopReason, waitingFor: request.toolName, unknownId, resumed: resumed.stopReason, output: resumed.output, toolCalls: resumed.toolCalls }));
`;

// A strict consumer that checks every declaration file it reaches, the dependencies' too.
const TSCONFIG = {
  compilerOptions: {
    target: "ES2022",
    module: "NodeNext",
    moduleResolution: "NodeNext",
    strict: true,
    skipLibCheck: false,
    noEmit: true,
  },
  include: ["typed.ts"],
};
const TYPED = `
import { createAgentConfig, createToolRegistry, defineTool, loadConfig, openStorePort, pendingApprovals, resumeAgent, runAgent, type AgentConfig, type ApprovalDecision, type GlassboxAgent, type PausedRun, type RunResult, type StorePort } from "glassbox";

const lookup = defineTool({
  name: "lookup",
  description: "Looks a word up.",
  parameters: { type: "object", properties: { word: { type: "string" } }, required: ["word"], additionalProperties: false },
  handler: async ({ word }) => ({ word, length: word.length }),
});
export async function example(config: AgentConfig): Promise<RunResult> {
  const result = await runAgent({ ...config, tools: createToolRegistry([lookup]) }, { input: "hi" });
  const paused: PausedRun | undefined = result.paused;
  if (!paused) return result;
  const decisions: Record<string, ApprovalDecision> = {};
  for (const request of pendingApprovals(paused)) decisions[request.toolCallId] = { approved: false, by: "me", argumentsHash: request.argumentsHash };
  return resumeAgent(config, paused, decisions);
}
export const store: Promise<StorePort> = openStorePort({ databasePath: ":memory:" });
export const build: (config: ReturnType<typeof loadConfig>, log: Parameters<typeof createAgentConfig>[1]) => Promise<GlassboxAgent> = createAgentConfig;
`;

describe("glassbox installed from its packed tarball", () => {
  it("imports and runs: the library example (docs/library.md) with a paused approval resumed by the id pendingApprovals gives", async () => {
    server.setScript([
      { toolCalls: [{ name: "restock", arguments: '{"fruit":"pear","units":5}' }] },
      { content: "Ordered 5 pears." },
    ]);
    writeFileSync(join(consumer, "program.mjs"), PROGRAM);
    const outcome = await run(process.execPath, ["program.mjs"], consumer, { MODEL_URL: server.url });
    expect(outcome.stderr).toBe("");
    expect(JSON.parse(outcome.stdout)).toEqual({
      first: "awaiting_approval",
      waitingFor: "restock",
      unknownId: expect.stringMatching(
        /^resumeAgent got a decision for 'call_typo', which run run_\S+ does not wait for; it waits for \S+ \(restock\): key each decision by the toolCallId of pendingApprovals\(paused\)\.$/,
      ),
      resumed: "final",
      output: "Ordered 5 pears.",
      toolCalls: [{ name: "restock", arguments: { fruit: "pear", units: 5 }, status: "success" }],
    });
  });

  it("regression: a strict TypeScript consumer (skipLibCheck false) type-checks against the packed declarations, better-sqlite3's types included", async () => {
    writeFileSync(join(consumer, "tsconfig.json"), JSON.stringify(TSCONFIG));
    writeFileSync(join(consumer, "typed.ts"), TYPED);
    const outcome = await run(
      process.execPath,
      [join(root, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.json"],
      consumer,
    );
    expect(outcome.stdout + outcome.stderr).toBe("");
    expect(outcome.code).toBe(0);
  });

  it("its command line runs from the installed bin", async () => {
    const outcome = await run(join(consumer, "node_modules/.bin/glassbox"), ["tools", "--json"], consumer);
    expect(outcome.code).toBe(0);
    expect((JSON.parse(outcome.stdout) as Array<{ name: string }>).map((tool) => tool.name)).toEqual(
      expect.arrayContaining(["current_time", "calculator"]),
    );
  });
});

// A tools folder of one's own, outside the clone, as docs/writing-tools.md sets it up; the command
// line is the installed one, on plain Node (no tsx of the tests in the way).
describe("tool modules in a folder of one's own", () => {
  const CHECK_STOCK = `{ name: "check_stock", description: "Units of a fruit.", parameters: { type: "object", properties: {} }, handler: async () => 1 }`;
  const WITH_DEFINE_TOOL = `import { defineTool } from "glassbox";\nexport default [defineTool(${CHECK_STOCK})];\n`;
  const glassboxBin = () => join(consumer, "node_modules/.bin/glassbox");
  const toolsFolder = (name: string) => {
    const path = join(folder, name);
    mkdirSync(path);
    return path;
  };
  const toolNames = (stdout: string) => (JSON.parse(stdout) as Array<{ name: string }>).map((tool) => tool.name);

  it('import { defineTool } from "glassbox" works where glassbox is installed', async () => {
    writeFileSync(join(consumer, "mine.mjs"), WITH_DEFINE_TOOL);
    const outcome = await run(glassboxBin(), ["tools", "--json"], consumer, { GLASSBOX_TOOLS: "./mine.mjs" });
    expect(outcome.stderr).toBe("");
    expect(toolNames(outcome.stdout)).toContain("check_stock");
  });

  it("regression: where glassbox is not installed, the import is named with how to install it or leave it out", async () => {
    const tools = toolsFolder("bare-tools");
    writeFileSync(join(tools, "mine.mjs"), WITH_DEFINE_TOOL);
    const outcome = await run(glassboxBin(), ["tools"], tools, { GLASSBOX_TOOLS: "./mine.mjs" });
    expect(outcome.code).toBe(2);
    expect(outcome.stderr).toBe(
      `glassbox: Could not load the tool module './mine.mjs': it imports glassbox, which Node does not find from ${tools} (it looks in node_modules there and in the folders above); install glassbox there as it is installed here, or leave the import out: a tool is a plain object, and defineTool only adds TypeScript's types.\n`,
    );
    // Without the import, the same tool loads as a plain object.
    writeFileSync(join(tools, "plain.mjs"), `export default [${CHECK_STOCK}];\n`);
    const plain = await run(glassboxBin(), ["tools", "--json"], tools, { GLASSBOX_TOOLS: "./plain.mjs" });
    expect(toolNames(plain.stdout)).toContain("check_stock");
  });

  it("the folder install docs/writing-tools.md shows (npm install /path/to/glassbox) makes the import and npx glassbox work", async () => {
    const tools = toolsFolder("linked-tools");
    writeFileSync(join(tools, "package.json"), JSON.stringify({ name: "my-tools", version: "1.0.0", type: "module" }));
    // dist/ is built: npm pack above ran `prepare`.
    await succeed("npm", ["install", "--offline", "--ignore-scripts", "--no-audit", "--no-fund", root], tools);
    writeFileSync(join(tools, "mine.mjs"), WITH_DEFINE_TOOL);
    const outcome = await run("npx", ["--offline", "glassbox", "tools", "--json"], tools, {
      GLASSBOX_TOOLS: "./mine.mjs",
    });
    expect(outcome.stderr).toBe("");
    expect(toolNames(outcome.stdout)).toContain("check_stock");
  });

  it("regression: a .ts module on plain Node says how to run it instead of 'Unknown file extension'; under tsx, as the sentence says, it loads", async () => {
    const tools = toolsFolder("typescript-tools");
    const file = join(tools, "mine.ts");
    writeFileSync(
      file,
      `const units: number = 1;\nexport default [{ ...${CHECK_STOCK}, handler: async () => units }];\n`,
    );
    const outcome = await run(glassboxBin(), ["tools"], tools, { GLASSBOX_TOOLS: "./mine.ts" });
    expect(outcome.code).toBe(2);
    expect(outcome.stderr).toBe(
      `glassbox: Could not load the tool module './mine.ts': ${file} is TypeScript, which Node ${process.versions.node} does not run by itself; compile it to JavaScript (npx tsc) and give the .js file, write the module as .mjs, or start glassbox under tsx (npm install tsx, then NODE_OPTIONS="--import tsx" before the command).\n`,
    );
    expect(outcome.stderr).not.toContain("Unknown file extension");
    // "npm install tsx" there, as a link to the tests' own copy.
    mkdirSync(join(tools, "node_modules"));
    symlinkSync(join(root, "node_modules/tsx"), join(tools, "node_modules/tsx"));
    const underTsx = await run(glassboxBin(), ["tools", "--json"], tools, {
      GLASSBOX_TOOLS: "./mine.ts",
      NODE_OPTIONS: "--import tsx",
    });
    expect(underTsx.stderr).toBe("");
    expect(toolNames(underTsx.stdout)).toContain("check_stock");
  });
});

// The hints of the installed command line are commands a person pastes where they are: each is run
// here as a shell would run it, from the same folder.
describe("the command line's hints, by how it was started", () => {
  const bin = () => join(consumer, "node_modules/.bin/glassbox");
  const noDatabase = () => ({ GLASSBOX_DB: join(folder, "none.db"), npm_config_offline: "true" });

  /** The `see ...` command of reset's answer for a session nobody has, and what running it does. */
  async function hintOf(command: string, cwd: string, env: Record<string, string>): Promise<string> {
    const outcome = await run(command, ["reset", "--session", "nobody"], cwd, env);
    expect(outcome.code).toBe(1);
    const hint = /^There is no session cli:nobody; see (.+)\.\n$/.exec(outcome.stdout)?.[1] ?? outcome.stdout;
    const pasted = await run("sh", ["-c", hint], cwd, env);
    expect(pasted).toMatchObject({ code: 0, stdout: expect.stringContaining("No conversations are recorded yet") });
    return hint;
  }

  it("installed in the project: npx glassbox", async () => {
    expect(await hintOf(bin(), consumer, noDatabase())).toBe("npx glassbox sessions");
  });

  it("on PATH (a global install): glassbox", async () => {
    const env = {
      ...noDatabase(),
      PATH: `${join(consumer, "node_modules/.bin")}${delimiter}${process.env.PATH ?? ""}`,
    };
    expect(await hintOf("glassbox", folder, env)).toBe("glassbox sessions");
  });

  it("run by its path from a folder npx would not find it in: node and that path", async () => {
    expect(await hintOf(bin(), folder, noDatabase())).toBe("node consumer/node_modules/.bin/glassbox sessions");
  });
});
