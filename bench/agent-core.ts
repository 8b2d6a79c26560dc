/**
 * The agent core against the scripted model server and the real openai SDK.
 *
 * 1. Per step: a 50-step run (49 calls to a no-op tool, then an answer) with no model latency,
 *    through glassbox and through the textbook loop in naive-loop.ts (the SDK as it comes, with
 *    Node's fetch), alternating which goes first in each round. glassbox hands the SDK its own
 *    transport (src/undici-fetch.ts), so the naive loop also runs once more over that same
 *    transport: glassbox minus that run is what the engine itself adds to the same round trip.
 * 2. Parallel tools: one step with 3 calls to a 300 ms tool; the tool phase should take ~300 ms.
 */
import OpenAI from "openai";
import { createOpenAIModel } from "../src/agent/llm/index.js";
import { undiciFetch } from "../src/undici-fetch.js";
import { DEFAULT_SYSTEM_PROMPT, runAgent, type RunResult } from "../src/agent/loop.js";
import type { AgentEvent } from "../src/agent/events.js";
import type { ChatModel } from "../src/agent/types.js";
import { createToolRegistry, type ToolRegistry } from "../src/tools/registry.js";
import type { ToolDefinition } from "../src/tools/types.js";
import {
  startScriptedModelServer,
  type ScriptedModelServer,
  type ScriptedReply,
} from "../src/testing/scripted-model-server.js";
import { collectGarbage, statsOf, sig3, type Benchmark, type Row, type Stats, type Target } from "./measure.js";
import { runNaiveLoop, type NaiveTool } from "./naive-loop.js";

const STEPS = 50;
const WARMUP_ROUNDS = 10;
/** Median of 5 by default; BENCH_ROUNDS=15 steadies the figures on a busy machine. */
const MEASURED_ROUNDS = Number(process.env.BENCH_ROUNDS) || 5;
const TOOL_MS = 300;
const PARALLEL_CALLS = 3;
const MODEL = "scripted-model";
const INPUT = "Call noop until you are done.";
const FINAL_ANSWER = "Done: noop was called 49 times.";

const TARGET_OVERHEAD_MS = 1;
/** Medians of two equal loops still differ by noise; beyond this the naive loop is faster. */
const NOISE_ALLOWANCE = 0.05;
const TARGET_TOOL_PHASE_RATIO = 1.15;

const benchmark: Benchmark = {
  name: "agent-core",
  title: "engine overhead per step and parallel tool calls",
  async run() {
    const server = await startScriptedModelServer();
    try {
      const overhead = await measureOverhead(server);
      const parallel = await measureParallelTools(server);
      return {
        notes: [
          `overhead: ${WARMUP_ROUNDS} warm-up + ${MEASURED_ROUNDS} measured rounds, glassbox and naive alternating first (ABAB)`,
          `parallel tools: 1 warm-up + ${MEASURED_ROUNDS} measured runs; median, min and max over the measured runs`,
        ],
        rows: [...overhead.rows, ...parallel.rows],
        targets: [...overhead.targets, ...parallel.targets],
        data: { engineOverhead: overhead.data, parallelTools: parallel.data },
      };
    } finally {
      await server.close();
    }
  },
};
export default benchmark;

// ---- 1. engine overhead per step -------------------------------------------------------------

const noopParameters = {
  type: "object",
  properties: { i: { type: "integer" } },
  required: ["i"],
  additionalProperties: false,
};
// A different result every call, so the unchanged-result guard has nothing to say.
const noopHandler = (args: Record<string, unknown>) => ({ i: args.i, ok: true });
const noopTool: ToolDefinition = {
  name: "noop",
  description: "Does nothing and returns its argument.",
  parameters: noopParameters,
  handler: noopHandler,
};

/** 49 calls with a different `i` each (so the repeat guard never fires), then the answer. */
function overheadScript(): ScriptedReply[] {
  const calls = Array.from(
    { length: STEPS - 1 },
    (_, i): ScriptedReply => ({ toolCalls: [{ name: "noop", arguments: JSON.stringify({ i }) }] }),
  );
  return [...calls, { content: FINAL_ANSWER }];
}

async function measureOverhead(server: ScriptedModelServer) {
  const options = { model: MODEL, baseURL: server.url, apiKey: "not-needed" };
  const glassbox = createOpenAIModel({ ...options, stream: false });
  const glassboxStreaming = createOpenAIModel({ ...options, stream: true });
  // createOpenAIModel's client options, with the SDK's default fetch (the textbook loop) and with ours.
  const clientOptions = { baseURL: server.url, apiKey: "not-needed", timeout: 60_000, maxRetries: 3 };
  const textbookClient = new OpenAI(clientOptions);
  const sameTransportClient = new OpenAI({ ...clientOptions, fetch: undiciFetch });
  const tools = createToolRegistry([noopTool]);
  const naiveTools: Record<string, NaiveTool> = {
    noop: { description: noopTool.description, parameters: noopParameters, handler: noopHandler },
  };

  type Sample = { perStepMs: number; outsideModelPerStepMs: number };
  const runGlassbox = (model: ChatModel) => async (): Promise<Sample> => {
    const { result, wallMs, modelMs } = await timedGlassboxRun(model, tools);
    checkGlassboxRun(result);
    return { perStepMs: wallMs / result.steps, outsideModelPerStepMs: (wallMs - modelMs) / result.steps };
  };
  const runNaive = (client: OpenAI) => async (): Promise<Sample> => {
    const started = performance.now();
    const result = await runNaiveLoop(
      { client, model: MODEL, systemPrompt: DEFAULT_SYSTEM_PROMPT, tools: naiveTools },
      INPUT,
    );
    const wallMs = performance.now() - started;
    if (result.steps !== STEPS || result.output !== FINAL_ANSWER)
      throw new Error(`the naive loop ran ${result.steps} steps and answered '${result.output}'`);
    return { perStepMs: wallMs / result.steps, outsideModelPerStepMs: (wallMs - result.modelMs) / result.steps };
  };
  const variants = {
    glassbox: runGlassbox(glassbox),
    naive: runNaive(textbookClient),
    naiveSameTransport: runNaive(sameTransportClient),
    streaming: runGlassbox(glassboxStreaming),
  };

  // ABAB: glassbox and the naive loops take turns going first; streaming is an extra, always last.
  const samples = {
    glassbox: [] as Sample[],
    naive: [] as Sample[],
    naiveSameTransport: [] as Sample[],
    streaming: [] as Sample[],
  };
  for (let round = 0; round < WARMUP_ROUNDS + MEASURED_ROUNDS; round++) {
    const order =
      round % 2 === 0
        ? (["glassbox", "naive", "naiveSameTransport", "streaming"] as const)
        : (["naiveSameTransport", "naive", "glassbox", "streaming"] as const);
    for (const variant of order) {
      server.setScript(overheadScript());
      collectGarbage();
      const sample = await variants[variant]();
      server.requests.length = 0; // the server keeps every request body; do not let them pile up
      if (round >= WARMUP_ROUNDS) samples[variant].push(sample);
    }
  }

  const perStep = (list: Sample[]) => statsOf(list.map((sample) => sample.perStepMs));
  const outside = (list: Sample[]) => statsOf(list.map((sample) => sample.outsideModelPerStepMs));
  const glassboxPerStep = perStep(samples.glassbox);
  const naivePerStep = perStep(samples.naive);
  const sameTransportPerStep = perStep(samples.naiveSameTransport);
  const streamingPerStep = perStep(samples.streaming);
  // Medians against medians: the ABAB order already spreads a slow moment of the machine over both.
  const ratio = glassboxPerStep.median / naivePerStep.median;
  const overhead = glassboxPerStep.median - sameTransportPerStep.median;
  const glassboxOutside = outside(samples.glassbox);
  const naiveOutside = outside(samples.naive);

  const rows: Row[] = [
    { label: `glassbox per step (non-streaming, ${STEPS} steps)`, value: glassboxPerStep, unit: "ms" },
    { label: "naive loop per step (SDK's default fetch)", value: naivePerStep, unit: "ms" },
    { label: "naive loop per step (glassbox's transport)", value: sameTransportPerStep, unit: "ms" },
    { label: "glassbox per step (streaming)", value: streamingPerStep, unit: "ms" },
    { label: "glassbox / naive", value: ratio, unit: "x" },
    {
      label: "transport: naive over glassbox's / over default fetch",
      value: sameTransportPerStep.median / naivePerStep.median,
      unit: "x",
    },
    { label: "engine overhead per step (glassbox - naive, same transport)", value: overhead, unit: "ms" },
    { label: "glassbox outside the model call, per step", value: glassboxOutside, unit: "ms" },
    { label: "naive outside the model call, per step", value: naiveOutside, unit: "ms" },
    { label: "streaming / non-streaming glassbox", value: streamingPerStep.median / glassboxPerStep.median, unit: "x" },
  ];
  const targets: Target[] = [
    {
      label: `engine overhead <= ${TARGET_OVERHEAD_MS} ms per step`,
      pass: overhead <= TARGET_OVERHEAD_MS,
      detail: `${sig3(overhead)} ms (glassbox - naive over the same transport); ${sig3(glassboxOutside.median)} ms outside the model call`,
    },
    {
      label: "glassbox per step <= naive loop per step",
      pass: ratio <= 1 + NOISE_ALLOWANCE,
      detail: `${sig3(glassboxPerStep.median)} vs ${sig3(naivePerStep.median)} ms, ratio ${sig3(ratio)} (noise allowance ${NOISE_ALLOWANCE * 100}%)`,
    },
  ];
  const data = {
    steps: STEPS,
    warmupRounds: WARMUP_ROUNDS,
    measuredRounds: MEASURED_ROUNDS,
    glassboxPerStepMs: glassboxPerStep,
    naivePerStepMs: naivePerStep,
    naiveSameTransportPerStepMs: sameTransportPerStep,
    glassboxStreamingPerStepMs: streamingPerStep,
    ratioGlassboxToNaive: ratio,
    overheadPerStepMs: overhead,
    glassboxOutsideModelPerStepMs: glassboxOutside,
    naiveOutsideModelPerStepMs: naiveOutside,
  };
  return { rows, targets, data };
}

/** A glassbox run, timed from the outside, with the model's share summed from its events. */
async function timedGlassboxRun(model: ChatModel, tools: ToolRegistry) {
  let modelMs = 0;
  const notes: string[] = [];
  const onEvent = (event: AgentEvent) => {
    if (event.type === "model_end") modelMs += event.latencyMs;
    if (event.type === "note") notes.push(event.text);
  };
  const started = performance.now();
  const result = await runAgent(
    { model, tools, maxSteps: STEPS + 10, systemPrompt: DEFAULT_SYSTEM_PROMPT },
    { input: INPUT, onEvent },
  );
  const wallMs = performance.now() - started;
  if (notes.length > 0) throw new Error(`a guard fired during the overhead run: ${notes[0]}`);
  return { result, wallMs, modelMs };
}

function checkGlassboxRun(result: RunResult): void {
  const failed = result.toolCalls.filter((call) => call.status !== "success");
  if (
    result.stopReason !== "final" ||
    result.steps !== STEPS ||
    result.output !== FINAL_ANSWER ||
    failed.length > 0 ||
    result.toolCalls.length !== STEPS - 1
  ) {
    throw new Error(`the glassbox run did not go as scripted: ${JSON.stringify({ ...result, toolCalls: failed })}`);
  }
}

// ---- 2. parallel tool calls ------------------------------------------------------------------

const sleepTool: ToolDefinition = {
  name: "slow",
  description: `Waits ${TOOL_MS} ms.`,
  parameters: noopParameters,
  handler: async (args) => {
    await new Promise((resolve) => setTimeout(resolve, TOOL_MS));
    return { i: args.i };
  },
};

async function measureParallelTools(server: ScriptedModelServer) {
  const model = createOpenAIModel({ model: MODEL, baseURL: server.url, apiKey: "not-needed", stream: false });
  const tools = createToolRegistry([sleepTool]);
  // Different arguments per call: identical calls of one response would run only once.
  const script = (): ScriptedReply[] => [
    {
      toolCalls: Array.from({ length: PARALLEL_CALLS }, (_, i) => ({ name: "slow", arguments: JSON.stringify({ i }) })),
    },
    { content: "All three waited." },
  ];

  const toolPhase: number[] = [];
  const wholeStep: number[] = [];
  for (let round = 0; round < 1 + MEASURED_ROUNDS; round++) {
    server.setScript(script());
    collectGarbage();
    const times: Array<{ type: AgentEvent["type"]; step?: number; at: number }> = [];
    const onEvent = (event: AgentEvent) =>
      times.push({ type: event.type, step: "step" in event ? event.step : undefined, at: performance.now() });
    const result = await runAgent({ model, tools }, { input: "Wait three times at once.", onEvent });
    server.requests.length = 0;
    if (
      result.stopReason !== "final" ||
      result.toolCalls.filter((call) => call.status === "success").length !== PARALLEL_CALLS
    ) {
      throw new Error(`the parallel-tools run did not go as scripted: ${JSON.stringify(result)}`);
    }
    const first = (type: AgentEvent["type"], step?: number) =>
      times.find((time) => time.type === type && (step === undefined || time.step === step))?.at;
    const last = (type: AgentEvent["type"]) => times.findLast((time) => time.type === type)?.at;
    const [toolStart, toolEnd, stepStart, nextStep] = [
      first("tool_start"),
      last("tool_end"),
      first("model_start", 1),
      first("model_start", 2),
    ];
    if (toolStart === undefined || toolEnd === undefined || stepStart === undefined || nextStep === undefined)
      throw new Error("events of the parallel step are missing");
    if (round === 0) continue; // warm-up
    toolPhase.push(toolEnd - toolStart);
    wholeStep.push(nextStep - stepStart);
  }

  const phase = statsOf(toolPhase);
  const step = statsOf(wholeStep);
  const limit = TARGET_TOOL_PHASE_RATIO * TOOL_MS;
  const rows: Row[] = [
    { label: `tool phase, ${PARALLEL_CALLS} parallel ${TOOL_MS} ms calls`, value: phase, unit: "ms" },
    { label: "whole step (model call to next model call)", value: step, unit: "ms" },
    { label: `tool phase / ${TOOL_MS} ms (one call)`, value: phase.median / TOOL_MS, unit: "x" },
    {
      label: `tool phase / ${PARALLEL_CALLS * TOOL_MS} ms (sequential)`,
      value: phase.median / (PARALLEL_CALLS * TOOL_MS),
      unit: "x",
    },
  ];
  const targets: Target[] = [
    {
      label: `parallel tool phase <= ${TARGET_TOOL_PHASE_RATIO} x ${TOOL_MS} ms`,
      pass: phase.median <= limit,
      detail: `${sig3(phase.median)} ms (${sig3(phase.median / TOOL_MS)} x; limit ${sig3(limit)} ms)`,
    },
  ];
  const data = {
    calls: PARALLEL_CALLS,
    toolMs: TOOL_MS,
    measuredRounds: MEASURED_ROUNDS,
    toolPhaseMs: phase,
    wholeStepMs: step,
  } satisfies Record<string, number | Stats>;
  return { rows, targets, data };
}
