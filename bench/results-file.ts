/**
 * bench/RESULTS.md, the latest figures: `npm run bench -- --write` replaces the section of each
 * benchmark it ran (between that benchmark's markers) and keeps the others, so the file always holds
 * the latest run of every benchmark with its date and machine.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { sig3, type BenchmarkReport } from "./measure.js";

export const RESULTS_FILE = new URL("./RESULTS.md", import.meta.url);
const HEADER = `# Benchmark results (latest)

Written by \`npm run bench -- --write\` (or \`npm run bench -- <name> --write\` for one benchmark): each
section is the latest run of its benchmark, with the date and the machine it ran on. Ratios are taken
against a baseline measured in the same run; the model server runs in another process than what is
measured. How a figure was reached belongs in commit messages, not here.
`;

export interface Machine {
  node: string;
  cpu: string;
  cores: number;
  loadAverage: number;
}

/** One benchmark's section: when and where, how it was measured, its figures and its targets. */
export function resultsSection(
  name: string,
  title: string,
  report: BenchmarkReport,
  machine: Machine,
  at: Date,
  seconds: number,
): string {
  const escape = (text: string) => text.replaceAll("|", "\\|");
  const rows = report.rows.map((row) =>
    typeof row.value === "number"
      ? `| ${escape(row.label)} | ${sig3(row.value)} | | | ${row.unit} |`
      : `| ${escape(row.label)} | ${sig3(row.value.median)} | ${sig3(row.value.min)} | ${sig3(row.value.max)} | ${row.unit} |`,
  );
  const targets = report.targets.map(
    (target) => `| ${target.pass ? "pass" : "**FAIL**"} | ${escape(target.label)} | ${escape(target.detail)} |`,
  );
  return [
    `<!-- ${name} -->`,
    `## ${name}: ${title}`,
    "",
    `${at.toISOString().slice(0, 10)}, node ${machine.node}, ${machine.cpu}, ${machine.cores} cores, load average ` +
      `${machine.loadAverage.toFixed(2)} at the start; ${seconds.toFixed(0)} s.`,
    "",
    ...report.notes.map((note) => `- ${note}`),
    "",
    "| measure | median | min | max | unit |",
    "| --- | --- | --- | --- | --- |",
    ...rows,
    ...(targets.length > 0 ? ["", "| | target | figures |", "| --- | --- | --- |", ...targets] : []),
    `<!-- end ${name} -->`,
  ].join("\n");
}

/** The file with `section` in place of the benchmark's earlier one, or added in name order. */
export function withSection(file: string, name: string, section: string): string {
  const start = file.indexOf(`<!-- ${name} -->`);
  const endMarker = `<!-- end ${name} -->`;
  const end = file.indexOf(endMarker);
  if (start >= 0 && end > start) return `${file.slice(0, start)}${section}${file.slice(end + endMarker.length)}`;
  const sections = [...file.matchAll(/<!-- ([\w-]+) -->/g)].map((match) => ({ name: match[1] ?? "", at: match.index }));
  const next = sections.find((other) => other.name > name);
  if (next) return `${file.slice(0, next.at)}${section}\n\n${file.slice(next.at)}`;
  return `${file.trimEnd()}\n\n${section}\n`;
}

export function writeResultsSection(name: string, section: string): void {
  let file: string;
  try {
    file = readFileSync(RESULTS_FILE, "utf8");
  } catch {
    file = HEADER;
  }
  if (!file.includes("npm run bench -- --write")) file = HEADER; // a file written by hand starts afresh
  writeFileSync(RESULTS_FILE, withSection(file, name, section));
}
