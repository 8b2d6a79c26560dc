/**
 * The terminal adapter: renders agent events on a terminal, asks approvals at a prompt, and runs an
 * interactive chat on the same loop the chat platforms use.
 */
import { createInterface } from "node:readline/promises";
import type { AgentEvent } from "../agent/events.js";
import { runAgent, type AgentConfig } from "../agent/loop.js";
import type { Message } from "../agent/types.js";
import type { ApprovalGate } from "../tools/types.js";
import { describeCall } from "./describe-call.js";

export type ApproveMode = "yes" | "no" | "ask";

/** yes and no decide without asking; ask prompts, and denies when there is no terminal to ask on. */
export function terminalApprovalGate(mode: ApproveMode, ask?: (question: string) => Promise<string>): ApprovalGate {
  return async (request) => {
    const decide = (approved: boolean, reason?: string) => ({ approved, by: "cli", argumentsHash: request.argumentsHash, ...(reason ? { reason } : {}) });
    if (mode === "yes") return decide(true);
    if (mode === "no") return decide(false, "denied by --approve no");
    if (!ask) return decide(false, "no terminal to ask for approval");
    const answer = await ask(`Allow ${describeCall(request.toolName, request.arguments)}? [y/N] `);
    return /^y(es)?$/i.test(answer.trim()) ? decide(true) : decide(false, "denied at the terminal");
  };
}

/** Answer text to `out` as it streams; tool activity and notes to `log`. */
export function createTerminalRenderer(out: NodeJS.WritableStream, log: NodeJS.WritableStream) {
  let printedAnswer = false;
  return {
    get printedAnswer() {
      return printedAnswer;
    },
    render(event: AgentEvent): void {
      if (event.type === "model_delta") {
        out.write(event.text);
        printedAnswer = true;
      } else if (event.type === "tool_start") {
        log.write(`· calling ${describeCall(event.name, event.arguments)}\n`);
      } else if (event.type === "tool_end") {
        const { envelope, name, durationMs } = event.record;
        const outcome = envelope.status === "success" ? "ok" : `${envelope.error.type}: ${envelope.error.message}`;
        log.write(`  ${name} ${outcome} (${Math.round(durationMs)} ms)\n`);
      } else if (event.type === "note") {
        log.write(`· note to the model: ${event.text}\n`);
      }
    },
  };
}

/**
 * A chat in the terminal: each line is a turn; the conversation is kept until /reset (in the
 * agent's memory when it has one, else in this process).
 */
export async function startTerminalChat(
  agent: AgentConfig,
  io: { input: NodeJS.ReadableStream; output: NodeJS.WritableStream; sessionId: string; reset?: () => void },
): Promise<void> {
  const terminal = createInterface({ input: io.input, output: io.output, terminal: Boolean((io.input as { isTTY?: boolean }).isTTY) });
  // One reader for turns and approval answers alike; it buffers lines that arrive early (pasted or piped).
  const lines = terminal[Symbol.asyncIterator]();
  const readLine = async (prompt: string) => {
    io.output.write(prompt);
    const next = await lines.next();
    return next.done ? undefined : next.value;
  };
  const gate = terminalApprovalGate("ask", async (question) => (await readLine(question)) ?? "");
  let history: Message[] = [];
  let running: AbortController | undefined;
  terminal.on("SIGINT", () => (running ? running.abort() : terminal.close()));
  io.output.write("glassbox: type a message, /reset to start over, /exit to quit.\n");

  for (let line = await readLine("> "); line !== undefined && line.trim() !== "/exit"; line = await readLine("> ")) {
    const input = line.trim();
    if (input === "/reset") {
      history = [];
      io.reset?.();
      io.output.write("(new conversation)\n");
      continue;
    }
    if (!input) continue;
    running = new AbortController();
    const renderer = createTerminalRenderer(io.output, io.output);
    const added: Message[] = [];
    const result = await runAgent(
      { ...agent, approve: gate },
      {
        input,
        history,
        sessionId: io.sessionId,
        userId: "terminal",
        signal: running.signal,
        onEvent: (event) => {
          renderer.render(event);
          if (event.type === "message" && event.message.role !== "system") added.push(event.message);
        },
      },
    );
    running = undefined;
    if (!renderer.printedAnswer || result.stopReason !== "final") io.output.write(result.output);
    io.output.write("\n");
    // Later turns see this one, without the guards' notes; a failed turn is forgotten.
    if (result.stopReason !== "error") history = [...history, ...added];
  }
  terminal.close();
}
