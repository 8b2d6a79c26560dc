/** `glassbox pipeline <name> "<input>"`: the stages of a GLASSBOX_AGENTS pipeline, one after another. */
import { CLI_USER_ID, createTerminalRenderer, terminalView } from "../adapters/terminal.js";
import { answeredBy } from "../agent/run.js";
import { approvalsFor, sessionNote, startAgent } from "./agent.js";
import { approveModeOf, sessionOf, type CommandInput } from "./command.js";
import { UsageError } from "./help.js";
import { glassboxCommand } from "./invocation.js";
import { traceUrl } from "../adapters/trace-link.js";

export default async function pipeline({ positionals, options }: CommandInput): Promise<number> {
  const [name, ...words] = positionals;
  const input = words.join(" ").trim();
  if (!name || !input)
    throw new UsageError(
      `Name the pipeline and give its input: ${glassboxCommand()} pipeline <name> "<input>" (pipelines come from GLASSBOX_AGENTS).`,
    );
  const controller = new AbortController();
  process.once("SIGINT", () => controller.abort());
  const approvals = approvalsFor(approveModeOf(options.approve), () => controller.abort());
  // The stages' own answers are progress, so they go to stderr with the tool activity; stdout gets the last.
  const progress = terminalView(process.stderr, process.stderr);
  const agent = await startAgent(progress, { toolModules: options.tools, approve: approvals.approve }).catch(
    (error: unknown) => {
      approvals.close();
      throw error;
    },
  );
  try {
    const renderer = createTerminalRenderer(progress);
    const sessionId = sessionOf(options);
    const ran = await agent.pipelines.run(name, input, {
      sessionId,
      userId: CLI_USER_ID,
      signal: controller.signal,
      onEvent: options.json ? undefined : (event) => renderer.render(event),
    });
    if (!ran)
      throw new UsageError(
        `There is no pipeline '${name}'; the pipelines are: ${agent.pipelines.names().join(", ") || "none (set GLASSBOX_AGENTS)"}.`,
      );
    const stages = ran.stages.map(({ agent: stage, result }) => ({
      agent: stage,
      runId: result.runId,
      output: result.output,
      stopReason: result.stopReason,
      steps: result.steps,
      usage: result.usage,
    }));
    if (options.json) {
      process.stdout.write(`${JSON.stringify({ sessionId, output: ran.output, stages })}\n`);
    } else {
      renderer.close();
      createTerminalRenderer(terminalView(process.stdout, process.stderr)).finish({
        output: ran.output,
        stopReason: "final",
      });
      const link = agent.publicUrl ? traceUrl(agent.publicUrl, sessionId) : undefined;
      sessionNote(progress, ["pipeline", name], sessionId, undefined, link);
    }
    return stages.every((stage) => answeredBy(stage.stopReason)) ? 0 : 1;
  } finally {
    approvals.close();
    await agent.close();
  }
}
