/**
 * `npm run bench`: runs every benchmark below in order, prints one report and writes each
 * benchmark's figures to bench/results/<name>.json. A failed target is reported, not fatal: the
 * exit code is 0 unless a benchmark itself breaks.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { cpus, loadavg } from "node:os";
import type { Benchmark } from "./measure.js";
import { formatReport } from "./measure.js";
import { resultsSection, writeResultsSection } from "./results-file.js";

// Add a benchmark by adding its file here; each exports a Benchmark as default.
const BENCHMARKS = [
  "./agent-core.js",
  "./cli-startup.js",
  "./engine-store.js",
  "./memory.js",
  "./pipeline-cost.js",
  "./queue-takeover.js",
  "./scale.js",
  "./slack.js",
  "./tool-selection.js",
  "./token-counting.js",
];
// `npm run bench -- slack memory` runs only the benchmarks named; `--write` puts their figures in bench/RESULTS.md.
const write = process.argv.includes("--write");
const chosen = process.argv.slice(2).filter((argument) => argument !== "--write");
const selected =
  chosen.length === 0 ? BENCHMARKS : BENCHMARKS.filter((file) => chosen.some((name) => file === `./${name}.js`));
if (selected.length < chosen.length)
  throw new Error(
    `unknown benchmark name in: ${chosen.join(" ")}; the names are ${BENCHMARKS.map((file) => file.slice(2, -3)).join(", ")}`,
  );

const resultsDirectory = new URL("./results/", import.meta.url);
const machine = {
  node: process.version,
  cpu: cpus()[0]?.model ?? "unknown",
  cores: cpus().length,
  loadAverage: loadavg()[0] ?? 0,
};
// The load average says how busy the machine was: figures from a busy machine are noisier.
console.log(
  `glassbox bench — node ${machine.node}, ${machine.cpu}, ${machine.cores} cores, load average ${machine.loadAverage.toFixed(2)}\n`,
);

let failedTargets = 0;
let broken = 0;
for (const file of selected) {
  const benchmark = ((await import(file)) as { default: Benchmark }).default;
  const started = performance.now();
  try {
    const report = await benchmark.run();
    const seconds = (performance.now() - started) / 1000;
    console.log(`${formatReport(`${benchmark.name}: ${benchmark.title} (${seconds.toFixed(1)} s)`, report)}\n`);
    failedTargets += report.targets.filter((target) => !target.pass).length;
    await mkdir(resultsDirectory, { recursive: true });
    const json = {
      benchmark: benchmark.name,
      at: new Date().toISOString(),
      machine,
      targets: report.targets,
      ...report.data,
    };
    await writeFile(new URL(`${benchmark.name}.json`, resultsDirectory), `${JSON.stringify(json, null, 2)}\n`);
    if (write)
      writeResultsSection(
        benchmark.name,
        resultsSection(benchmark.name, benchmark.title, report, machine, new Date(), seconds),
      );
  } catch (error) {
    broken++;
    console.error(
      `${benchmark.name}: BROKEN — ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
  }
}

if (failedTargets > 0) console.log(`${failedTargets} target(s) FAILED (reported above; the bench still exits 0).`);
else if (broken === 0) console.log("All targets passed.");
if (broken > 0) process.exitCode = 1;
