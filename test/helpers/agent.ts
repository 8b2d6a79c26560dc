// Shared set-up for the agent e2e tests: a real scripted model server on 127.0.0.1, the real
// openai-SDK model client pointed at it, and small real tools that count and remember their calls.
import { createOpenAIModel, type OpenAIModelOptions } from "../../src/agent/llm/index.js";
import type { AgentEvent } from "../../src/agent/events.js";
import {
  startScriptedModelServer,
  type ChatCompletionRequestBody,
  type ScriptedModelServer,
  type ScriptedModelServerOptions,
} from "../../src/testing/scripted-model-server.js";
import type { ToolContext, ToolDefinition } from "../../src/tools/types.js";

const servers: ScriptedModelServer[] = [];

export async function startServer(options: ScriptedModelServerOptions = {}): Promise<ScriptedModelServer> {
  const server = await startScriptedModelServer(options);
  servers.push(server);
  return server;
}

/** Call from afterEach: closes every server started by the test. */
export async function closeServers(): Promise<void> {
  await Promise.all(servers.splice(0).map((server) => server.close()));
}

export function modelFor(server: ScriptedModelServer, options: Partial<OpenAIModelOptions> = {}) {
  return createOpenAIModel({
    baseURL: server.url,
    model: "scripted-model",
    apiKey: "test-key",
    warn: () => {},
    ...options,
  });
}

export function recordEvents() {
  const events: AgentEvent[] = [];
  return { events, onEvent: (event: AgentEvent) => void events.push(event) };
}

/** The messages the model was sent in request number `index`. */
export function sentMessages(server: ScriptedModelServer, index: number): ChatCompletionRequestBody["messages"] {
  const request = server.requests[index];
  if (!request) throw new Error(`no request #${index}; the server saw ${server.requests.length}`);
  return request.body.messages;
}

/** The text of a recorded message (the SDK sends plain strings). */
export function textOf(message: ChatCompletionRequestBody["messages"][number] | undefined): string {
  return typeof message?.content === "string" ? message.content : "";
}

/** A real tool that records the arguments and context of every call it receives. */
export function recordingTool(
  name: string,
  handler: (args: Record<string, unknown>, context: ToolContext) => unknown = (args) => ({ echoed: args }),
  extra: Partial<ToolDefinition> = {},
) {
  const calls: Array<{ args: Record<string, unknown>; context: ToolContext }> = [];
  const tool: ToolDefinition = {
    name,
    description: `The ${name} tool (test).`,
    parameters: { type: "object", properties: {}, additionalProperties: true },
    ...extra,
    handler: (args, context) => {
      calls.push({ args, context });
      return handler(args, context);
    },
  };
  return { tool, calls };
}

/** A promise with its resolve function outside, to order things without timers. */
export function deferred<T = void>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((done) => {
    resolve = done;
  });
  return { promise, resolve };
}

export const call = (name: string, args: unknown, id?: string) => ({
  name,
  arguments: typeof args === "string" ? args : JSON.stringify(args),
  ...(id ? { id } : {}),
});
