/**
 * The textbook agent loop, as the baseline glassbox is measured against: a messages array, one
 * non-streaming `chat.completions.create` per step, tool calls run one after another from a map.
 * No validation, no guards, no events — the least a loop can do for the same HTTP round trip.
 */
import type OpenAI from "openai";
import type { ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions";

export interface NaiveTool {
  description: string;
  parameters: Record<string, unknown>;
  handler: (args: Record<string, unknown>) => unknown;
}

export interface NaiveLoopOptions {
  client: OpenAI;
  model: string;
  systemPrompt: string;
  tools: Record<string, NaiveTool>;
  /** Called with each step's new messages (the reply, then its tool results) before the next model call. */
  onStep?: (messages: ChatCompletionMessageParam[]) => void;
}

export interface NaiveLoopResult {
  output: string;
  /** Model calls made. */
  steps: number;
  /** Time spent inside `chat.completions.create`, summed over the steps. */
  modelMs: number;
}

export async function runNaiveLoop(options: NaiveLoopOptions, input: string): Promise<NaiveLoopResult> {
  const { client, model, tools } = options;
  const specs: ChatCompletionTool[] = Object.entries(tools).map(([name, tool]) => ({
    type: "function",
    function: { name, description: tool.description, parameters: tool.parameters },
  }));
  const messages: ChatCompletionMessageParam[] = [
    { role: "system", content: options.systemPrompt },
    { role: "user", content: input },
  ];
  let steps = 0;
  let modelMs = 0;
  while (true) {
    const started = performance.now();
    const completion = await client.chat.completions.create({ model, messages, tools: specs });
    modelMs += performance.now() - started;
    steps++;
    const message = completion.choices[0]!.message;
    const stepStart = messages.length;
    messages.push(message);
    for (const call of message.tool_calls ?? []) {
      if (call.type !== "function") continue;
      const result = await tools[call.function.name]!.handler(JSON.parse(call.function.arguments));
      messages.push({ role: "tool", tool_call_id: call.id, content: JSON.stringify(result) });
    }
    options.onStep?.(messages.slice(stepStart));
    if (!message.tool_calls?.length) return { output: message.content ?? "", steps, modelMs };
  }
}
