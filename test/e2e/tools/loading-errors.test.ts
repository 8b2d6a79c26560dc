// What a person sees when their tools do not load: one sentence naming the tool, the parameter
// and what is allowed, or the module's own file and line; never ajv's raw text or a path inside
// glassbox. The command line runs as a real child process in a folder of its own.
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config.js";
import { loadTools } from "../../../src/setup.js";
import { createToolRegistry } from "../../../src/tools/registry.js";
import type { AnyTool } from "../../../src/tools/types.js";

const folder = mkdtempSync(join(tmpdir(), "glassbox-tool-errors-"));
afterAll(() => rmSync(folder, { recursive: true, force: true }));

function moduleFile(name: string, source: string): string {
  const path = join(folder, name);
  writeFileSync(path, source);
  return path;
}

function registrationError(parameters: Record<string, unknown>): string {
  const tool: AnyTool = {
    name: "check_stock",
    description: "Units of a fruit in stock.",
    parameters,
    handler: async () => 1,
  };
  try {
    createToolRegistry([tool]);
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error("the registry accepted the schema");
}

async function loadError(specifier: string): Promise<string> {
  try {
    await loadTools(loadConfig({ GLASSBOX_TOOLS: specifier }));
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error("the tools loaded");
}

/** The command line in `cwd`, with tsx given by its full path since `cwd` has no node_modules. */
function glassboxIn(
  cwd: string,
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number; stdout: string; stderr: string }> {
  const cli = join(process.cwd(), "src/cli.ts");
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ["--import", import.meta.resolve("tsx"), cli, ...args],
      { cwd, env: { PATH: process.env.PATH ?? "", ...env } },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe("a tool's parameters schema that JSON Schema refuses", () => {
  it('regression: type "integr" names the tool, the parameter and the allowed types in one sentence, not ajv\'s three messages', () => {
    const message = registrationError({ type: "object", properties: { units: { type: "integr" } } });
    expect(message).toBe(
      `Tool 'check_stock': its parameters schema is invalid: the "type" of parameter 'units' is "integr"; it must be one of "array", "boolean", "integer", "null", "number", "object", "string" (or a list of them).`,
    );
  });

  it.each([
    [
      "a nested parameter",
      { type: "object", properties: { address: { type: "object", properties: { zip: { enum: "12345" } } } } },
      `the "enum" of parameter 'address.zip' is "12345"; it must be a list (JSON array)`,
    ],
    [
      "an array's items",
      { type: "object", properties: { tags: { type: "array", items: { type: "strng" } } } },
      `the "type" of parameter 'tags[]' is "strng"`,
    ],
    [
      "one entry of a type list",
      { type: "object", properties: { note: { type: ["string", "nul"] } } },
      `the "type" of parameter 'note' lists "nul"`,
    ],
    [
      "a keyword of the whole object",
      { type: "object", required: "fruit" },
      `its "required" is "fruit"; it must be a list (JSON array)`,
    ],
    [
      "a limit out of range",
      { type: "object", properties: { fruit: { type: "string", minLength: -1 } } },
      `the "minLength" of parameter 'fruit' is -1; it must be >= 0`,
    ],
    [
      "a misspelt keyword",
      { type: "object", properties: { fruit: { type: "string", maxLenght: 3 } } },
      `parameter 'fruit' uses "maxLenght", which is not a JSON Schema keyword; did you mean "maxLength"?`,
    ],
    [
      "an unknown format",
      { type: "object", properties: { contact: { type: "string", format: "emial" } } },
      `the "format" of parameter 'contact' is "emial", which is not a known format; did you mean "email"?`,
    ],
    [
      "a $ref to nothing",
      { type: "object", properties: { fruit: { $ref: "#/$defs/fruit" } } },
      `a "$ref" points at #/$defs/fruit, which the schema does not define`,
    ],
  ])("%s", (_label, parameters, expected) => {
    const message = registrationError(parameters);
    expect(message).toContain(`Tool 'check_stock': its parameters schema is invalid: ${expected}`);
    expect(message).not.toMatch(/data\/|must match a schema in anyOf|strict mode/);
    expect(message.split("\n")).toHaveLength(1);
  });

  it("names the module the tool came from", async () => {
    const path = moduleFile(
      "schema.mjs",
      `export default [{ name: "check_stock", description: "d", parameters: { type: "object", properties: { units: { type: "integr" } } }, handler: async () => 1 }];\n`,
    );
    expect(await loadError(path)).toMatch(
      new RegExp(
        `^Tool 'check_stock' \\(module ${path.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\): its parameters schema is invalid: the "type" of parameter 'units' is "integr"`,
      ),
    );
  });
});

describe("a tool module that does not load, as the command line says it", () => {
  // Through a real child process: under vitest, imports go through its own module runner instead of Node's.
  async function toolsError(specifier: string): Promise<string> {
    const { code, stderr } = await glassboxIn(folder, ["tools"], { GLASSBOX_TOOLS: specifier });
    expect(code).toBe(2);
    const lines = stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    return lines[0] ?? "";
  }

  it("regression: a syntax error gives the module's file and line", async () => {
    const path = moduleFile("broken.mjs", `export default [\n  {\n    name: "check_stock" oops,\n  },\n];\n`);
    expect(await toolsError(path)).toBe(
      `glassbox: Could not load the tool module '${path}': a syntax error at ${path}:3: Unexpected identifier 'oops'.`,
    );
  });

  it("a syntax error in a module it imports says so", async () => {
    moduleFile("helper.mjs", `export const units = 12 12;\n`);
    const path = moduleFile("outer.mjs", `import { units } from "./helper.mjs";\nexport default [];\n`);
    expect(await toolsError(path)).toBe(
      `glassbox: Could not load the tool module '${path}': a syntax error in a module it imports: Unexpected number.`,
    );
  });

  it("a syntax error in a TypeScript module (loaded through tsx) gives its file, line and column", async () => {
    const path = moduleFile("broken.ts", `export default [\n  {\n    name: "check_stock" oops,\n  },\n];\n`);
    expect(await toolsError(path)).toBe(
      `glassbox: Could not load the tool module '${path}': a syntax error at ${path}:3:24: Expected "}" but found "oops".`,
    );
  });

  it("a module that throws while loading gives what it threw and its line", async () => {
    const path = moduleFile(
      "throws.mjs",
      `const key = process.env.NO_SUCH_KEY;\nif (!key) throw new TypeError("set NO_SUCH_KEY first");\nexport default [];\n`,
    );
    expect(await toolsError(path)).toBe(
      `glassbox: Could not load the tool module '${path}': it threw while loading: TypeError: set NO_SUCH_KEY first (at ${path}:2).`,
    );
  });

  it("a module that imports a package nobody installed says which", async () => {
    const path = moduleFile("imports.mjs", `import "glassbox-no-such-package";\nexport default [];\n`);
    expect(await toolsError(path)).toBe(
      `glassbox: Could not load the tool module '${path}': it imports something that is not installed (Cannot find package 'glassbox-no-such-package' imported from ${path}).`,
    );
  });

  it("a package name that is not installed says so, without glassbox's own paths", async () => {
    expect(await toolsError("glassbox-no-such-tools")).toBe(
      "glassbox: Could not load the tool module 'glassbox-no-such-tools': there is no installed package 'glassbox-no-such-tools'; give the path of your module (./my-tools.mjs) or install the package.",
    );
  });
});

describe("GLASSBOX_TOOLS with a relative path, through the command line", () => {
  it("regression: ./nope.mjs is looked for in the current directory, and the message names that path, not one inside dist/ or src/", async () => {
    const cwd = mkdtempSync(join(folder, "project-"));
    const { code, stderr } = await glassboxIn(cwd, ["tools"], { GLASSBOX_TOOLS: "./nope.mjs" });
    expect(code).toBe(2);
    expect(stderr.trim()).toBe(
      `glassbox: Could not load the tool module './nope.mjs': there is no file ${join(cwd, "nope.mjs")} (a relative path is read from the current directory, ${cwd}); check the path in GLASSBOX_TOOLS or --tools.`,
    );
    expect(stderr).not.toMatch(/dist\/|src\/tools|load-modules/);
  });

  it("a relative path that exists there is loaded from there", async () => {
    const cwd = mkdtempSync(join(folder, "project-"));
    writeFileSync(
      join(cwd, "mine.mjs"),
      `export default [{ name: "check_stock", description: "Units of a fruit.", parameters: { type: "object", properties: {} }, handler: async () => 1 }];\n`,
    );
    const { code, stdout } = await glassboxIn(cwd, ["tools", "--json"], { GLASSBOX_TOOLS: "./mine.mjs" });
    expect(code).toBe(0);
    expect(JSON.parse(stdout)).toContainEqual(
      expect.objectContaining({ name: "check_stock", from: "module ./mine.mjs" }),
    );
  });
});
