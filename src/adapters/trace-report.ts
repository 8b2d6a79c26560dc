/** Traces as text for a terminal: a run's timeline step by step, and usage totals. */
import { feedbackLine, type Feedback } from "../agent/feedback.js";
import type { RunTrace, StepTrace, UsageTotal } from "../agent/trace.js";
import type { ModelExchange } from "../agent/types.js";
import type { BudgetStanding } from "../conversations/channel-budget.js";
import { describeCall } from "./describe-call.js";
import { count, formatNumber as number, formatTable } from "./terminal/table.js";
import { PLAIN, type Style } from "./terminal/style.js";
export const dollars = (cost: number | null) => (cost === null ? "cost unknown" : `$${cost.toFixed(4)}`);

/** Where a sub-agent's runs and their steps come from, to nest them under the calls that started them. */
export interface NestedRuns {
  childrenOf(runId: string): RunTrace[];
  steps(runId: string): StepTrace[];
}

/** What the run read of its thread before the mention: a line saying how much, then each message (cut). */
function threadLines(run: RunTrace): string[] {
  const read = run.threadContext;
  if (!read) return [];
  const leftOut = read.leftOut > 0 ? `, ${count(read.leftOut, "older message")} left out` : "";
  const problem = read.problem ? ` (${oneLine(read.problem, 160)})` : "";
  return [
    `  read from the ${read.channel ? "channel" : "thread"}: ${count(read.messages.length, "message")}${leftOut}${problem}`,
    ...read.messages.map(
      (message) => `    ${message.author}${message.bot ? " (bot)" : ""}: ${oneLine(message.text, 160)}`,
    ),
  ];
}

/** What a repair or refusal of the model layer sent and got back, a line each. */
function exchangeLines(exchange: ModelExchange | undefined): string[] {
  if (!exchange) return [];
  const line = (label: string, text: string | undefined) =>
    text === undefined ? [] : [`      ${label}: ${oneLine(text, 300)}`];
  return [...line("sent", exchange.sent), ...line("came back", exchange.received), ...line("read as", exchange.readAs)];
}

/** A tool's stack as the trace keeps it: its first frames, one a line. */
const STACK_LINES = 10;
function stackLines(stack: string): string[] {
  const frames = stack.split("\n");
  const more = frames.length > STACK_LINES ? [`        … ${count(frames.length - STACK_LINES, "more frame")}`] : [];
  return [...frames.slice(0, STACK_LINES).map((frame) => `        ${oneLine(frame, 300)}`), ...more];
}

export function formatRunTimeline(run: RunTrace, steps: StepTrace[], nested?: NestedRuns, indent = ""): string {
  const children = nested?.childrenOf(run.runId) ?? [];
  const lines = [
    `Run ${run.runId} (${run.status}) by ${run.userId} at ${run.startedAt} in ${run.sessionId}`,
    `  asked: ${oneLine(run.input, 200)}`,
    ...(run.configuration ? [`  settings: ${run.configuration}`] : []),
    ...(run.scheduleId ? [`  made by schedule ${run.scheduleId}`] : []),
    ...threadLines(run),
  ];
  for (const step of steps) {
    const context = `${count(step.contextMessages, "message")}${step.contextTokens === null ? "" : ` (~${count(step.contextTokens, "token")})`}`;
    lines.push(
      `  step ${step.step}  ${step.model ?? "?"}  sent ${context}  prompt ${number(step.promptTokens)} / completion ${number(step.completionTokens)} tokens  ${Math.round(step.latencyMs)} ms  ${dollars(step.cost)}`,
    );
    if (step.reasoning) lines.push(`    ${thinkingLine(step)}`);
    for (const note of step.modelNotes) {
      lines.push(`    model layer: ${oneLine(note, 200)}`);
      lines.push(...exchangeLines(step.modelExchanges?.find((exchange) => exchange.note === note)));
    }
    if (step.content) lines.push(`    said: ${oneLine(step.content, 200)}`);
    for (const call of step.toolCalls) {
      const outcome =
        call.envelope.status === "success"
          ? "success"
          : `${call.envelope.error.type}: ${oneLine(call.envelope.error.message, 120)}`;
      lines.push(`    → ${describeCall(call.name, call.arguments)}  ${outcome}  ${Math.round(call.durationMs)} ms`);
      if (call.repairs.length) lines.push(`      repaired: ${call.repairs.join("; ")}`);
      if (call.errorStack) lines.push("      thrown at:", ...stackLines(call.errorStack));
      if (call.approval) lines.push(`      ${call.approval.approved ? "approved" : "denied"} by ${call.approval.by}`);
      for (const child of children.filter((candidate) => candidate.parentToolCallId === call.id)) {
        lines.push(
          `      sub-agent ${formatRunTimeline(child, nested?.steps(child.runId) ?? [], nested, "      ").trimStart()}`,
        );
      }
    }
    for (const note of step.notes) lines.push(`    note: ${oneLine(note, 200)}`);
  }
  if (run.output) lines.push(`  answer: ${oneLine(run.output, 300)}`);
  lines.push(
    `  total: ${count(run.steps, "step")}, prompt ${number(run.promptTokens)} / completion ${number(run.completionTokens)} tokens, ${dollars(run.cost)}`,
  );
  // A sub-agent's timeline is several lines: each one is indented, at every depth.
  return lines
    .join("\n")
    .split("\n")
    .map((line) => indent + line)
    .join("\n");
}

/** What people said about a run's answer, a line each (their latest 👍 or 👎, when, and why); nothing when nobody rated it. */
export function formatFeedback(feedback: Feedback[]): string {
  if (feedback.length === 0) return "";
  const up = feedback.filter((one) => one.rating === "up").length;
  const lines = [
    `  feedback: ${up} 👍, ${feedback.length - up} 👎`,
    ...feedback.map((one) => `    ${oneLine(feedbackLine(one), 300)} (${one.source}, ${one.at})`),
  ];
  return lines.join("\n");
}

/** The 👍 and 👎 people gave, in one line. */
export function formatFeedbackCounts(counts: { up: number; down: number }, style: Style = PLAIN): string {
  return `${style.bold("Feedback")}: ${number(counts.up)} 👍 · ${number(counts.down)} 👎`;
}

/** Usage totals as a table under a title: runs, prompt and completion tokens, and cost per key. */
export function formatUsage(title: string, keyHeader: string, totals: UsageTotal[], style: Style = PLAIN): string {
  if (totals.length === 0) return `${title}: nothing yet`;
  const columns = [
    { header: keyHeader },
    { header: "RUNS", align: "right" as const },
    { header: "PROMPT TOKENS", align: "right" as const },
    { header: "COMPLETION TOKENS", align: "right" as const },
    { header: "COST", align: "right" as const },
  ];
  const rows = totals.map((total) => [
    total.key,
    number(total.runs),
    number(total.promptTokens),
    number(total.completionTokens),
    total.cost === null ? "unknown" : dollars(total.cost),
  ]);
  return `${style.bold(title)}\n${formatTable(columns, rows, { indent: "  ", style })}`;
}

/** The channel settings' budgets as they stand (budgetStandings): whose, used, limit, share. */
export function formatBudgets(readings: BudgetStanding[], style: Style = PLAIN): string {
  const title = "Budgets this month (UTC), from GLASSBOX_CHANNELS";
  if (readings.length === 0) return `${title}: none spent against yet`;
  const columns = [
    { header: "BUDGET" },
    { header: "FOR" },
    { header: "USED", align: "right" as const },
    { header: "LIMIT", align: "right" as const },
    { header: "SHARE", align: "right" as const },
  ];
  const amount = (reading: BudgetStanding, value: number) =>
    reading.unit === "cost" ? `$${value.toFixed(2)}` : `${number(Math.round(value))} tokens`;
  const rows = readings.map((reading) => [
    `${reading.scope} ${reading.period}`,
    reading.of,
    amount(reading, reading.used),
    amount(reading, reading.limit),
    reading.limit > 0 ? `${Math.floor((reading.used / reading.limit) * 100)}%` : "-",
  ]);
  return `${style.bold(title)}\n${formatTable(columns, rows, { indent: "  ", style })}`;
}

/** The reasoning's size, and its first line as a glimpse (the whole is in --json and on the trace page). */
function thinkingLine(step: StepTrace): string {
  const kept = step.reasoning?.length ?? 0;
  const size = step.reasoningCutChars
    ? `${count(kept + step.reasoningCutChars, "char")}, the first ${number(kept)} kept`
    : count(kept, "char");
  const [firstLine = "", ...more] = (step.reasoning ?? "").trim().split("\n");
  return `thinking (${size}): ${oneLine(firstLine, 120)}${more.length ? " …" : ""}`;
}

function oneLine(text: string, max: number): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}
