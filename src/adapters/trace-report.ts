/** Traces as text for a terminal: a run's timeline step by step, and usage totals. */
import type { RunTrace, StepTrace, UsageTotal } from "../agent/trace.js";
import { describeCall } from "./describe-call.js";

const number = (value: number) => value.toLocaleString("en-US");
export const dollars = (cost: number | null) => (cost === null ? "cost unknown" : `$${cost.toFixed(4)}`);

/** Where a sub-agent's runs and their steps come from, to nest them under the calls that started them. */
export interface NestedRuns {
  childrenOf(runId: string): RunTrace[];
  steps(runId: string): StepTrace[];
}

export function formatRunTimeline(run: RunTrace, steps: StepTrace[], nested?: NestedRuns, indent = ""): string {
  const children = nested?.childrenOf(run.runId) ?? [];
  const lines = [`Run ${run.runId} (${run.status}) by ${run.userId} at ${run.startedAt} in ${run.sessionId}`, `  asked: ${oneLine(run.input, 200)}`];
  for (const step of steps) {
    const context = `${step.contextMessages} messages${step.contextTokens === null ? "" : ` (~${number(step.contextTokens)} tokens)`}`;
    lines.push(
      `  step ${step.step}  ${step.model ?? "?"}  sent ${context}  prompt ${number(step.promptTokens)} / completion ${number(step.completionTokens)} tokens  ${Math.round(step.latencyMs)} ms  ${dollars(step.cost)}`,
    );
    if (step.reasoning) lines.push(`    ${thinkingLine(step)}`);
    for (const note of step.modelNotes) lines.push(`    model layer: ${oneLine(note, 200)}`);
    if (step.content) lines.push(`    said: ${oneLine(step.content, 200)}`);
    for (const call of step.toolCalls) {
      const outcome = call.envelope.status === "success" ? "success" : `${call.envelope.error.type}: ${oneLine(call.envelope.error.message, 120)}`;
      lines.push(`    → ${describeCall(call.name, call.arguments)}  ${outcome}  ${Math.round(call.durationMs)} ms`);
      if (call.repairs.length) lines.push(`      repaired: ${call.repairs.join("; ")}`);
      if (call.approval) lines.push(`      ${call.approval.approved ? "approved" : "denied"} by ${call.approval.by}`);
      for (const child of children.filter((candidate) => candidate.parentToolCallId === call.id)) {
        lines.push(`      sub-agent ${formatRunTimeline(child, nested?.steps(child.runId) ?? [], nested, "      ").trimStart()}`);
      }
    }
    for (const note of step.notes) lines.push(`    note: ${oneLine(note, 200)}`);
  }
  if (run.output) lines.push(`  answer: ${oneLine(run.output, 300)}`);
  lines.push(`  total: ${run.steps} steps, prompt ${number(run.promptTokens)} / completion ${number(run.completionTokens)} tokens, ${dollars(run.cost)}`);
  return lines.map((line) => indent + line).join("\n");
}

export function formatUsage(title: string, totals: UsageTotal[]): string {
  if (totals.length === 0) return `${title}: nothing yet`;
  const rows = totals.map((total) => `  ${total.key.padEnd(36)} ${String(total.runs).padStart(6)} runs ${number(total.promptTokens).padStart(12)} prompt ${number(total.completionTokens).padStart(10)} completion  ${dollars(total.cost)}`);
  return [`${title}:`, ...rows].join("\n");
}

/** The reasoning's size, and its first line as a glimpse (the whole is in --json and on the trace page). */
function thinkingLine(step: StepTrace): string {
  const kept = step.reasoning?.length ?? 0;
  const size = step.reasoningCutChars ? `${number(kept + step.reasoningCutChars)} chars, the first ${number(kept)} kept` : `${number(kept)} chars`;
  const [firstLine = "", ...more] = (step.reasoning ?? "").trim().split("\n");
  return `thinking (${size}): ${oneLine(firstLine, 120)}${more.length ? " …" : ""}`;
}

function oneLine(text: string, max: number): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}
