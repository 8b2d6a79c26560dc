/**
 * `npm run check:links`: every relative link in README.md, CHANGELOG.md and docs/ resolves to a file
 * of the repository, and a link's #anchor to a heading of the page it names (GitHub's heading ids).
 * Links to the web (http:, https:, mailto:) are not followed: CI has no network.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export interface BrokenLink {
  file: string;
  line: number;
  target: string;
  reason: string;
}

/** GitHub's id of a heading: its text in lower case, punctuation but - and _ dropped, spaces to hyphens. */
export function headingId(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[`*~]/g, "")
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

function headingIds(markdown: string): Set<string> {
  const ids = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of markdown.split("\n")) {
    if (/^\s*```/.test(line)) fenced = !fenced;
    const heading = !fenced && /^#{1,6}\s+(.*)$/.exec(line);
    if (!heading) continue;
    const id = headingId(heading[1] ?? "");
    const count = seen.get(id) ?? 0;
    seen.set(id, count + 1);
    ids.add(count === 0 ? id : `${id}-${count}`);
  }
  return ids;
}

/** The links of one Markdown file that do not resolve. */
export function brokenLinks(file: string, root: string): BrokenLink[] {
  const markdown = readFileSync(file, "utf8");
  const broken: BrokenLink[] = [];
  let fenced = false;
  markdown.split("\n").forEach((text, index) => {
    if (/^\s*```/.test(text)) fenced = !fenced;
    if (fenced) return;
    for (const match of text.replace(/`[^`]*`/g, "").matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = match[1] ?? "";
      if (/^(https?:|mailto:)/.test(target)) continue;
      const [path = "", anchor] = target.split("#");
      const resolved = path === "" ? file : resolve(dirname(file), decodeURIComponent(path));
      const line = index + 1;
      const where = relative(root, file);
      if (!resolved.startsWith(root) || !existsSync(resolved)) {
        broken.push({ file: where, line, target, reason: "no such file" });
        continue;
      }
      if (anchor && resolved.endsWith(".md") && !headingIds(readFileSync(resolved, "utf8")).has(anchor))
        broken.push({ file: where, line, target, reason: `no heading #${anchor} there` });
    }
  });
  return broken;
}

/** README.md, CHANGELOG.md and every page under docs/. */
export function documents(root: string): string[] {
  const pages = (directory: string): string[] =>
    readdirSync(directory).flatMap((name) => {
      const path = join(directory, name);
      if (statSync(path).isDirectory()) return pages(path);
      return name.endsWith(".md") ? [path] : [];
    });
  return [join(root, "README.md"), join(root, "CHANGELOG.md"), ...pages(join(root, "docs"))];
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const root = fileURLToPath(new URL("..", import.meta.url)).replace(/\/$/, "");
  const broken = documents(root).flatMap((file) => brokenLinks(file, root));
  for (const link of broken) console.error(`${link.file}:${link.line}: ${link.target}: ${link.reason}`);
  if (broken.length > 0) {
    console.error(`${broken.length} link(s) do not resolve.`);
    process.exitCode = 1;
  } else console.log("Every relative link in README.md, CHANGELOG.md and docs/ resolves.");
}
