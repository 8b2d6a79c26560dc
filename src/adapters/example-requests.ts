/**
 * What the bot suggests asking (an empty chat, a mention with nothing in it), from the tools this
 * deployment actually has: a suggestion the bot cannot carry out would be the first thing to go wrong.
 */
import type { ToolSource } from "../tools/tool-sources.js";

const BUILTIN_EXAMPLES: Record<string, string> = {
  current_time: "What time is it in Tokyo?",
  calculator: "What is 18% of 2,450?",
  remember: "Remember that I prefer short answers.",
};

const DEMO_EXAMPLES: Record<string, string> = {
  get_order_status: "What is the status of order 20240410003?",
  cancel_order: "Cancel order 20240410003, I changed my mind.",
};

/** A few example requests, best first: the demo shop's, the owner's own tools by name, then the built-ins'. */
export function exampleRequests(sources: ReadonlyMap<string, ToolSource>): string[] {
  const examples: string[] = [];
  const own: string[] = [];
  for (const [name, source] of sources) {
    if (source.kind === "demo" && DEMO_EXAMPLES[name]) examples.push(DEMO_EXAMPLES[name]);
    if (source.kind !== "builtin" && source.kind !== "demo") own.push(name);
  }
  if (own.length > 0) examples.push(`Ask for something your tools do (${own.slice(0, 5).join(", ")}${own.length > 5 ? ", ..." : ""}).`);
  for (const [name, source] of sources) if (source.kind === "builtin" && BUILTIN_EXAMPLES[name]) examples.push(BUILTIN_EXAMPLES[name]);
  return examples.length > 0 ? examples.slice(0, 3) : ["Ask me anything."];
}

/** "Ask me something…, for example: …" with an example the bot's own tools can answer. */
export function askSomething(opening: string, hints: string[] = []): string {
  return hints[0] ? `${opening}, for example: ${hints[0]}` : `${opening}.`;
}
