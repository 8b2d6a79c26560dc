// The scripted model of the budget tests on every platform: "first" is one answer of 850 tokens;
// anything else a calculator call of 300 tokens, then (never reached once a budget of 1,000 stops it) an answer.
import type { ChatCompletionRequestBody } from "../../src/testing/scripted-model-server.js";

export function budgetScript(body: ChatCompletionRequestBody) {
  const asked = String(body.messages.findLast((message) => message.role === "user")?.content ?? "");
  if (asked.includes("first")) return { content: "First answer.", usage: { promptTokens: 800, completionTokens: 50 } };
  if (body.messages.at(-1)?.role === "tool") return { content: "Should not be reached." };
  return {
    content: "Let me add that up.",
    toolCalls: [{ name: "calculator", arguments: JSON.stringify({ expression: "2 + 2" }) }],
    usage: { promptTokens: 250, completionTokens: 50 },
  };
}
