/**
 * What the bot suggests asking (an empty chat, a mention with nothing in it, Slack's suggested
 * prompts), from the tools this deployment actually has: a suggestion the bot cannot carry out would
 * be the first thing to go wrong.
 */
import type { ToolSource } from "../tools/tool-sources.js";

/** One suggestion: a short title naming what it uses, and the request itself. */
export interface ExamplePrompt {
  title: string;
  message: string;
}

const BUILTIN_EXAMPLES: Record<string, string> = {
  current_time: "What time is it in Tokyo?",
  calculator: "What is 18% of 2,450?",
  remember: "Remember that I prefer short answers.",
};

const DEMO_EXAMPLES: Record<string, string> = {
  get_order_status: "What is the status of order 20240410003?",
  cancel_order: "Cancel order 20240410003, I changed my mind.",
};

const MOST = 3;

/**
 * A few example prompts, best first: the demo shop's, the owner's own tools by name, then the
 * built-ins'. Each title names the tool it exercises, so a person sees what the bot can do.
 */
export function examplePrompts(sources: ReadonlyMap<string, ToolSource>, most = MOST): ExamplePrompt[] {
  const prompts: ExamplePrompt[] = [];
  const own: string[] = [];
  for (const [name, source] of sources) {
    if (source.kind === "demo" && DEMO_EXAMPLES[name])
      prompts.push({ title: `Try ${name}`, message: DEMO_EXAMPLES[name] });
    if (source.kind !== "builtin" && source.kind !== "demo") own.push(name);
  }
  if (own.length > 0) {
    const named = `${own.slice(0, 5).join(", ")}${own.length > 5 ? ", ..." : ""}`;
    prompts.push({
      title: `Try ${own.length === 1 ? own[0] : "your tools"}`,
      message: `Ask for something your tools do (${named}).`,
    });
  }
  for (const [name, source] of sources) {
    if (source.kind === "builtin" && BUILTIN_EXAMPLES[name])
      prompts.push({ title: `Try ${name}`, message: BUILTIN_EXAMPLES[name] });
  }
  return prompts.length > 0 ? prompts.slice(0, most) : [{ title: "Ask me anything", message: "Ask me anything." }];
}

/** A few example requests, best first (the messages of examplePrompts). */
export function exampleRequests(sources: ReadonlyMap<string, ToolSource>): string[] {
  return examplePrompts(sources).map((prompt) => prompt.message);
}

/** "Ask me something…, for example: …" with an example the bot's own tools can answer. */
export function askSomething(opening: string, hints: string[] = []): string {
  return hints[0] ? `${opening}, for example: ${hints[0]}` : `${opening}.`;
}
