/**
 * The terminal adapter: renders agent events on a terminal, asks approvals at a prompt, and runs an
 * interactive chat on the same loop the chat platforms use.
 */
import { createInterface } from "node:readline/promises";
import type { AgentEvent } from "../agent/events.js";
import { runAgent, type AgentConfig, type RunResult } from "../agent/loop.js";
import type { Message } from "../agent/types.js";
import type { ApprovalGate } from "../tools/types.js";
import { describeCall } from "./describe-call.js";
import { createMarkdownStream } from "./terminal/markdown.js";
import { createStatusLine, type StatusLine } from "./terminal/status-line.js";
import { createControlFilter, styleFor, withoutControls, type Style } from "./terminal/style.js";

export type ApproveMode = "yes" | "no" | "ask";

/** yes and no decide without asking; ask prompts, and denies when there is no terminal to ask on. */
export function terminalApprovalGate(mode: ApproveMode, ask?: (question: string) => Promise<string>): ApprovalGate {
  return async (request) => {
    const decide = (approved: boolean, reason?: string) => ({
      approved,
      by: "cli",
      argumentsHash: request.argumentsHash,
      ...(reason ? { reason } : {}),
    });
    if (mode === "yes") return decide(true);
    if (mode === "no") return decide(false, "denied by --approve no");
    if (!ask) return decide(false, "no terminal to ask for approval");
    const answer = await ask(`Allow ${describeCall(request.toolName, request.arguments)}? [y/N] `);
    return /^y(es)?$/i.test(answer.trim()) ? decide(true) : decide(false, "denied at the terminal");
  };
}

/** The user id of every run started at this machine's terminal: `glassbox run`, `pipeline` and `chat`. */
export const CLI_USER_ID = "cli";

/** Where and how a run is shown: the answer on `out`; tool activity, notes and the status line on `log`. */
export interface TerminalView {
  out: NodeJS.WritableStream;
  log: NodeJS.WritableStream;
  answerStyle: Style;
  logStyle: Style;
  /** Markdown rendered for reading, and escape codes from the model removed (a terminal); else the text as it came. */
  forTerminal: boolean;
  /** Whether `log` is a terminal, whose lines must be cleaned of escape codes too. */
  logForTerminal: boolean;
  status: StatusLine;
}

/** Colour, Markdown and a spinner where the streams are terminals; the plain text where they are pipes or files. */
export function terminalView(
  out: NodeJS.WritableStream & { isTTY?: boolean },
  log: NodeJS.WritableStream & { isTTY?: boolean },
  env: NodeJS.ProcessEnv = process.env,
): TerminalView {
  const logStyle = styleFor(log, env);
  return {
    out,
    log,
    answerStyle: styleFor(out, env),
    logStyle,
    forTerminal: out.isTTY === true,
    logForTerminal: log.isTTY === true,
    status: createStatusLine(log, logStyle, env),
  };
}

/**
 * Renders a run's events: the answer to `out` as it streams, tool activity to `log`, and while
 * nothing else moves a status line ("thinking…", "running get_order_status…"). finish() prints
 * what the stream did not show: the answer of a model that does not stream, or the error.
 */
export function createTerminalRenderer(view: TerminalView) {
  const { out, log, logStyle: style } = view;
  const markdown = view.forTerminal ? createMarkdownStream(view.answerStyle) : undefined;
  const running = new Map<string, string>(); // tool call id -> tool name
  let printedAnswer = false;
  let lineOpen = false; // the answer's last line is not ended yet
  let stepText = "";
  let lastStepText = "";
  const streamedText = view.forTerminal ? createControlFilter() : (text: string) => text;
  const answerText = (text: string) => (view.forTerminal ? withoutControls(text) : text);
  const logText = (text: string) => (view.logForTerminal ? withoutControls(text) : text);

  const writeAnswer = (text: string) => {
    if (!text) return;
    view.status.clear();
    out.write(text);
    lineOpen = !text.endsWith("\n");
  };
  const endAnswerLine = () => {
    if (lineOpen) out.write("\n");
    lineOpen = false;
  };
  const writeLog = (line: string) => {
    view.status.clear();
    endAnswerLine();
    log.write(`${line}\n`);
  };
  const waiting = () => {
    const names = [...new Set(running.values())];
    view.status.show(names.length ? `running ${names.join(", ")}…` : "thinking…");
  };

  return {
    get printedAnswer() {
      return printedAnswer;
    },
    render(event: AgentEvent): void {
      switch (event.type) {
        case "run_start":
        case "run_resumed":
        case "model_start":
          stepText = "";
          waiting();
          break;
        case "model_delta":
          printedAnswer = true;
          stepText += event.text;
          writeAnswer(markdown ? markdown.push(streamedText(event.text)) : event.text);
          break;
        case "model_end":
          writeAnswer(markdown?.end() ?? "");
          lastStepText = stepText;
          view.status.clear();
          break;
        case "tool_start":
          writeLog(style.dim(`· calling ${logText(describeCall(event.name, event.arguments))}`));
          running.set(event.toolCallId, event.name);
          waiting();
          break;
        case "tool_end": {
          const { envelope, name, durationMs, id } = event.record;
          // A call refused before it started (denied at the prompt just answered, invalid arguments) was never shown as calling.
          if (!running.delete(id)) break;
          const outcome =
            envelope.status === "success"
              ? style.green("ok")
              : style.red(`${envelope.error.type}: ${logText(envelope.error.message)}`);
          writeLog(`  ${name} ${outcome} ${style.dim(`(${Math.round(durationMs)} ms)`)}`);
          waiting();
          break;
        }
        case "approval_requested":
          view.status.clear();
          endAnswerLine();
          break;
        case "note":
          writeLog(style.dim(`· note to the model: ${logText(event.text)}`));
          break;
        case "run_end":
          view.status.clear();
          break;
      }
    },
    /** Ends the status line and the answer's last line. */
    close(): void {
      view.status.clear();
      endAnswerLine();
    },
    /** After the run: the answer if it was not streamed as it is, the error on `log`; the last line ended. */
    finish(result: Pick<RunResult, "output" | "stopReason">): void {
      view.status.clear();
      if (result.stopReason === "error") {
        writeLog(style.red(logText(result.output)));
        return;
      }
      const streamed = printedAnswer && lastStepText.trim() === result.output.trim();
      if (!streamed) {
        endAnswerLine();
        writeAnswer(markdown ? markdown.push(answerText(result.output)) + markdown.end() : result.output);
      }
      endAnswerLine();
    },
  };
}

/**
 * A chat in the terminal: each line is a turn; the conversation is kept until /reset (in the
 * agent's memory when it has one, else in this process).
 */
export async function startTerminalChat(
  agent: AgentConfig,
  io: {
    input: NodeJS.ReadableStream;
    output: NodeJS.WritableStream;
    sessionId: string;
    reset?: () => unknown;
    env?: NodeJS.ProcessEnv;
  },
): Promise<void> {
  const view = terminalView(io.output, io.output, io.env);
  const prompt = view.answerStyle.bold(view.answerStyle.cyan("> "));
  const terminal = createInterface({
    input: io.input,
    output: io.output,
    terminal: Boolean((io.input as { isTTY?: boolean }).isTTY),
  });
  // One reader for turns and approval answers alike; it buffers lines that arrive early (pasted or piped).
  const lines = terminal[Symbol.asyncIterator]();
  const readLine = async (question: string) => {
    // As readline's own prompt, so that redrawing a line being edited redraws the right one.
    terminal.setPrompt(question);
    terminal.prompt();
    const next = await lines.next();
    return next.done ? undefined : next.value;
  };
  const gate = terminalApprovalGate("ask", async (question) => (await readLine(question)) ?? "");
  let history: Message[] = [];
  let running: AbortController | undefined;
  terminal.on("SIGINT", () => (running ? running.abort() : terminal.close()));
  io.output.write(
    `glassbox: type a message, /reset to start over, /exit to quit. ${view.logStyle.dim(`(session ${io.sessionId})`)}\n`,
  );

  for (
    let line = await readLine(prompt);
    line !== undefined && line.trim() !== "/exit";
    line = await readLine(prompt)
  ) {
    const input = line.trim();
    if (input === "/reset") {
      history = [];
      await io.reset?.(); // before the next turn reads the conversation
      io.output.write("(new conversation)\n");
      continue;
    }
    if (!input) continue;
    running = new AbortController();
    const renderer = createTerminalRenderer(view);
    const added: Message[] = [];
    const result = await runAgent(
      { ...agent, approve: gate },
      {
        input,
        history,
        sessionId: io.sessionId,
        userId: CLI_USER_ID,
        signal: running.signal,
        onEvent: (event) => {
          renderer.render(event);
          if (event.type === "message" && event.message.role !== "system") added.push(event.message);
        },
      },
    );
    running = undefined;
    renderer.finish(result);
    // Later turns see this one, without the guards' notes; a failed turn is forgotten.
    if (result.stopReason !== "error") history = [...history, ...added];
  }
  terminal.close();
}
