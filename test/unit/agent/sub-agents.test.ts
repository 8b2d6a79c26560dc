// Specialist agents as tools of the main agent, and pipelines: the real loop, the scripted model,
// SQLite traces. The model answers by who is asking (each agent's system prompt says who it is).
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { formatRunTimeline } from "../../../src/adapters/trace-report.js";
import { runAgent } from "../../../src/agent/loop.js";
import { parseAgentsConfig } from "../../../src/agent/sub-agents.js";
import { createTraceReader } from "../../../src/store/sqlite-traces.js";
import { loadConfig } from "../../../src/config.js";
import { createLogger } from "../../../src/logger.js";
import { sqliteAgentConfig, type SqliteAgent } from "../../helpers/sqlite-agent.js";
import type { ChatCompletionRequestBody } from "../../../src/testing/scripted-model-server.js";
import type { ApprovalRequest } from "../../../src/tools/types.js";
import { closeServers, startServer } from "../../helpers/agent.js";
import { type Pipeline, type PipelineOptions, startPipeline } from "../../helpers/pipeline.js";

const agentsFile = {
  agents: {
    researcher: {
      description: "Looks up orders.",
      systemPrompt: "You are the RESEARCHER.",
      tools: ["get_order_status"],
      maxSteps: 3,
    },
    clerk: {
      description: "Cancels orders.",
      systemPrompt: "You are the CLERK.",
      model: "gpt-4o",
      tools: ["cancel_order"],
    },
    writer: { description: "Writes replies.", systemPrompt: "You are the WRITER." },
  },
  pipelines: { triage: ["researcher", "writer"] },
};

const who = (body: ChatCompletionRequestBody) =>
  String(body.messages[0]?.content ?? "").match(/RESEARCHER|CLERK|WRITER/)?.[0] ?? "MAIN";
const toolNames = (body: ChatCompletionRequestBody) =>
  (body.tools ?? []).map((tool) => (tool as { function: { name: string } }).function.name).sort();
const lastTool = (body: ChatCompletionRequestBody) =>
  String(body.messages.findLast((message) => message.role === "tool")?.content ?? "");

let agent: SqliteAgent | undefined;
const pipelines: Pipeline[] = [];
afterEach(async () => {
  for (const pipeline of pipelines.splice(0)) await pipeline.close();
  await agent?.close();
  agent = undefined;
  await closeServers();
});

async function setUp(
  script: (body: ChatCompletionRequestBody) => object,
  approve?: (request: ApprovalRequest) => Promise<{ approved: boolean; by: string; argumentsHash: string }>,
) {
  const server = await startServer({ script: (body) => script(body) });
  const directory = mkdtempSync(join(tmpdir(), "glassbox-agents-"));
  writeFileSync(join(directory, "agents.json"), JSON.stringify(agentsFile));
  const config = loadConfig({
    OPENAI_BASE_URL: server.url,
    LLM_MODEL: "gpt-4o-mini",
    GLASSBOX_DB: join(directory, "glassbox.db"),
    GLASSBOX_SHOP_DB: join(directory, "shop.db"),
    GLASSBOX_DEMO: "true",
    GLASSBOX_AGENTS: join(directory, "agents.json"),
  });
  agent = await sqliteAgentConfig(config, createLogger({ level: "silent" }), approve ? { approve } : {});
  return { server, agent, config };
}

/** The pipeline over the agent (its pipelines too), closed after the test. */
async function pipelineOver(over: SqliteAgent, options: Partial<PipelineOptions> = {}): Promise<Pipeline> {
  const pipeline = await startPipeline({ agent: over, store: over.port, ...options });
  pipelines.push(pipeline);
  return pipeline;
}

describe("specialists as tools", () => {
  it("a supervisor hands a task to a specialist: its own prompt, model and tools; traced under the call; tokens and cost rolled up", async () => {
    const { server, agent } = await setUp((body) => {
      const speaker = who(body);
      if (speaker === "RESEARCHER") {
        return body.messages.some((message) => message.role === "tool")
          ? {
              content: `Order status: ${JSON.parse(lastTool(body)).data.status}`,
              usage: { promptTokens: 300, completionTokens: 30 },
            }
          : {
              toolCalls: [{ name: "get_order_status", arguments: '{"order_id":"20240315001"}' }],
              usage: { promptTokens: 200, completionTokens: 20 },
            };
      }
      return body.messages.some((message) => message.role === "tool")
        ? {
            content: `Done: ${JSON.parse(lastTool(body)).data.answer}`,
            usage: { promptTokens: 500, completionTokens: 50 },
          }
        : {
            toolCalls: [{ name: "agent_researcher", arguments: '{"task":"What is the status of order 20240315001?"}' }],
            usage: { promptTokens: 400, completionTokens: 40 },
          };
    });
    expect(agent.tools.names()).toEqual(expect.arrayContaining(["agent_researcher", "agent_clerk", "agent_writer"]));

    const result = await runAgent(agent, { input: "Where is my order?", sessionId: "cli:sup", userId: "U1" });
    expect(result.output).toBe("Done: Order status: delivered");
    // The specialist saw its own prompt and only its tools, on the main model.
    const research = server.requests.filter((request) => who(request.body) === "RESEARCHER");
    expect(research).toHaveLength(2);
    expect(toolNames(research[0]!.body)).toEqual(["get_order_status"]);
    expect(research[0]!.body.model).toBe("gpt-4o-mini");
    expect(research[0]!.body.messages.at(-1)?.content).toBe("What is the status of order 20240315001?");
    // Its tokens count toward the run that asked.
    expect(result.usage).toEqual({
      promptTokens: 400 + 500 + 200 + 300,
      completionTokens: 40 + 50 + 20 + 30,
      totalTokens: 1540,
    });

    const traces = createTraceReader(agent.store);
    const [child] = traces.childrenOf(result.runId);
    const call = traces.steps(result.runId)[0]?.toolCalls[0];
    expect(child).toMatchObject({
      parentRunId: result.runId,
      parentToolCallId: call?.id,
      status: "final",
      steps: 2,
      promptTokens: 500,
      completionTokens: 50,
    });
    expect(traces.steps(child!.runId).map((step) => step.toolCalls.map((toolCall) => toolCall.name))).toEqual([
      ["get_order_status"],
      [],
    ]);
    // gpt-4o-mini: the run's cost is its own steps' plus the specialist's run's.
    const price = (prompt: number, completion: number) => (prompt * 0.15 + completion * 0.6) / 1e6;
    expect(traces.run(result.runId)?.cost).toBeCloseTo(price(900, 90) + price(500, 50), 12);
    // The text timeline (glassbox trace) shows the specialist's run inside the call that started it.
    const timeline = formatRunTimeline(traces.run(result.runId)!, traces.steps(result.runId), traces);
    expect(timeline).toMatch(
      /→ agent_researcher\(task: What is the status of order 20240315001\?\) {2}success[^\n]*\n {6}sub-agent Run run_[^\n]*\(final\)/,
    );
    expect(timeline).toMatch(/\n {10}→ get_order_status\(order_id: 20240315001\) {2}success/);
    // Totals count every token once: the specialist's run is not a second run of the session.
    expect(traces.totalsBySession().find((total) => total.key === "cli:sup")).toMatchObject({
      runs: 1,
      promptTokens: 1400,
      completionTokens: 140,
    });
  });

  it("a specialist's dangerous call asks the same approval gate, and runs only when approved", async () => {
    const asked: ApprovalRequest[] = [];
    const { server, agent } = await setUp(
      (body) => {
        if (who(body) === "CLERK") {
          return body.messages.some((message) => message.role === "tool")
            ? { content: `clerk: ${lastTool(body)}` }
            : { toolCalls: [{ name: "cancel_order", arguments: '{"order_id":"20240410003","reason":"asked"}' }] };
        }
        return body.messages.some((message) => message.role === "tool")
          ? { content: "ok" }
          : { toolCalls: [{ name: "agent_clerk", arguments: '{"task":"Cancel order 20240410003"}' }] };
      },
      async (request) => {
        asked.push(request);
        return { approved: true, by: "U1", argumentsHash: request.argumentsHash };
      },
    );
    await runAgent(agent, { input: "cancel it", sessionId: "cli:clerk", userId: "U1" });
    expect(asked.map((request) => request.toolName)).toEqual(["cancel_order"]);
    const clerkRequests = server.requests.filter((request) => who(request.body) === "CLERK");
    expect(clerkRequests[0]?.body.model).toBe("gpt-4o"); // the clerk's own model
    expect(JSON.parse(lastTool(clerkRequests.at(-1)!.body))).toMatchObject({
      status: "success",
      data: { status: "cancelled" },
    });
  });
});

describe("a specialist's approval in a chat", () => {
  const clerkScript = (body: ChatCompletionRequestBody) => {
    if (who(body) === "CLERK") {
      return body.messages.some((message) => message.role === "tool")
        ? { content: `clerk: ${JSON.parse(lastTool(body)).data.status}` }
        : { toolCalls: [{ name: "cancel_order", arguments: '{"order_id":"20240410003","reason":"asked"}' }] };
    }
    return body.messages.some((message) => message.role === "tool")
      ? { content: `main: ${JSON.parse(lastTool(body)).data.answer}` }
      : { toolCalls: [{ name: "agent_clerk", arguments: '{"task":"Cancel order 20240410003"}' }] };
  };
  const buttons = { approvalRef: () => "C1:1" };

  it("reaches the person through the conversation's buttons; both runs pause, and go on when they approve", async () => {
    const { agent } = await setUp(clerkScript);
    const conversations = await pipelineOver(agent, buttons);
    const shown = conversations.shown.asked;
    const paused = await conversations.send({ input: "cancel my order", sessionId: "web:live", userId: "U1" });
    expect(paused.stopReason).toBe("awaiting_approval");
    expect(paused.output).toBe("Waiting for a person to approve: cancel_order.");
    expect(shown).toMatchObject([{ toolName: "cancel_order", requester: "U1" }]);
    // The specialist's run waits too, under the main run's call.
    const traces = createTraceReader(agent.store);
    const [clerk] = traces.childrenOf(paused.runId);
    expect(clerk).toMatchObject({ status: "awaiting_approval", parentRunId: paused.runId });

    expect((await conversations.click({ approvalId: shown[0]!.id, userId: "U2", approved: true })).kind).toBe(
      "not_allowed",
    );
    const decided = await conversations.click({ approvalId: shown[0]!.id, userId: "U1", approved: true });
    expect(decided.kind).toBe("decided");
    const result = await decided.resumed;
    expect(result?.output).toBe("main: clerk: cancelled");
    expect(traces.run(paused.runId)?.status).toBe("final");
    expect(traces.run(clerk!.runId)?.status).toBe("final");
    expect((await conversations.click({ approvalId: shown[0]!.id, userId: "U1", approved: true })).kind).toBe(
      "already_decided",
    );
  });

  it("survives a restart between the buttons and the click", async () => {
    const { agent: first, server, config } = await setUp(clerkScript);
    const before = await pipelineOver(first, buttons);
    const shown = before.shown.asked;
    const paused = await before.send({ input: "cancel my order", sessionId: "web:restart", userId: "U1" });
    expect(paused.stopReason).toBe("awaiting_approval");
    await pipelines.pop()?.close();
    await first.close();
    agent = undefined;

    // A new process: a new agent and pipeline over the same database; the person clicks now.
    agent = await sqliteAgentConfig(config, createLogger({ level: "silent" }));
    const after = await pipelineOver(agent, buttons);
    const decided = await after.click({ approvalId: shown[0]!.id, userId: "U1", approved: true });
    expect(decided.kind).toBe("decided");
    expect((await decided.resumed)?.output).toBe("main: clerk: cancelled");
    // The shop really cancelled it, once; the main run's usage counts the clerk's tokens.
    const cancels = server.requests.filter(
      (request) => who(request.body) === "CLERK" && request.body.messages.some((message) => message.role === "tool"),
    );
    expect(cancels).toHaveLength(1);
    expect(JSON.parse(lastTool(cancels[0]!.body))).toMatchObject({ status: "success", data: { status: "cancelled" } });
    const traces = createTraceReader(agent.store);
    const [clerk] = traces.childrenOf(paused.runId);
    expect(traces.run(clerk!.runId)?.status).toBe("final");
    expect(traces.run(paused.runId)!.promptTokens).toBeGreaterThan(traces.run(clerk!.runId)!.promptTokens);
  });

  it("a denial reaches the specialist as denied, and the main run answers", async () => {
    const { agent } = await setUp((body) => {
      if (who(body) === "CLERK") {
        return body.messages.some((message) => message.role === "tool")
          ? { content: `clerk: ${JSON.parse(lastTool(body)).status}` }
          : { toolCalls: [{ name: "cancel_order", arguments: '{"order_id":"20240410003","reason":"asked"}' }] };
      }
      return body.messages.some((message) => message.role === "tool")
        ? { content: `main: ${JSON.parse(lastTool(body)).data.answer}` }
        : { toolCalls: [{ name: "agent_clerk", arguments: '{"task":"Cancel order 20240410003"}' }] };
    });
    const conversations = await pipelineOver(agent, buttons);
    await conversations.send({ input: "cancel my order", sessionId: "web:deny", userId: "U1" });
    const shown = conversations.shown.asked;
    const decided = await conversations.click({ approvalId: shown[0]!.id, userId: "U1", approved: false });
    expect((await decided.resumed)?.output).toBe("main: clerk: error");
  });
});

describe("pipelines", () => {
  it("passes each stage's answer to the next, through /pipeline in a conversation", async () => {
    const { server, agent } = await setUp((body) => {
      const input = String(body.messages.at(-1)?.content ?? "");
      return who(body) === "RESEARCHER"
        ? { content: `facts about <${input}>` }
        : { content: `reply based on [${input}]` };
    });
    const conversations = await pipelineOver(agent);
    const result = await conversations.send({
      input: "/pipeline triage order 20240315001 is late",
      sessionId: "web:p",
      userId: "U1",
    });
    expect(result.output).toBe("reply based on [facts about <order 20240315001 is late>]");
    expect(server.requests.map((request) => who(request.body))).toEqual(["RESEARCHER", "WRITER"]);
    const unknown = await conversations.send({ input: "/pipeline nope hello", sessionId: "web:p", userId: "U1" });
    expect(unknown.output).toBe("There is no pipeline 'nope'; the pipelines are: triage.");
  });

  it("gives the person's files to the first stage, with their request; later stages read its answer", async () => {
    const { server, agent } = await setUp((body) => {
      const request = JSON.stringify(body.messages.find((message) => message.role === "user")?.content ?? "");
      return who(body) === "RESEARCHER"
        ? { content: request.includes("order 77 shipped late") ? "the file says order 77 shipped late" : "no file" }
        : { content: "reply" };
    });
    const conversations = await pipelineOver(agent);
    const data = new TextEncoder().encode("order 77 shipped late\n");
    const result = await conversations.send({
      input: "/pipeline triage what does the log say?",
      sessionId: "web:pf",
      userId: "U1",
      attachments: [{ name: "log.txt", mimeType: "text/plain", size: data.length, data }],
    });
    expect(result.stopReason).toBe("final");
    const [research, writing] = server.requests.map((request) => request.body);
    expect(JSON.stringify(research?.messages)).toContain("order 77 shipped late");
    expect(JSON.stringify(writing?.messages)).not.toContain("log.txt"); // only the first stage's answer
    expect(JSON.stringify(writing?.messages)).toContain("the file says order 77 shipped late");
  });

  it("regression: a pipeline given a run id (an accepted HTTP API run) runs its first stage under it and each later stage as a run of its own", async () => {
    const { agent } = await setUp((body) => ({ content: who(body) === "RESEARCHER" ? "facts" : "reply" }));
    const conversations = await pipelineOver(agent);
    const accepted = await conversations.accept({
      input: "/pipeline triage late order",
      sessionId: "web:p2",
      userId: "U1",
    });
    await accepted.result;
    const runs = agent.store.db
      .prepare("SELECT id, status, output FROM runs WHERE session_id = 'web:p2' ORDER BY started_at, rowid")
      .all() as Array<{ id: string; status: string; output: string }>;
    expect(runs).toHaveLength(2);
    expect(runs[0]).toEqual({ id: accepted.runId, status: "final", output: "facts" });
    expect(runs[1]).toMatchObject({ status: "final", output: "reply" });
    expect(runs[1]?.id).not.toBe(accepted.runId);
  });
});

describe("agents configuration", () => {
  it("says in one sentence what is wrong", async () => {
    expect(() => parseAgentsConfig("{")).toThrow(/not valid JSON/);
    expect(() => parseAgentsConfig(JSON.stringify({ agents: { a: { description: "d" } } }))).toThrow(
      `The agent 'a' needs "systemPrompt" as a non-empty string.`,
    );
    expect(() =>
      parseAgentsConfig(JSON.stringify({ agents: { a: { description: "d", systemPrompt: "p", tools: ["nope"] } } }), [
        "calculator",
      ]),
    ).toThrow("The agent 'a' names tools that do not exist: nope.");
    expect(() => parseAgentsConfig(JSON.stringify({ agents: {}, pipelines: { p: ["ghost"] } }))).toThrow(
      "The pipeline 'p' must be a list of defined agents (defined: none).",
    );
    await expect(loadConfigAndAgents("/nonexistent/agents.json")).rejects.toThrow(
      /GLASSBOX_AGENTS names \/nonexistent\/agents.json, which cannot be read \(ENOENT\)/,
    );
  });
});

async function loadConfigAndAgents(path: string) {
  const config = loadConfig({
    OPENAI_BASE_URL: "http://127.0.0.1:9/v1",
    GLASSBOX_DB: join(mkdtempSync(join(tmpdir(), "glassbox-agents-")), "g.db"),
    GLASSBOX_AGENTS: path,
  });
  return sqliteAgentConfig(config, createLogger({ level: "silent" }));
}
