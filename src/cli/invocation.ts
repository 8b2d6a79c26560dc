/**
 * How a person at this terminal starts this very command line, so that its hints are commands they
 * can paste: `glassbox` when that name on PATH is this script (installed globally, or npm link),
 * `npx glassbox` when npx finds it from the current folder (the clone, or a project that installed
 * it), else `node <its path>`.
 */
import { existsSync, readFileSync, realpathSync } from "node:fs";
import { delimiter, dirname, isAbsolute, join, relative, resolve } from "node:path";

let known: string | undefined;

/** "npx glassbox", "glassbox" or "node /path/to/cli.js": what to write before a command's words. */
export function glassboxCommand(): string {
  known ??= decideCommand(process.argv[1] ?? "", process.env.PATH ?? "", process.cwd());
  return known;
}

/** A whole command to paste: `npx glassbox trace run_1`. Words with spaces or quotes are quoted. */
export function pasteable(...words: string[]): string {
  return [glassboxCommand(), ...words.map(shellWord)].join(" ");
}

function decideCommand(argv1: string, path: string, cwd: string): string {
  const script = realPath(argv1);
  if (!script) return "glassbox";
  const onPath = path
    .split(delimiter)
    .filter(Boolean)
    .some((folder) => realPath(join(folder, "glassbox")) === script);
  if (onPath) return "glassbox";
  const mine = packageRoot(script);
  if (mine && npxTarget(cwd) === mine) return "npx glassbox";
  const shown = relative(cwd, argv1);
  return `node ${shellWord(shown.startsWith("..") || isAbsolute(shown) ? resolve(argv1) : shown)}`;
}

/** The glassbox package the script belongs to (dist/cli.js, or src/cli.ts under tsx). */
function packageRoot(script: string): string | undefined {
  for (let folder = dirname(script); folder !== dirname(folder); folder = dirname(folder))
    if (packageName(folder) === "glassbox") return folder;
  return undefined;
}

/**
 * The glassbox `npx glassbox` runs from `cwd`: npm's project is the nearest folder above with a
 * package.json or node_modules; npx runs that project's own bin when it is glassbox, else the one
 * it installed.
 */
function npxTarget(cwd: string): string | undefined {
  for (let folder = resolve(cwd); ; folder = dirname(folder)) {
    if (existsSync(join(folder, "package.json")) || existsSync(join(folder, "node_modules"))) {
      if (packageName(folder) === "glassbox") return realPath(folder);
      return realPath(join(folder, "node_modules", "glassbox"));
    }
    if (folder === dirname(folder)) return undefined;
  }
}

function packageName(folder: string): string | undefined {
  try {
    return (JSON.parse(readFileSync(join(folder, "package.json"), "utf8")) as { name?: string }).name;
  } catch {
    return undefined;
  }
}

function realPath(path: string): string | undefined {
  try {
    return realpathSync(path);
  } catch {
    return undefined;
  }
}

function shellWord(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}
