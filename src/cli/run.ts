/** `glassbox run "<task>"`: one task, the answer streamed to stdout (or one JSON object with --json). */
import { CLI_USER_ID, createTerminalRenderer, terminalView } from "../adapters/terminal.js";
import { runAgent, type RunResult } from "../agent/loop.js";
import { approvalsFor, sessionNote, startAgent } from "./agent.js";
import { approveModeOf, sessionOf, type CommandInput } from "./command.js";
import { UsageError } from "./help.js";
import { glassboxCommand } from "./invocation.js";
import { traceUrl } from "../adapters/trace-link.js";

const EXIT_CODES: Record<RunResult["stopReason"], number> = {
  final: 0,
  max_steps: 0,
  awaiting_approval: 0,
  cancelled: 130,
  error: 1,
};

export default async function run({ positionals, options }: CommandInput): Promise<number> {
  const task = positionals.join(" ").trim();
  if (!task) throw new UsageError(`Give the task in quotes: ${glassboxCommand()} run "what is 2+2?"`);
  const approveMode = approveModeOf(options.approve);
  const maxSteps = options["max-steps"] === undefined ? undefined : Number(options["max-steps"]);
  if (maxSteps !== undefined && !(Number.isInteger(maxSteps) && maxSteps > 0))
    throw new UsageError("--max-steps takes a whole number above 0.");

  const view = terminalView(process.stdout, process.stderr);
  const controller = new AbortController();
  process.once("SIGINT", () => controller.abort());
  const approvals = approvalsFor(approveMode, () => controller.abort());
  const agent = await startAgent(view, { toolModules: options.tools, approve: approvals.approve, maxSteps }).catch(
    (error: unknown) => {
      approvals.close();
      throw error;
    },
  );
  try {
    const renderer = createTerminalRenderer(view);
    const result = await runAgent(agent, {
      input: task,
      sessionId: sessionOf(options),
      userId: CLI_USER_ID,
      signal: controller.signal,
      onEvent: options.json ? undefined : (event) => renderer.render(event),
    });
    const link = agent.publicUrl ? traceUrl(agent.publicUrl, result.sessionId, result.runId) : undefined;
    if (options.json) {
      const { runId, sessionId, output, stopReason, steps, usage, toolCalls, error } = result;
      const extra = { ...(error ? { error } : {}), ...(link ? { traceUrl: link } : {}) };
      process.stdout.write(
        `${JSON.stringify({ runId, sessionId, output, stopReason, steps, usage, toolCalls, ...extra })}\n`,
      );
    } else {
      renderer.finish(result);
      sessionNote(view, ["run"], result.sessionId, result.runId, link);
    }
    return EXIT_CODES[result.stopReason];
  } finally {
    approvals.close();
    await agent.close();
  }
}
