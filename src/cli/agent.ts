/** The agent for the commands that run one (run, pipeline, chat), and the terminal it answers on. */
import { createInterface } from "node:readline/promises";
import { terminalApprovalGate, type ApproveMode, type TerminalView } from "../adapters/terminal.js";
import { assertModelConfigured, loadConfig } from "../config.js";
import { createAgentConfig, type GlassboxAgent } from "../setup.js";
import type { ApprovalGate } from "../tools/types.js";
import { pasteable } from "./invocation.js";
import { createCliLogger } from "./logging.js";

/** The agent, with where its runs' traces are read (GLASSBOX_PUBLIC_URL), when that is set. */
export type CliAgent = GlassboxAgent & { publicUrl?: string };

export async function startAgent(
  view: TerminalView,
  options: { toolModules: string[]; approve?: ApprovalGate; maxSteps?: number },
): Promise<CliAgent> {
  const config = loadConfig();
  // Before the database is opened: a run that cannot start leaves no new file behind.
  assertModelConfigured(config);
  const agent = await createAgentConfig(config, createCliLogger(view), options);
  return Object.assign(agent, config.publicUrl ? { publicUrl: config.publicUrl } : {});
}

/**
 * The approval gate of --approve; `ask` prompts on stderr (stdout stays the answer, or the one JSON
 * object) when stdin is a terminal, and denies when it is not. The prompt reads the terminal from
 * the start, so a line typed before a question is not taken as its answer; holding the terminal,
 * it receives Ctrl-C, which cancels the run (`interrupt`) and denies a question being asked.
 */
export function approvalsFor(mode: ApproveMode, interrupt: () => void): { approve: ApprovalGate; close(): void } {
  if (mode !== "ask" || !process.stdin.isTTY) return { approve: terminalApprovalGate(mode), close() {} };
  const prompt = createInterface({ input: process.stdin, output: process.stderr });
  let asking: AbortController | undefined;
  prompt.on("SIGINT", () => {
    asking?.abort();
    interrupt();
  });
  const ask = async (question: string) => {
    asking = new AbortController();
    try {
      return await prompt.question(question, { signal: asking.signal });
    } catch {
      return ""; // asked no more: Ctrl-C
    } finally {
      asking = undefined;
    }
  };
  return { approve: terminalApprovalGate(mode, ask), close: () => prompt.close() };
}

/**
 * On a terminal, after the answer: which conversation this was, how to continue it and where its
 * steps are, as whole commands (`command` is the words that started it: run, or pipeline <name>),
 * and its address in the trace viewer when GLASSBOX_PUBLIC_URL is set (`traceUrl`).
 */
export function sessionNote(
  view: TerminalView,
  command: string[],
  sessionId: string,
  runId?: string,
  traceUrl?: string,
): void {
  if (!view.logForTerminal) return;
  const bare = sessionId.startsWith("cli:") ? sessionId.slice(4) : sessionId;
  const lines = [
    `continue this conversation: ${pasteable(...command, "--session", bare)} "..."`,
    ...(runId ? [`see its steps: ${pasteable("trace", runId)}`] : []),
    ...(traceUrl ? [`or in the trace viewer: ${traceUrl}`] : []),
  ];
  view.status.print(lines.map((line) => `${view.logStyle.dim(line)}\n`).join(""));
}
