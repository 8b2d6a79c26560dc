import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, isAbsolute, resolve, sep } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { ToolDefinitionError } from "./registry.js";
import type { ToolGroup } from "./tool-sources.js";
import type { AnyTool } from "./types.js";

/**
 * Imports tool modules: each default-exports an array of tool definitions. A specifier is a file
 * path, read from the current directory (never from where glassbox is installed), or a package
 * name. Each module's tools keep its name, so a clash between two modules can say which.
 */
export async function loadToolModules(specifiers: string[], cwd = process.cwd()): Promise<ToolGroup[]> {
  const groups: ToolGroup[] = [];
  for (const specifier of specifiers) {
    const path = resolve(cwd, specifier);
    const isFile =
      looksLikePath(specifier) || existsSync(path) || (SCRIPT_EXTENSION.test(specifier) && /^[^@].*\//.test(specifier));
    if (isFile && !existsSync(path)) {
      throw new ToolDefinitionError(
        `Could not load the tool module '${specifier}': there is no file ${path} (a relative path is read from the current directory, ${cwd}); check the path in GLASSBOX_TOOLS or --tools.`,
      );
    }
    let module: { default?: unknown };
    try {
      module = (await import(isFile ? pathToFileURL(path).href : specifier)) as { default?: unknown };
    } catch (error) {
      const problem = await describeLoadFailure(error, isFile ? path : undefined, specifier, cwd);
      throw new ToolDefinitionError(`Could not load the tool module '${specifier}': ${problem}.`);
    }
    if (!Array.isArray(module.default)) {
      throw new ToolDefinitionError(`The tool module '${specifier}' must default-export an array of tool definitions.`);
    }
    groups.push({ source: { kind: "module", module: specifier }, tools: module.default as AnyTool[] });
  }
  return groups;
}

/**
 * "./x.mjs", "../x", "/abs/x", "C:\x": a path whatever is there ("dir/x.mjs" too, in the caller).
 * A bare "tools.mjs" is a file only if it exists: "chart.js" may be a package.
 */
function looksLikePath(specifier: string): boolean {
  return /^\.{1,2}([/\\]|$)/.test(specifier) || isAbsolute(specifier) || specifier.includes("\\");
}

const SCRIPT_EXTENSION = /\.[cm]?[jt]sx?$/;

/** Why an import failed, said of the user's own file and line, never of glassbox's insides. */
async function describeLoadFailure(
  error: unknown,
  file: string | undefined,
  specifier: string,
  cwd: string,
): Promise<string> {
  const { code, message = String(error), name } = (error ?? {}) as { code?: string; message?: string; name?: string };
  if (code === "ERR_MODULE_NOT_FOUND" || code === "MODULE_NOT_FOUND") {
    // The specifier itself is missing, or something the user's module imports is.
    if (!file && message.includes(`'${packageName(specifier)}'`)) {
      const orFile = SCRIPT_EXTENSION.test(specifier) ? ` and no file ${resolve(cwd, specifier)}` : "";
      return `there is no installed package '${specifier}'${orFile}; give the path of your module (./my-tools.mjs) or install the package`;
    }
    const missing = /^Cannot find package '([^']+)' imported from (.+)$/.exec(firstLine(message));
    if (missing?.[1] === "glassbox") return glassboxNotBeside(dirname(missing[2] ?? ""));
    return `it imports something that is not installed (${firstLine(message)})`;
  }
  if (code === "ERR_UNKNOWN_FILE_EXTENSION") {
    const typescript = /for (.+\.[cm]?tsx?)$/.exec(firstLine(message))?.[1];
    if (typescript)
      return `${typescript} is TypeScript, which Node ${process.versions.node} does not run by itself; compile it to JavaScript (npx tsc) and give the .js file, write the module as .mjs, or start glassbox under tsx (npm install tsx, then NODE_OPTIONS="--import tsx" before the command)`;
  }
  if (name === "SyntaxError" || /^Transform failed/.test(message)) {
    // tsx (esbuild) puts "file:line:column: ERROR: text" in the message; Node puts the place nowhere
    // an importer can read, so `node --check` (the same parser) is asked for it.
    const transformed = /^(.+?:\d+:\d+): ERROR: (.+)$/m.exec(message);
    if (transformed) return `a syntax error at ${transformed[1]}: ${transformed[2]}`;
    const place = file && SCRIPT_EXTENSION.test(file) ? await syntaxErrorPlace(file) : undefined;
    return place
      ? `a syntax error at ${place}: ${firstLine(message)}`
      : `a syntax error in a module it imports: ${firstLine(message)}`;
  }
  const at = firstUserFrame(error);
  return `it threw while loading: ${name ?? "Error"}: ${firstLine(message)}${at ? ` (at ${at})` : ""}`;
}

/**
 * A module that imports glassbox from a folder where Node finds none (outside the clone, with
 * nothing installed): how to install it there, or that it needs no import at all.
 */
function glassboxNotBeside(folder: string): string {
  // Two levels below the package root, in src/tools and in dist/tools alike.
  const root = resolve(fileURLToPath(new URL("../..", import.meta.url)));
  const install = root.split(sep).includes("node_modules")
    ? "install glassbox there as it is installed here"
    : `install it there (npm install ${root})`;
  return `it imports glassbox, which Node does not find from ${folder} (it looks in node_modules there and in the folders above); ${install}, or leave the import out: a tool is a plain object, and defineTool only adds TypeScript's types`;
}

/** "pkg" of "pkg/sub", "@scope/pkg" of "@scope/pkg/sub": the name Node says it cannot find. */
function packageName(specifier: string): string {
  return specifier
    .split("/")
    .slice(0, specifier.startsWith("@") ? 2 : 1)
    .join("/");
}

/** "/path/tools.mjs:3" from `node --check`, or undefined when the file itself parses. */
async function syntaxErrorPlace(file: string): Promise<string | undefined> {
  try {
    await promisify(execFile)(process.execPath, ["--check", file], { timeout: 10_000, maxBuffer: 64 * 1024 });
    return undefined;
  } catch (error) {
    // Its first line is "<file>:<line>" when the file does not parse; anything else is another failure.
    const place = /^(.+):(\d+)$/m.exec(String((error as { stderr?: unknown }).stderr ?? ""));
    return place?.[1] === file ? `${file}:${place[2]}` : undefined;
  }
}

/** The first stack frame outside Node's own code: the line of the user's module that threw. */
function firstUserFrame(error: unknown): string | undefined {
  const stack = error instanceof Error ? (error.stack ?? "") : "";
  for (const line of stack.split("\n").slice(1)) {
    const frame = /\(?(file:\/\/\S+?|\/[^():]+|[A-Za-z]:\\[^():]+):(\d+):\d+\)?$/.exec(line.trim());
    if (frame?.[1]) return `${frame[1].startsWith("file:") ? fileURLToPath(frame[1]) : frame[1]}:${frame[2]}`;
  }
  return undefined;
}

function firstLine(text: string): string {
  return (text.split("\n")[0] ?? "").trim().replace(/\.$/, "");
}
