/**
 * What every benchmark shares: the shape of a report, statistics over measured runs, a way to ask
 * for a garbage collection between runs, and the printed table.
 */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

/** One benchmark file's default export. */
export interface Benchmark {
  /** Also the results file name: bench/results/<name>.json. */
  name: string;
  title: string;
  run(): Promise<BenchmarkReport>;
}

export interface BenchmarkReport {
  /** How the figures were taken, printed under the title. */
  notes: string[];
  rows: Row[];
  targets: Target[];
  /** Everything worth keeping, written as JSON. */
  data: Record<string, unknown>;
}

/** A line of the table: a measured quantity (median, min, max) or a single derived value. */
export interface Row {
  label: string;
  value: Stats | number;
  unit: string;
}

export interface Target {
  label: string;
  pass: boolean;
  /** The figures the verdict rests on, in words. */
  detail: string;
}

export interface Stats {
  median: number;
  min: number;
  max: number;
  runs: number[];
}

export function statsOf(runs: number[]): Stats {
  if (runs.length === 0) throw new Error("statsOf needs at least one run");
  const sorted = [...runs].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  const median =
    sorted.length % 2 === 1
      ? (sorted[middle] as number)
      : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
  return { median, min: sorted[0] as number, max: sorted[sorted.length - 1] as number, runs };
}

/** Three significant digits ("1.00", "0.0123", "1230"), never an exponent. */
export function sig3(value: number): string {
  if (!Number.isFinite(value)) return String(value);
  return Math.abs(value) >= 1000 ? String(Number(value.toPrecision(3))) : value.toPrecision(3);
}

// A full collection between runs keeps one run's garbage from being paid for by the next.
setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as (() => void) | undefined;
export function collectGarbage(): void {
  gc?.();
}

export function formatReport(title: string, report: BenchmarkReport): string {
  const header = ["measure", "median", "min", "max", "unit"];
  const cells = report.rows.map((row) =>
    typeof row.value === "number"
      ? [row.label, sig3(row.value), "", "", row.unit]
      : [row.label, sig3(row.value.median), sig3(row.value.min), sig3(row.value.max), row.unit],
  );
  const widths = header.map((_, column) => Math.max(...[header, ...cells].map((line) => (line[column] ?? "").length)));
  const line = (values: string[]) =>
    "  " +
    values
      .map((value, column) =>
        column === 0 || column === 4 ? value.padEnd(widths[column] ?? 0) : value.padStart(widths[column] ?? 0),
      )
      .join("  ")
      .trimEnd();
  const targets = report.targets.map(
    (target) => `  ${target.pass ? "PASS" : "FAIL"}  ${target.label}: ${target.detail}`,
  );
  return [title, ...report.notes.map((note) => `  (${note})`), line(header), ...cells.map(line), "", ...targets].join(
    "\n",
  );
}
