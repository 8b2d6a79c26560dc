/** The agent for the commands that run one (run, pipeline, chat), and the terminal it answers on. */
import { createInterface } from "node:readline/promises";
import { terminalApprovalGate, type ApproveMode, type TerminalView } from "../adapters/terminal.js";
import { assertModelConfigured, loadConfig } from "../config.js";
import { createAgentConfig, type GlassboxAgent } from "../setup.js";
import type { ApprovalGate } from "../tools/types.js";
import { createCliLogger } from "./logging.js";

export async function startAgent(view: TerminalView, options: { toolModules: string[]; approve?: ApprovalGate; maxSteps?: number }): Promise<GlassboxAgent> {
  const config = loadConfig();
  // Before the database is opened: a run that cannot start leaves no new file behind.
  assertModelConfigured(config);
  return createAgentConfig(config, createCliLogger(view), options);
}

/**
 * The approval gate of --approve; `ask` prompts on stderr (stdout stays the answer, or the one JSON
 * object) when stdin is a terminal, and denies when it is not.
 */
export function approvalsFor(mode: ApproveMode): { approve: ApprovalGate; close(): void } {
  const prompt = mode === "ask" && process.stdin.isTTY ? createInterface({ input: process.stdin, output: process.stderr }) : undefined;
  return { approve: terminalApprovalGate(mode, prompt && ((question) => prompt.question(question))), close: () => prompt?.close() };
}

/** On a terminal, after the answer: which conversation this was, how to continue it and where its steps are. */
export function sessionNote(view: TerminalView, sessionId: string, runId?: string): void {
  if (!view.logForTerminal) return;
  const bare = sessionId.startsWith("cli:") ? sessionId.slice(4) : sessionId;
  const trace = runId ? `; its steps: glassbox trace ${runId}` : "";
  view.status.print(`${view.logStyle.dim(`session ${sessionId} (continue it with --session ${bare})${trace}`)}\n`);
}
