/**
 * Session memory (SQLite store, token budget, rolling summary, facts) against the scripted model
 * server and the real openai SDK, with model name gpt-4o-mini (o200k_base) and the default budget.
 *
 * 1. A 200-turn conversation: each turn the user writes, the model calls `lookup` (1.5-3 k
 *    characters back), then answers; turn 1 states a fact and the model also calls `remember`;
 *    turn 200 asks for it back. The scripted model answers summary requests like a bounded,
 *    incremental summariser. Run twice in the same process: through memory, and as the naive
 *    full-history loop (runAgent without memory, `history` = every earlier message). Every request
 *    the server received is counted with the same token counter.
 * 2. Context assembly per step with 1,000 stored messages (folded as they came, like a real
 *    session): a cold call after opening the store, then warm calls.
 * 3. Append throughput: memory.commit with one message per call (one transaction each, token
 *    counting included); store.appendMessages one and ten per transaction as context.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createOpenAIModel } from "../src/agent/llm/index.js";
import { DEFAULT_SYSTEM_PROMPT, runAgent, type RunResult, type RunState } from "../src/agent/loop.js";
import { createMemoryTools } from "../src/agent/memory-tools.js";
import { createMemory, NOTES_END, NOTES_START, SUMMARY_PROMPT, type Memory } from "../src/agent/memory.js";
import { openSqliteStore, type SqliteStore } from "../src/store/sqlite-store.js";
import { createTokenCounter, encodingForModel, promptTokens, type TokenCounter } from "../src/agent/tokens.js";
import { emptyUsage, type ChatModel, type Message, type ToolSpec } from "../src/agent/types.js";
import { newToolRunState } from "../src/tools/executor.js";
import { createToolRegistry } from "../src/tools/registry.js";
import type { ToolCall, ToolDefinition } from "../src/tools/types.js";
import {
  startScriptedModelServer,
  type ChatCompletionRequestBody,
  type ScriptedModelServer,
  type ScriptedReply,
} from "../src/testing/scripted-model-server.js";
import { collectGarbage, sig3, statsOf, type Benchmark, type Row, type Stats, type Target } from "./measure.js";
import { seeded } from "../src/testing/seeded-random.js";
import { sqlitePortOf } from "../src/store/sqlite.js";
import { createRunUnit, type RunUnit } from "../src/agent/run-unit.js";

const MODEL = "gpt-4o-mini";
/** GLASSBOX_CONTEXT_TOKENS' default (src/config.ts). */
const BUDGET = 12_000;
const TURNS = 200;
const SESSION = "slack:T1:C1:1700000000.000100";
const USER = "U_ADA";
const ACCOUNT = "7342-1193";
const FACT_MESSAGE = `My name is Ada Lovelace and my account number is ${ACCOUNT}; please remember it.`;
const FACT = `The user's name is Ada Lovelace and her account number is ${ACCOUNT}.`;
const QUESTION = "What is my account number?";
/** The scripted summariser keeps at most this many words (lines with numbers are never dropped). */
const SUMMARY_WORDS = 200;

const STORED_MESSAGES = 1_000;
const WARM_CALLS = 100;
const WARMUP_CALLS = 20;
const APPEND_MESSAGES = 20_000;
const APPEND_WARMUP = 2_000;
const BATCH = 10;
/** Median of 5 by default; BENCH_ROUNDS=15 steadies the figures on a busy machine. */
const MEASURED_ROUNDS = Number(process.env.BENCH_ROUNDS) || 5;
/** The append variants take seconds a round: 3 rounds unless BENCH_ROUNDS says otherwise. */
const APPEND_ROUNDS = Number(process.env.BENCH_ROUNDS) || 3;

const TARGET_TOKEN_SHARE = 0.35;
const TARGET_CONTEXT_MS = 1;
const TARGET_APPEND_PER_S = 10_000;

const benchmark: Benchmark = {
  name: "memory",
  title: "session memory: 200-turn conversation, context assembly, append throughput",
  async run() {
    const directory = mkdtempSync(join(tmpdir(), "glassbox-bench-memory-"));
    const server = await startScriptedModelServer();
    try {
      const counter = await createTokenCounter(encodingForModel(MODEL));
      const conversation = await measureConversation(server, counter, directory);
      const assembly = await measureContextAssembly(server, counter, directory);
      const append = await measureAppend(counter, directory);
      return {
        notes: [
          `model ${MODEL} (${counter.encoding}), budget ${BUDGET} tokens; temp SQLite files in ${tmpdir()}`,
          `conversation: ${TURNS} turns through memory and through the naive full-history loop in the same run; token figures are counted with the same counter over every request the server received`,
          `context assembly: ${STORED_MESSAGES} stored messages; per round a fresh store connection, 1 cold call, ${WARMUP_CALLS} warm-up + ${WARM_CALLS} timed calls; ${MEASURED_ROUNDS} rounds`,
          `append: ${APPEND_WARMUP} warm-up + ${APPEND_MESSAGES} messages per variant and round, a fresh DB file each; ${APPEND_ROUNDS} rounds, variants rotating first`,
        ],
        rows: [...conversation.rows, ...assembly.rows, ...append.rows],
        targets: [...conversation.targets, ...assembly.targets, ...append.targets],
        data: { conversation: conversation.data, contextAssembly: assembly.data, append: append.data },
      };
    } finally {
      await server.close();
      rmSync(directory, { recursive: true, force: true });
    }
  },
};
export default benchmark;

// ---- text that reads like a conversation -------------------------------------------------------

const FUNCTION_WORDS =
  "the a an of to in for on with at by from about as into over after before and or but so if then than that which who when where while because this these those it its their our your we they he she is are was were be been has have had will would can could should may might not no also only just still very more most some any each every all both other such".split(
    " ",
  );
const CONTENT_WORDS =
  "order orders invoice invoices shipment shipping delivery warehouse customer customers account refund refunds payment payments subscription renewal discount coupon price pricing quote contract supplier vendor inventory stock backorder carrier tracking parcel package return returns exchange warranty replacement defect complaint ticket escalation priority deadline schedule calendar meeting agenda budget forecast quarter revenue margin expense report dashboard metric analysis trend region branch office team manager engineer designer analyst developer release version feature bug regression outage incident latency database server deployment migration backup restore permission access login password token certificate firewall network bandwidth storage cluster region pipeline build test review approval policy compliance audit privacy consent retention archive document spreadsheet presentation summary proposal draft template checklist roadmap milestone sprint backlog estimate capacity workload shift holiday vacation travel booking flight hotel reimbursement receipt purchase procurement catalog product model colour size weight battery charger cable adapter monitor keyboard laptop printer scanner license seat upgrade downgrade trial onboarding training handbook feedback survey rating review partner client prospect lead campaign newsletter webinar launch press announcement translation localisation accessibility mobile desktop browser extension integration webhook endpoint schema field column index query filter export import sync conflict duplicate merge history log alert threshold notification reminder follow-up handover owner stakeholder sponsor committee board legal finance sales support operations marketing logistics security facilities quality research north south east west central coastal urban rural morning afternoon evening weekly monthly yearly early late pending overdue resolved blocked urgent minor major critical stable flaky slow fast cheaper larger smaller newer older missing broken damaged delayed expedited standard express international domestic".split(
    " ",
  );

function pick<T>(random: () => number, list: readonly T[]): T {
  return list[Math.floor(random() * list.length)] as T;
}

function sentence(random: () => number, topic: readonly string[]): string {
  const length = 8 + Math.floor(random() * 10);
  const words: string[] = [];
  for (let i = 0; i < length; i++) {
    const roll = random();
    words.push(
      roll < 0.42 ? pick(random, FUNCTION_WORDS) : roll < 0.62 ? pick(random, topic) : pick(random, CONTENT_WORDS),
    );
  }
  const text = words.join(" ");
  return `${text[0]?.toUpperCase() ?? ""}${text.slice(1)}${random() < 0.15 ? "?" : "."}`;
}

/** Sentences until at least `minWords` words (never more than `maxWords`). */
function prose(random: () => number, minWords: number, maxWords: number, topic: readonly string[]): string {
  const target = minWords + Math.floor(random() * (maxWords - minWords + 1));
  const words: string[] = [];
  while (words.length < target) words.push(...sentence(random, topic).split(" "));
  const text = words.slice(0, target).join(" ");
  return /[.?]$/.test(text) ? text : `${text}.`;
}

/** Text of about `chars` characters. */
function proseOfLength(random: () => number, chars: number, topic: readonly string[]): string {
  let text = "";
  while (text.length < chars) text += `${text ? " " : ""}${sentence(random, topic)}`;
  return text;
}

const topicOf = (random: () => number) => Array.from({ length: 6 }, () => pick(random, CONTENT_WORDS));

/** What a search-like tool returns: a few titled snippets, `chars` characters in all. */
function lookupResult(random: () => number, query: string, chars: number, topic: readonly string[]) {
  const results: Array<{ title: string; updated: string; snippet: string }> = [];
  let length = 0;
  while (length < chars) {
    const snippet = proseOfLength(random, 250 + Math.floor(random() * 350), topic);
    const title = sentence(random, topic).split(" ").slice(0, 5).join(" ");
    const updated = `2025-${String(1 + Math.floor(random() * 12)).padStart(2, "0")}-${String(1 + Math.floor(random() * 28)).padStart(2, "0")}`;
    results.push({ title, updated, snippet });
    length += snippet.length + title.length + 40;
  }
  return { query, results };
}

// ---- 1. the 200-turn conversation --------------------------------------------------------------

interface Turn {
  index: number;
  user: string;
  query: string;
  lookup: ReturnType<typeof lookupResult>;
  answer: string;
}

function conversationTurns(): Turn[] {
  const random = seeded(20250601);
  return Array.from({ length: TURNS }, (_, i): Turn => {
    const index = i + 1;
    const topic = topicOf(random);
    const user = index === 1 ? FACT_MESSAGE : index === TURNS ? QUESTION : prose(random, 30, 80, topic);
    const query = topic.slice(0, 3 + Math.floor(random() * 3)).join(" ");
    const lookup = lookupResult(random, query, 1_500 + Math.floor(random() * 1_500), topic);
    return { index, user, query, lookup, answer: prose(random, 50, 100, topic) };
  });
}

/** What the scripted model does in the conversation; `turn` says which turn is running. */
function conversationScript(turns: Turn[], current: { turn: number }) {
  return (body: ChatCompletionRequestBody): ScriptedReply => {
    if (isSummaryRequest(body)) return { content: summarise(body) };
    const turn = turns[current.turn - 1] as Turn;
    const last = body.messages.at(-1);
    if (last?.role === "user") {
      const lookup = {
        id: `call_${turn.index}_lookup`,
        name: "lookup",
        arguments: JSON.stringify({ query: turn.query }),
      };
      const remember = {
        id: `call_${turn.index}_remember`,
        name: "remember",
        arguments: JSON.stringify({ fact: FACT }),
      };
      return { toolCalls: turn.index === 1 ? [remember, lookup] : [lookup] };
    }
    if (turn.index === TURNS) {
      const seen = body.messages.some((message) => textOf(message).includes(ACCOUNT));
      return {
        content: seen
          ? `Your account number is ${ACCOUNT}.`
          : "I do not know your account number; could you tell me again?",
      };
    }
    return { content: turn.answer };
  };
}

const isSummaryRequest = (body: ChatCompletionRequestBody) =>
  body.messages[0]?.role === "system" && body.messages[0].content === SUMMARY_PROMPT;

function textOf(message: ChatCompletionRequestBody["messages"][number]): string {
  const content =
    typeof message.content === "string"
      ? message.content
      : Array.isArray(message.content)
        ? message.content.map((part) => part.text ?? "").join("")
        : "";
  return message.tool_calls ? `${content}${JSON.stringify(message.tool_calls)}` : content;
}

/**
 * A bounded, incremental summariser: the previous summary's lines, plus one line per folded user
 * message (its first 12 words). Over SUMMARY_WORDS words, the oldest lines go first — except lines
 * with a number (ids, amounts), as SUMMARY_PROMPT asks to keep every fact the user stated.
 */
function summarise(body: ChatCompletionRequestBody): string {
  const text = textOf(body.messages[1] ?? { role: "user", content: "" });
  const [previousPart = "", newPart = ""] = text.split("\n\nNew part of the conversation:\n");
  const previous = previousPart.replace(/^Previous summary:\n/, "");
  const lines = previous === "(none)" ? [] : previous.split("\n").filter((line) => line.trim());
  for (const line of newPart.split("\n")) {
    if (line.startsWith("User: ")) lines.push(`- The user said: ${line.slice(6).split(/\s+/).slice(0, 12).join(" ")}`);
  }
  const words = () => lines.reduce((sum, line) => sum + line.split(/\s+/).length, 0);
  while (words() > SUMMARY_WORDS) {
    const oldest = lines.findIndex((line) => !/\d/.test(line));
    if (oldest < 0) break;
    lines.splice(oldest, 1);
  }
  return lines.join("\n");
}

const lookupParameters = {
  type: "object",
  properties: { query: { type: "string", minLength: 1 } },
  required: ["query"],
  additionalProperties: false,
};

function lookupTool(turns: Turn[]): ToolDefinition {
  const byQuery = new Map(turns.map((turn) => [turn.query, turn.lookup]));
  return {
    name: "lookup",
    description:
      "Searches the team's knowledge base (orders, tickets, documents) and returns the best matching snippets.",
    parameters: lookupParameters,
    handler: (args) => byQuery.get(String(args.query)) ?? { query: args.query, results: [] },
  };
}

/** Counts prompts exactly as memory does: each message, the reply priming, the tool schemas. */
function requestCounter(counter: TokenCounter) {
  const cache = new Map<string, number>();
  const cached = (key: string, count: () => number) => {
    let tokens = cache.get(key);
    if (tokens === undefined) cache.set(key, (tokens = count()));
    return tokens;
  };
  return (body: ChatCompletionRequestBody): number => {
    const messages = body.messages.map((message) => {
      const key = JSON.stringify(message);
      return cached(key, () => counter.message(message as Message));
    });
    const tools = body.tools?.length
      ? cached(JSON.stringify(body.tools), () => counter.tools(body.tools as ToolSpec[]))
      : 0;
    return promptTokens(messages) + tools;
  };
}

/** Sums the usage the server reports for every reply that passes through. */
function usageCounting(model: ChatModel, total: { promptTokens: number }): ChatModel {
  return {
    name: model.name,
    async chat(request) {
      const response = await model.chat(request);
      total.promptTokens += response.usage.promptTokens;
      return response;
    },
  };
}

interface RequestRecord {
  turn: number;
  summary: boolean;
  tokens: number;
}

interface ConversationRun {
  requests: RequestRecord[];
  reportedPromptTokens: number;
  wallMs: number;
  /** The first request of the last turn, as the server received it. */
  lastTurnRequest: ChatCompletionRequestBody | undefined;
  lastAnswer: string;
}

async function runConversation(
  server: ScriptedModelServer,
  counter: TokenCounter,
  turns: Turn[],
  store: SqliteStore,
  withMemory: boolean,
): Promise<ConversationRun> {
  const current = { turn: 0 };
  server.setScript(conversationScript(turns, current));
  server.requests.length = 0;
  const reported = { promptTokens: 0 };
  const model = usageCounting(
    createOpenAIModel({ model: MODEL, baseURL: server.url, apiKey: "not-needed", stream: false }),
    reported,
  );
  const tools = createToolRegistry([lookupTool(turns), ...createMemoryTools(sqlitePortOf(store))]);
  const memory = withMemory
    ? createMemory({ store: sqlitePortOf(store), model, counter, budgetTokens: BUDGET })
    : undefined;
  const count = requestCounter(counter);
  const history: Message[] = [];
  const requests: RequestRecord[] = [];
  let lastTurnRequest: ChatCompletionRequestBody | undefined;
  let lastAnswer = "";
  let countingMs = 0;

  collectGarbage();
  const started = performance.now();
  for (const turn of turns) {
    current.turn = turn.index;
    const added: Message[] = [];
    const result = await runAgent(
      { model, tools, memory },
      {
        input: turn.user,
        sessionId: SESSION,
        userId: USER,
        ...(withMemory ? {} : { history: [...history] }),
        onEvent: (event) => {
          if (event.type === "message") added.push(event.message);
        },
      },
    );
    checkTurn(result, turn, withMemory);
    history.push(...added);
    lastAnswer = result.output;
    // Count as we go (the naive run's request bodies add up to hundreds of megabytes), off the clock.
    const counting = performance.now();
    for (const { body } of server.requests) {
      const summary = isSummaryRequest(body);
      if (turn.index === TURNS && !summary && !lastTurnRequest) lastTurnRequest = body;
      requests.push({ turn: turn.index, summary, tokens: count(body) });
    }
    server.requests.length = 0;
    countingMs += performance.now() - counting;
  }
  return {
    requests,
    reportedPromptTokens: reported.promptTokens,
    wallMs: performance.now() - started - countingMs,
    lastTurnRequest,
    lastAnswer,
  };
}

function checkTurn(result: RunResult, turn: Turn, withMemory: boolean): void {
  const calls = turn.index === 1 ? 2 : 1;
  const ok =
    result.stopReason === "final" &&
    result.steps === 2 &&
    result.toolCalls.length === calls &&
    result.toolCalls.every((call) => call.status === "success");
  if (!ok)
    throw new Error(
      `turn ${turn.index} (${withMemory ? "memory" : "naive"}) did not go as scripted: ${JSON.stringify({ ...result, usage: undefined })}`,
    );
}

async function measureConversation(server: ScriptedModelServer, counter: TokenCounter, directory: string) {
  const turns = conversationTurns();
  const store = openSqliteStore(join(directory, "conversation.db"));
  const naiveStore = openSqliteStore(":memory:"); // only for the naive run's remember tool
  let withMemory: ConversationRun;
  let naive: ConversationRun;
  let storedMessages: number;
  let factsStored: number;
  try {
    withMemory = await runConversation(server, counter, turns, store, true);
    naive = await runConversation(server, counter, turns, naiveStore, false);
    storedMessages = store.db
      .prepare("SELECT count(*) FROM messages WHERE session_id = ?")
      .pluck()
      .get(SESSION) as number;
    factsStored = store.db.prepare("SELECT count(*) FROM facts WHERE user_id = ?").pluck().get(USER) as number;
  } finally {
    store.close();
    naiveStore.close();
  }

  const sum = (records: RequestRecord[]) => records.reduce((total, record) => total + record.tokens, 0);
  const max = (records: RequestRecord[]) => records.reduce((most, record) => Math.max(most, record.tokens), 0);
  const agentRequests = withMemory.requests.filter((record) => !record.summary);
  const summaryRequests = withMemory.requests.filter((record) => record.summary);
  const memoryTotal = sum(withMemory.requests);
  const naiveTotal = sum(naive.requests);
  const share = memoryTotal / naiveTotal;
  const reportedShare = withMemory.reportedPromptTokens / naive.reportedPromptTokens;
  const largest = max(withMemory.requests);
  const naiveLargest = max(naive.requests);
  const foldTurns = summaryRequests.map((record) => record.turn);
  const overWindow = naive.requests.filter((record) => record.tokens > 128_000).length;

  // Where the fact is at turn 200: the summary in the system message, facts in the notes block the request carries.
  const lastRequest = withMemory.lastTurnRequest;
  const system = lastRequest?.messages[0]?.role === "system" ? textOf(lastRequest.messages[0]) : "";
  const summarySection = /## Earlier in this conversation \(summary\)\n([\s\S]*?)(?:\n\n## |$)/.exec(system)?.[1] ?? "";
  const request = lastRequest?.messages.findLast((message) => message.role === "user");
  const requestText = request ? textOf(request) : "";
  const notesSection = requestText.includes(NOTES_START)
    ? requestText.slice(requestText.indexOf(NOTES_START), requestText.indexOf(NOTES_END))
    : "";
  const inSummary = summarySection.includes(ACCOUNT);
  const inFacts = notesSection.includes(ACCOUNT);
  const inMessages = (lastRequest?.messages.slice(1) ?? [])
    .filter((message) => message !== request)
    .some((message) => textOf(message).includes(ACCOUNT));
  const where =
    [inSummary && "the summary", inFacts && "the injected facts", inMessages && "the recent messages"]
      .filter(Boolean)
      .join(" and ") || "nowhere";
  const present = inSummary || inFacts || inMessages;

  const rows: Row[] = [
    {
      label: `conversation: largest prompt, memory (any of ${withMemory.requests.length} requests)`,
      value: largest,
      unit: "tokens",
    },
    { label: "  headroom under the budget", value: BUDGET - largest, unit: "tokens" },
    {
      label: `  largest of the ${summaryRequests.length} summary requests`,
      value: max(summaryRequests),
      unit: "tokens",
    },
    { label: "  total prompt tokens, memory (summary calls included)", value: memoryTotal, unit: "tokens" },
    { label: "  total prompt tokens, naive full history", value: naiveTotal, unit: "tokens" },
    { label: "  memory / naive (counted)", value: share * 100, unit: "%" },
    { label: "  memory / naive (server-reported usage, chars/4)", value: reportedShare * 100, unit: "%" },
    { label: "  largest naive request", value: naiveLargest, unit: "tokens" },
    { label: "  naive requests over gpt-4o-mini's 128k window", value: overWindow, unit: "requests" },
    { label: `  wall time of the ${TURNS} turns, memory`, value: withMemory.wallMs / 1000, unit: "s" },
    { label: `  wall time of the ${TURNS} turns, naive`, value: naive.wallMs / 1000, unit: "s" },
  ];
  const targets: Target[] = [
    {
      label: `largest prompt <= budget (${BUDGET} tokens)`,
      pass: largest <= BUDGET,
      detail: `${largest} tokens (agent requests up to ${max(agentRequests)}, summary requests up to ${max(summaryRequests)})`,
    },
    {
      label: `total prompt tokens <= ${TARGET_TOKEN_SHARE * 100}% of naive`,
      pass: share <= TARGET_TOKEN_SHARE,
      detail: `${memoryTotal} of ${naiveTotal} tokens = ${sig3(share * 100)}% (server-reported estimate: ${withMemory.reportedPromptTokens} of ${naive.reportedPromptTokens} = ${sig3(reportedShare * 100)}%)`,
    },
    {
      label: `fact from turn 1 present at turn ${TURNS}`,
      pass: present,
      detail: `'${ACCOUNT}' is in ${where}; the scripted model answered '${withMemory.lastAnswer}'`,
    },
  ];
  const data = {
    turns: TURNS,
    budgetTokens: BUDGET,
    model: MODEL,
    encoding: counter.encoding,
    storedMessages,
    factsStored,
    memory: {
      requests: withMemory.requests.length,
      summaryRequests: summaryRequests.length,
      foldTurns,
      largestPromptTokens: largest,
      largestAgentPromptTokens: max(agentRequests),
      largestSummaryPromptTokens: max(summaryRequests),
      totalPromptTokens: memoryTotal,
      summaryPromptTokens: sum(summaryRequests),
      reportedPromptTokens: withMemory.reportedPromptTokens,
      wallMs: withMemory.wallMs,
      promptTokensPerTurn: perTurn(withMemory.requests),
    },
    naive: {
      requests: naive.requests.length,
      largestPromptTokens: naiveLargest,
      requestsOver128kWindow: overWindow,
      totalPromptTokens: naiveTotal,
      reportedPromptTokens: naive.reportedPromptTokens,
      wallMs: naive.wallMs,
      promptTokensPerTurn: perTurn(naive.requests),
    },
    shareCounted: share,
    shareReported: reportedShare,
    factAtLastTurn: { inSummary, inFacts, inMessages, answer: withMemory.lastAnswer },
  };
  return { rows, targets, data };
}

function perTurn(records: RequestRecord[]): number[] {
  const totals = new Array<number>(TURNS).fill(0);
  for (const record of records) totals[record.turn - 1] = (totals[record.turn - 1] ?? 0) + record.tokens;
  return totals;
}

// ---- realistic stored messages for 2 and 3 -----------------------------------------------------

let callCounter = 0;

function toolCallsOf(random: () => number, count: number, topic: readonly string[]): ToolCall[] {
  return Array.from({ length: count }, () => ({
    id: `call_${++callCounter}`,
    type: "function" as const,
    function: {
      name: pick(random, ["lookup", "search_orders", "get_ticket", "calendar"]),
      arguments: JSON.stringify({ query: topic.slice(0, 3).join(" ") }),
    },
  }));
}

/** A tool message as the executor renders it: the envelope as compact JSON. */
function toolMessage(random: () => number, call: ToolCall, chars: number, topic: readonly string[]): Message {
  const data = lookupResult(random, call.function.name, chars, topic);
  return { role: "tool", tool_call_id: call.id, content: JSON.stringify({ status: "success", data }).slice(0, 4_000) };
}

/** One turn: the user's message, `steps` tool steps (an assistant message and its results), the answer. */
function turnMessages(random: () => number, steps: number): Message[] {
  const topic = topicOf(random);
  const messages: Message[] = [{ role: "user", content: prose(random, 15, 80, topic) }];
  for (let step = 0; step < steps; step++) messages.push(...toolStep(random, random() < 0.2 ? 2 : 1, topic));
  messages.push({ role: "assistant", content: prose(random, 30, 110, topic) });
  return messages;
}

/** A turn of exactly `size` messages: the user's, one-call tool steps, and the answer if one is left. */
function lastTurn(random: () => number, size: number): Message[] {
  const topic = topicOf(random);
  const messages: Message[] = [{ role: "user", content: prose(random, 15, 80, topic) }];
  while (messages.length + 2 <= size) messages.push(...toolStep(random, 1, topic));
  if (messages.length < size) messages.push({ role: "assistant", content: prose(random, 30, 110, topic) });
  return messages;
}

function toolStep(random: () => number, calls: number, topic: readonly string[]): Message[] {
  const toolCalls = toolCallsOf(random, calls, topic);
  // Tool results vary a lot: mostly short, sometimes a full page.
  const size = () => (random() < 0.7 ? 200 + Math.floor(random() * 1_000) : 1_500 + Math.floor(random() * 2_400));
  return [
    { role: "assistant", content: null, tool_calls: toolCalls },
    ...toolCalls.map((call) => toolMessage(random, call, size(), topic)),
  ];
}

function runState(runId: string, sessionId: string, messages: Message[]): RunState {
  return {
    runId,
    sessionId,
    userId: USER,
    history: [],
    messages,
    steps: 0,
    usage: emptyUsage(),
    toolCalls: [],
    toolState: newToolRunState(),
    lastResults: {},
  };
}

/** What the loop does in one unit: memory's writes committed through its store in one record. */
async function inUnit(memory: Memory, body: (unit: RunUnit) => void): Promise<void> {
  const unit = createRunUnit();
  body(unit);
  await unit.commit(memory.store);
}

async function endRun(memory: Memory, run: RunState): Promise<void> {
  const result: RunResult = {
    runId: run.runId,
    sessionId: run.sessionId,
    output: "",
    stopReason: "final",
    steps: run.steps,
    usage: run.usage,
    toolCalls: [],
  };
  await inUnit(memory, (unit) => memory.record({ type: "run_end", runId: run.runId, result }, unit));
}

// ---- 2. context assembly with 1,000 stored messages --------------------------------------------

const assemblyTools: ToolSpec[] = ["lookup", "search_orders", "get_ticket", "calendar", "remember", "forget"].map(
  (name) => ({
    type: "function",
    function: { name, description: `The ${name.replace("_", " ")} tool of the team.`, parameters: lookupParameters },
  }),
);

/**
 * Fills a session the way runs do: each run commits its messages and asks for the context before
 * each model call, so folds happen as they would have. The last run is left open: its next step's
 * context is what the measurement assembles.
 */
async function fillSession(memory: Memory, sessionId: string): Promise<{ current: RunState; contextCalls: number }> {
  const random = seeded(424242);
  const request = { systemPrompt: DEFAULT_SYSTEM_PROMPT, tools: assemblyTools };
  let committed = 0;
  let contextCalls = 0;
  let runs = 0;
  const open = async (messages: Message[]) => {
    const run = runState(`run_fill_${++runs}`, sessionId, []);
    await inUnit(memory, (unit) =>
      memory.record(
        { type: "run_start", runId: run.runId, sessionId, userId: USER, input: String(messages[0]?.content) },
        unit,
      ),
    );
    return run;
  };
  const commit = async (run: RunState, messages: Message[]) => {
    await inUnit(memory, (unit) => memory.commit(run, messages, unit));
    run.messages.push(...messages);
    committed += messages.length;
  };
  const context = async (run: RunState) => {
    run.steps++;
    contextCalls++;
    await memory.context(run, request);
  };
  // The open run: its request and two tool steps so far (6 messages).
  const topic = topicOf(random);
  const currentMessages: Message[] = [
    { role: "user", content: prose(random, 30, 60, topic) },
    ...toolStep(random, 1, topic),
    ...toolStep(random, 2, topic),
  ];
  while (committed < STORED_MESSAGES - currentMessages.length) {
    const left = STORED_MESSAGES - currentMessages.length - committed;
    // Turns of 2 to 8 messages; the last one is cut to end exactly on the count.
    const messages =
      left <= 8 ? lastTurn(random, left) : turnMessages(random, random() < 0.15 ? 0 : random() < 0.75 ? 1 : 2);
    const run = await open(messages);
    await commit(run, messages.slice(0, 1));
    for (let index = 1; index < messages.length; ) {
      await context(run);
      const message = messages[index] as Message;
      const results = message.role === "assistant" && message.tool_calls ? message.tool_calls.length : 0;
      await commit(run, [message]);
      if (results > 0) await commit(run, messages.slice(index + 1, index + 1 + results));
      index += 1 + results;
    }
    await endRun(memory, run);
  }
  const current = await open(currentMessages);
  await commit(current, currentMessages.slice(0, 1));
  await context(current);
  await commit(current, currentMessages.slice(1, 3));
  await context(current);
  await commit(current, currentMessages.slice(3));
  // The call the loop makes next, so any fold it needs happens here and not in the timed calls.
  await context(current);
  return { current, contextCalls };
}

async function measureContextAssembly(server: ScriptedModelServer, counter: TokenCounter, directory: string) {
  const path = join(directory, "assembly.db");
  const sessionId = "slack:T1:C2:1700000000.000200";
  server.setScript((body) =>
    isSummaryRequest(body)
      ? { content: summarise(body) }
      : { error: { status: 500, message: "only summaries in this part" } },
  );
  server.requests.length = 0;
  const model = createOpenAIModel({ model: MODEL, baseURL: server.url, apiKey: "not-needed", stream: false });

  // Fill, as runs would have.
  let store = openSqliteStore(path);
  for (const fact of [FACT, "Prefers answers in short bullet points.", "Works in the logistics team, north region."])
    store.addFact(USER, "user", fact);
  const filled = await fillSession(
    createMemory({ store: sqlitePortOf(store), model, counter, budgetTokens: BUDGET }),
    sessionId,
  );
  const fillFolds = server.requests.filter((request) => isSummaryRequest(request.body)).length;
  const stored = store.db
    .prepare("SELECT count(*) FROM messages WHERE session_id = ?")
    .pluck()
    .get(sessionId) as number;
  const summaries = store.db
    .prepare("SELECT count(*) FROM summaries WHERE session_id = ?")
    .pluck()
    .get(sessionId) as number;
  const lastSummary = store.db
    .prepare("SELECT last_message_id FROM summaries WHERE session_id = ? ORDER BY id DESC LIMIT 1")
    .pluck()
    .get(sessionId) as number | undefined;
  const unsummarised = store.db
    .prepare("SELECT count(*) FROM messages WHERE session_id = ? AND id > ?")
    .pluck()
    .get(sessionId, lastSummary ?? 0) as number;
  store.close();
  if (stored !== STORED_MESSAGES) throw new Error(`the session has ${stored} stored messages, not ${STORED_MESSAGES}`);
  server.requests.length = 0;

  const request = { systemPrompt: DEFAULT_SYSTEM_PROMPT, tools: assemblyTools };
  const cold: number[] = [];
  const warm: number[] = [];
  const openMs: number[] = [];
  let contextMessages = 0;
  let contextTokens = 0;
  for (let round = 0; round < 1 + MEASURED_ROUNDS; round++) {
    collectGarbage();
    const opened = performance.now();
    store = openSqliteStore(path);
    const memory = createMemory({ store: sqlitePortOf(store), model, counter, budgetTokens: BUDGET });
    const run = { ...filled.current }; // the open run, as a restarted process would carry on with it
    const started = performance.now();
    const messages = await memory.context(run, request);
    const coldMs = performance.now() - started;
    contextMessages = messages.length;
    contextTokens = promptTokens(messages.map((message) => counter.message(message))) + counter.tools(assemblyTools);
    for (let i = 0; i < WARMUP_CALLS; i++) await memory.context(run, request);
    const times: number[] = [];
    for (let i = 0; i < WARM_CALLS; i++) {
      const start = performance.now();
      await memory.context(run, request);
      times.push(performance.now() - start);
    }
    store.close();
    if (round === 0) continue; // warm-up round
    openMs.push(started - opened);
    cold.push(coldMs);
    warm.push(statsOf(times).median);
  }

  // A diagnostic pass (not in the figures above): the same calls with a counter that times itself.
  collectGarbage();
  store = openSqliteStore(path);
  const timed = timedCounter(counter);
  const diagnostic = createMemory({ store: sqlitePortOf(store), model, counter: timed.counter, budgetTokens: BUDGET });
  const diagnosticRun = { ...filled.current };
  let started = performance.now();
  await diagnostic.context(diagnosticRun, request);
  const coldSplit = { totalMs: performance.now() - started, counterMs: timed.spent.ms, tokens: timed.spent.tokens };
  for (let i = 0; i < WARMUP_CALLS; i++) await diagnostic.context(diagnosticRun, request);
  Object.assign(timed.spent, { ms: 0, calls: 0, tokens: 0 });
  started = performance.now();
  for (let i = 0; i < WARM_CALLS; i++) await diagnostic.context(diagnosticRun, request);
  const warmSplit = {
    totalMs: (performance.now() - started) / WARM_CALLS,
    counterMs: timed.spent.ms / WARM_CALLS,
    counterCalls: timed.spent.calls / WARM_CALLS,
    tokens: timed.spent.tokens / WARM_CALLS,
  };
  store.close();
  const foldsWhileMeasuring = server.requests.filter((request) => isSummaryRequest(request.body)).length;
  server.requests.length = 0;

  const coldStats = statsOf(cold);
  const warmStats = statsOf(warm);
  const rows: Row[] = [
    { label: `context assembly, warm, per call (${STORED_MESSAGES} stored messages)`, value: warmStats, unit: "ms" },
    { label: "  cold: first call after opening the store", value: coldStats, unit: "ms" },
    { label: "  opening the store (openSqliteStore + createMemory)", value: statsOf(openMs), unit: "ms" },
    { label: `  assembled context: ${contextMessages} messages`, value: contextTokens, unit: "tokens" },
    // From one extra pass with a self-timing counter: shares, since one pass is noisier than the rounds above.
    {
      label: "  diagnostic pass, warm: share inside the token counter",
      value: (100 * warmSplit.counterMs) / warmSplit.totalMs,
      unit: "%",
    },
    { label: "  diagnostic pass, warm: tokens counted per call", value: warmSplit.tokens, unit: "tokens" },
    {
      label: "  diagnostic pass, warm: time outside the token counter",
      value: warmSplit.totalMs - warmSplit.counterMs,
      unit: "ms",
    },
    {
      label: "  diagnostic pass, cold: share inside the token counter",
      value: (100 * coldSplit.counterMs) / coldSplit.totalMs,
      unit: "%",
    },
  ];
  const targets: Target[] = [
    {
      label: `context assembly <= ${TARGET_CONTEXT_MS} ms per step`,
      pass: warmStats.median <= TARGET_CONTEXT_MS,
      detail: `warm ${sig3(warmStats.median)} ms, cold ${sig3(coldStats.median)} ms; ${sig3((100 * warmSplit.counterMs) / warmSplit.totalMs)}% of a warm call is token counting (${Math.round(warmSplit.tokens)} tokens per call); ${stored} messages stored, ${summaries} folds while filling, ${unsummarised} after the latest summary, ${foldsWhileMeasuring} folds while measuring`,
    },
  ];
  const data = {
    storedMessages: stored,
    contextCallsWhileFilling: filled.contextCalls,
    foldsWhileFilling: fillFolds,
    summaries,
    messagesAfterLatestSummary: unsummarised,
    foldsWhileMeasuring,
    contextMessages,
    contextTokens,
    diagnosticWarmPerCall: warmSplit,
    diagnosticCold: coldSplit,
    warmPerCallMs: warmStats,
    coldMs: coldStats,
    openStoreMs: statsOf(openMs),
    warmCallsPerRound: WARM_CALLS,
    measuredRounds: MEASURED_ROUNDS,
  } satisfies Record<string, number | Stats | Record<string, number>>;
  return { rows, targets, data };
}

/** The counter, timed: how much of a call is spent counting tokens. */
function timedCounter(counter: TokenCounter) {
  const spent = { ms: 0, calls: 0, tokens: 0 };
  const timed =
    <Args extends unknown[]>(count: (...args: Args) => number) =>
    (...args: Args): number => {
      const started = performance.now();
      const tokens = count(...args);
      spent.ms += performance.now() - started;
      spent.calls++;
      spent.tokens += tokens;
      return tokens;
    };
  const wrapped: TokenCounter = {
    encoding: counter.encoding,
    text: timed(counter.text),
    message: timed(counter.message),
    tools: timed(counter.tools),
  };
  return { counter: wrapped, spent };
}

// ---- 3. append throughput ----------------------------------------------------------------------

/** Messages of a few hundred characters: user, assistant (some with tool calls) and tool. */
function appendMessages(count: number, seed: number): Message[] {
  const random = seeded(seed);
  return Array.from({ length: count }, (): Message => {
    const topic = topicOf(random);
    const roll = random();
    if (roll < 0.35) return { role: "user", content: prose(random, 30, 90, topic) };
    if (roll < 0.5) return { role: "assistant", content: null, tool_calls: toolCallsOf(random, 1, topic) };
    if (roll < 0.7) return { role: "assistant", content: prose(random, 30, 90, topic) };
    return {
      role: "tool",
      tool_call_id: `call_${++callCounter}`,
      content: JSON.stringify({
        status: "success",
        data: lookupResult(random, "q", 150 + Math.floor(random() * 350), topic),
      }),
    };
  });
}

type AppendVariant = "commit" | "count" | "append" | "batched";

async function measureAppend(counter: TokenCounter, directory: string) {
  const warmup = appendMessages(APPEND_WARMUP, 7);
  const messages = appendMessages(APPEND_MESSAGES, 11);
  const averageChars = messages.reduce((sum, message) => sum + JSON.stringify(message).length, 0) / messages.length;
  const entriesOf = (list: Message[]) => list.map((message) => ({ message, tokens: counter.message(message) }));
  const warmupEntries = entriesOf(warmup);
  const entries = entriesOf(messages);
  const averageTokens = entries.reduce((sum, entry) => sum + entry.tokens, 0) / entries.length;
  // A model that must never be called: commits do not fold.
  const model: ChatModel = { name: "unused", chat: () => Promise.reject(new Error("no model calls while appending")) };
  let files = 0;

  /** Messages per second for one variant over `list`, in a fresh DB file. */
  async function timeVariant(
    variant: AppendVariant,
    list: Message[],
    listEntries: Array<{ message: Message; tokens: number }>,
  ): Promise<number> {
    collectGarbage();
    if (variant === "count") {
      const started = performance.now();
      let tokens = 0;
      for (const message of list) tokens += counter.message(message);
      const ms = performance.now() - started;
      if (tokens <= 0) throw new Error("nothing counted");
      return (list.length * 1000) / ms;
    }
    const path = join(directory, `append-${++files}.db`);
    const store = openSqliteStore(path);
    try {
      const sessionId = `slack:T1:C3:${files}`;
      const runId = `run_append_${files}`;
      store.startRun({ runId, sessionId, userId: USER, input: "append" });
      const memory = createMemory({ store: sqlitePortOf(store), model, counter, budgetTokens: BUDGET });
      const run = runState(runId, sessionId, []);
      const started = performance.now();
      if (variant === "commit")
        for (const message of list) await inUnit(memory, (unit) => memory.commit(run, [message], unit));
      else if (variant === "append") for (const entry of listEntries) store.appendMessages(sessionId, runId, [entry]);
      else
        for (let i = 0; i < listEntries.length; i += BATCH)
          store.appendMessages(sessionId, runId, listEntries.slice(i, i + BATCH));
      const ms = performance.now() - started;
      const stored = store.db
        .prepare("SELECT count(*) FROM messages WHERE session_id = ?")
        .pluck()
        .get(sessionId) as number;
      if (stored !== list.length) throw new Error(`${variant}: ${stored} of ${list.length} messages stored`);
      return (list.length * 1000) / ms;
    } finally {
      store.close();
      for (const suffix of ["", "-wal", "-shm"]) rmSync(`${path}${suffix}`, { force: true });
    }
  }

  const variants: AppendVariant[] = ["commit", "append", "batched", "count"];
  const rates: Record<AppendVariant, number[]> = { commit: [], count: [], append: [], batched: [] };
  for (const variant of variants) await timeVariant(variant, warmup, warmupEntries);
  for (let round = 0; round < APPEND_ROUNDS; round++) {
    // Rotate which variant goes first, so a slow moment of the machine is spread over all of them.
    const order = variants.map((_, i) => variants[(i + round) % variants.length] as AppendVariant);
    for (const variant of order) rates[variant].push(await timeVariant(variant, messages, entries));
  }

  const commit = statsOf(rates.commit);
  const count = statsOf(rates.count);
  const append = statsOf(rates.append);
  const batched = statsOf(rates.batched);
  // Where a commit's time goes, per message: counting, the store's transaction, and the rest.
  const usPer = (rate: number) => 1e6 / rate;
  const rows: Row[] = [
    { label: "memory.commit, 1 message per call (own transaction, counted)", value: commit, unit: "msgs/s" },
    { label: `  store.appendMessages, 1 per transaction (tokens precomputed)`, value: append, unit: "msgs/s" },
    { label: `  store.appendMessages, ${BATCH} per transaction`, value: batched, unit: "msgs/s" },
    { label: "  token counting alone (counter.message)", value: count, unit: "msgs/s" },
    { label: "  per message: memory.commit", value: usPer(commit.median), unit: "µs" },
    {
      label: "  per message: counting alone / store append alone",
      value: usPer(count.median),
      unit: `µs / ${sig3(usPer(append.median))} µs`,
    },
  ];
  const targets: Target[] = [
    {
      label: `append >= ${TARGET_APPEND_PER_S} msgs/s`,
      pass: commit.median >= TARGET_APPEND_PER_S,
      detail: `memory.commit ${sig3(commit.median)} msgs/s (${sig3(usPer(commit.median))} µs each: counting ${sig3(usPer(count.median))} µs, store append ${sig3(usPer(append.median))} µs); messages average ${Math.round(averageChars)} characters, ${Math.round(averageTokens)} tokens`,
    },
  ];
  const data = {
    messages: APPEND_MESSAGES,
    averageChars,
    averageTokens,
    batch: BATCH,
    measuredRounds: APPEND_ROUNDS,
    commitPerSecond: commit,
    appendPerSecond: append,
    batchedPerSecond: batched,
    countPerSecond: count,
  } satisfies Record<string, number | Stats>;
  return { rows, targets, data };
}
