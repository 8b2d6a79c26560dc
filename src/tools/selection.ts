/**
 * Dynamic tool selection. With more tools registered than a threshold, each model call is sent
 * only the tools that fit the conversation (BM25 over names, descriptions, parameters and the
 * shapes of parameter examples; a word no tool uses is read through the WordNet lexicon), the tools
 * that the two best ones lead to, every tool the run has already called, and `list_tools`, through
 * which the model can see all the others. The executor still accepts any registered tool, so a
 * tool not sent can still be called.
 *
 * Everything is derived from the run's plain data (its messages and tool calls), so a paused and
 * resumed run selects exactly as it would have without the pause.
 */
import { isPlainObject } from "./args.js";
import { createToolRegistry, type ToolRegistry } from "./registry.js";
import { createRanker, parameterText } from "./tool-ranking.js";
import { terms } from "./tool-words.js";
import type { AnyTool, ToolSpec } from "./types.js";
import type { UsageLearning } from "./usage-learning.js";

export { editDistance, formatsOf } from "./tool-ranking.js";
export { stem, terms } from "./tool-words.js";

export const LIST_TOOLS = "list_tools";

export interface ToolSelectorOptions {
  /** Up to this many tools, every call is sent all of them (default 20). */
  threshold?: number;
  /** How many ranked tools a call is sent at least, besides used and requested ones and the tools the best ones lead to (default 12). */
  limit?: number;
  /**
   * Beyond `limit`, further ranked tools scoring at least `closeScore` of the best one's are sent
   * too, up to this many ranked tools in all (default 20): a request whose best match stands out
   * gets `limit` tools, a vague one more.
   */
  maxLimit?: number;
  /** The share of the best score a tool past `limit` needs (default 0.15). */
  closeScore?: number;
  /** list_tools without a query shortens descriptions to fit this many characters (default 3,500: under the executor's 4,000-character result limit). */
  listingChars?: number;
  /**
   * list_tools' description names every tool (default true, when the names fit in 2,000 characters):
   * about 5 tokens a tool on every call, so a model can ask for a tool the ranking missed.
   */
  nameEveryTool?: boolean;
  /**
   * What past runs taught about which tools go with which words (src/tools/usage-learning.ts): its
   * scores add to the BM25 ones, so a tool the model used for such requests before is ranked even
   * when no word of its description matches. Read on every call, so runs learned later count.
   */
  usage?: UsageLearning;
  /**
   * With `usage`: the best-ranked tools also bring along the tools past runs used with them, in at
   * least this share of the runs that used them (default 0.3; 0 or more than 1 turns it off).
   */
  coUseShare?: number;
}

export interface SelectionQuery {
  /** What the run is about: its request and the latest messages. */
  text: string;
  /** Tools the run has called: always sent. */
  usedTools?: string[];
  /** Tools list_tools pointed the model to: always sent. */
  requested?: string[];
}

/** The parts of a run that selection reads; a RunState fits. */
/** A message's content: text, or parts (a user message with attachments), of which the text parts count. */
type SaidContent = string | null | ReadonlyArray<{ type: string; text?: string }>;

export interface SelectionRun {
  history?: ReadonlyArray<{ role: string; content: SaidContent }>;
  messages: ReadonlyArray<{ role: string; content: SaidContent }>;
  toolCalls: ReadonlyArray<{ name: string; arguments: unknown }>;
}

export interface ToolSelector {
  /** The registry to run with: the given tools, plus list_tools when selection is on. */
  readonly tools: ToolRegistry;
  /** False when there are no more tools than the threshold: then every call gets every tool. */
  readonly active: boolean;
  /**
   * The tools for one model call, in registry order (a stable prompt prefix). The same choice
   * returns the same array, so per-array caches (memory's schema token count) keep working.
   */
  select(query: SelectionQuery): ToolSpec[];
  /** select() with the query read from a run: its request, latest messages and tool calls. */
  selectForRun(run: SelectionRun): ToolSpec[];
  /** Names of the tools sharing a word with `text`, best match first. */
  rank(text: string): string[];
}

const DEFAULT_THRESHOLD = 20;
const DEFAULT_LIMIT = 12;
const DEFAULT_MAX_LIMIT = 20;
const DEFAULT_CLOSE_SCORE = 0.15;
/** The best-ranked tools that bring along the tools needing what they give (get_order_status: track_shipment). */
const NEXT_STEPS_OF = 2;
const DEFAULT_LISTING_CHARS = 3_500;
/** The best-ranked tools that bring along what past runs used with them, and how often it must have been. */
const CO_USE_OF = 2;
const CO_USE_RUNS = 2;
const DEFAULT_CO_USE_SHARE = 0.3;
/** Besides the request, the latest user and assistant messages that describe what the run is about. */
const RECENT_MESSAGES = 4;
const SELECTION_CACHE_LIMIT = 1_000;
/** Below this, list_tools lists names alone. */
const MINIMUM_DESCRIPTION_CHARS = 10;
/** list_tools' description names every tool when the names take at most this many characters. */
const NAMES_IN_DESCRIPTION_CHARS = 2_000;

export function createToolSelector(registry: ToolRegistry, options: ToolSelectorOptions = {}): ToolSelector {
  const threshold = options.threshold ?? DEFAULT_THRESHOLD;
  const limit = options.limit ?? DEFAULT_LIMIT;
  const maxLimit = Math.max(limit, options.maxLimit ?? DEFAULT_MAX_LIMIT);
  const closeScore = options.closeScore ?? DEFAULT_CLOSE_SCORE;
  const coUseShare = options.coUseShare ?? DEFAULT_CO_USE_SHARE;
  const definitions = registry.list().map(({ definition }) => definition);
  if (definitions.length <= threshold) {
    // No call is ranked here, so the ranker (and WordNet, ~65 ms to read) waits for a rank() that may never come.
    let scored: ReturnType<typeof createRanker> | undefined;
    const rank = (text: string) => (scored ??= createRanker(definitions, options.usage))(text).map(({ name }) => name);
    return {
      tools: registry,
      active: false,
      select: () => registry.specs(),
      selectForRun: () => registry.specs(),
      rank,
    };
  }

  const scored = createRanker(definitions, options.usage);
  const rank = (text: string) => scored(text).map(({ name }) => name);
  /** What list_tools answers for a query, and so what it makes available: named tools first, then the best matches. */
  const matches = (query: string): string[] => {
    const named = query.split(/[^a-zA-Z0-9_-]+/).filter((word) => registry.get(word) !== undefined);
    return [...new Set([...named, ...rank(query)])].slice(0, limit);
  };
  const listTools = createListToolsTool(definitions, matches, {
    listingChars: options.listingChars ?? DEFAULT_LISTING_CHARS,
    nameEveryTool: options.nameEveryTool ?? true,
  });
  const tools = createToolRegistry([...definitions, listTools]);
  const specs = tools.specs();
  const companions = companionsOf(definitions);
  const cache = new Map<string, ToolSpec[]>();

  const nextSteps = nextStepsOf(companions);
  const select = (query: SelectionQuery): ToolSpec[] => {
    const ranked = scored(query.text);
    const close = closeScore * (ranked[0]?.score ?? 0);
    const kept = ranked
      .filter(({ score }, position) => position < limit || (position < maxLimit && score >= close))
      .map(({ name }) => name);
    const chosen = new Set([...kept, ...(query.usedTools ?? []), ...(query.requested ?? [])]);
    for (const { name } of ranked.slice(0, NEXT_STEPS_OF))
      for (const next of nextSteps.get(name) ?? []) chosen.add(next);
    // what past runs used together with the best-ranked tools
    if (options.usage && coUseShare > 0 && coUseShare <= 1) {
      for (const { name } of ranked.slice(0, CO_USE_OF))
        for (const other of options.usage.usedWith(name, coUseShare, CO_USE_RUNS))
          if (registry.get(other)) chosen.add(other);
    }
    for (const name of [...chosen]) for (const companion of companions.get(name) ?? []) chosen.add(companion);
    chosen.add(LIST_TOOLS);
    const key = specs.map((spec) => (chosen.has(spec.function.name) ? "1" : "0")).join("");
    let selected = cache.get(key);
    if (!selected) {
      selected = specs.filter((spec) => chosen.has(spec.function.name));
      if (cache.size >= SELECTION_CACHE_LIMIT) cache.clear();
      cache.set(key, selected);
    }
    return selected;
  };

  return {
    tools,
    active: true,
    select,
    selectForRun: (run) => select(queryOf(run, matches)),
    rank,
  };
}

/**
 * What each tool brings along when it is chosen, as its author wrote it: the tools its description
 * or parameters name ("a thread id from search_email"), those it dependsOn, and those whose
 * description says they give what it requires ("event_id": "... attendees and event id").
 */
function companionsOf(definitions: AnyTool[]): Map<string, string[]> {
  const names = new Set(definitions.map((tool) => tool.name));
  const descriptions = definitions.map((tool) => ({
    name: tool.name,
    terms: terms(tool.description).join(" "),
    inputs: Object.keys(propertiesOf(tool.parameters)),
  }));
  return new Map(
    definitions.map((tool) => {
      const named = `${tool.description} ${parameterText(tool.parameters)}`.split(/[^a-zA-Z0-9_-]+/);
      const producers = requiredIdentifiers(tool).flatMap((parameter) => {
        const phrase = terms(parameter).join(" ");
        return descriptions
          .filter((other) => !other.inputs.includes(parameter) && ` ${other.terms} `.includes(` ${phrase} `))
          .map((other) => other.name);
      });
      const companions = [...named, ...(tool.dependsOn ?? []), ...producers].filter(
        (name) => name !== tool.name && names.has(name),
      );
      return [tool.name, [...new Set(companions)]];
    }),
  );
}

/** The reverse of companions: the tools that need what a tool gives ("tracking number": track_shipment). */
function nextStepsOf(companions: Map<string, string[]>): Map<string, string[]> {
  const next = new Map<string, string[]>();
  for (const [tool, needed] of companions) for (const name of needed) next.set(name, [...(next.get(name) ?? []), tool]);
  return next;
}

/** Required parameters that identify something another tool must find first: order_id, tracking_number. */
function requiredIdentifiers(tool: AnyTool): string[] {
  const required = Array.isArray(tool.parameters.required)
    ? tool.parameters.required.filter((name) => typeof name === "string")
    : [];
  return required.filter((name) => /[_-](id|number)$/i.test(name));
}

function propertiesOf(schema: unknown): Record<string, unknown> {
  return isPlainObject(schema) && isPlainObject(schema.properties) ? schema.properties : {};
}

/** The request, the latest user and assistant messages, the tools called, and what list_tools pointed to. */
function queryOf(run: SelectionRun, matches: (query: string) => string[]): SelectionQuery {
  const said = (message: { role: string; content: SaidContent }) =>
    (message.role === "user" || message.role === "assistant") && !!message.content;
  const textOf = (content: SaidContent | undefined) =>
    typeof content === "string" ? content : (content ?? []).map((part) => part.text ?? "").join("\n");
  const request = run.messages.find(said);
  const recent = [...(run.history ?? []), ...run.messages].filter(said).slice(-RECENT_MESSAGES);
  const text = [...new Set([request, ...recent])].map((message) => textOf(message?.content)).join("\n");
  const requested = run.toolCalls.flatMap((call) => {
    const query = call.name === LIST_TOOLS && isPlainObject(call.arguments) ? call.arguments.query : undefined;
    return typeof query === "string" && query.trim() !== "" ? matches(query) : [];
  });
  return { text, usedTools: run.toolCalls.map((call) => call.name), requested };
}

/**
 * list_tools. Its description names every tool when the names are short enough together: names
 * are cheap, schemas are not, and a model that sees the name it needs can ask for it. The text
 * never changes, so the prompt's tool block stays cacheable.
 */
function createListToolsTool(
  definitions: AnyTool[],
  matches: (query: string) => string[],
  options: { listingChars: number; nameEveryTool: boolean },
): AnyTool {
  const byName = new Map(definitions.map((tool) => [tool.name, tool]));
  const names = definitions.map((tool) => tool.name).join(", ");
  const nameAll = options.nameEveryTool && names.length <= NAMES_IN_DESCRIPTION_CHARS;
  return {
    name: LIST_TOOLS,
    description:
      "Lists the tools you can use besides the ones offered now. With a query (what you need to do, or a tool's name) " +
      "it returns the best matches, which are then offered with their parameters on your next step; without one it lists every tool." +
      (nameAll ? ` All tools: ${names}.` : ""),
    parameters: {
      type: "object",
      properties: {
        query: { type: "string", description: "What you need to do, or a tool's name; leave out to list every tool" },
      },
      additionalProperties: false,
    },
    handler: ({ query }: { query?: string }) => {
      if (query === undefined || query.trim() === "") return { tools: listing(definitions, options.listingChars) };
      const found = matches(query).map((name) => ({
        name,
        description: firstSentence(byName.get(name)?.description ?? ""),
      }));
      if (found.length === 0)
        return { tools: [], note: "No tool matches that query; call list_tools without a query to see every tool." };
      return { tools: found, note: "These tools are offered with their parameters from your next step on." };
    },
  };
}

/** "name: description" per tool, descriptions shortened evenly so the whole list fits in `chars` as JSON. */
function listing(definitions: AnyTool[], chars: number): string[] {
  const lines = definitions.map((tool) => ({ name: tool.name, description: firstSentence(tool.description) }));
  const render = (room: number) =>
    lines.map(
      ({ name, description }) =>
        `${name}: ${description.length <= room ? description : `${description.slice(0, room - 1).trimEnd()}…`}`,
    );
  let room = Math.max(...lines.map((line) => line.description.length));
  while (room >= MINIMUM_DESCRIPTION_CHARS && JSON.stringify(render(room)).length > chars) room--;
  return room >= MINIMUM_DESCRIPTION_CHARS ? render(room) : lines.map(({ name }) => name);
}

/** Up to the first full stop that ends a sentence (not the one of "e.g. miles"). */
function firstSentence(text: string): string {
  return (text.split(/(?<=[.!?])\s+(?=[A-Z])/)[0] ?? text).trim();
}
