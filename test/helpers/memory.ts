// Shared set-up for the memory tests: a real SQLite file in a temp dir, the real token counter, the
// real openai SDK against the scripted model server, and checks that read recorded requests the way
// the server saw them.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect } from "vitest";
import { SUMMARY_PROMPT } from "../../src/agent/memory.js";
import { openSqliteStore, type SqliteStore, type SqliteStoreOptions } from "../../src/store/sqlite-store.js";
import { promptTokens, type TokenCounter } from "../../src/agent/tokens.js";
import type { Message, ToolSpec } from "../../src/agent/types.js";
import type {
  ChatCompletionRequestBody,
  RecordedRequest,
  ScriptedModelServer,
} from "../../src/testing/scripted-model-server.js";
import { closeServers, modelFor } from "./agent.js";

const directories: string[] = [];
const stores: SqliteStore[] = [];

/** A fresh database file in its own temp dir; removed by `removeDatabases`. */
export function databasePath(): string {
  const directory = mkdtempSync(join(tmpdir(), "glassbox-memory-"));
  directories.push(directory);
  return join(directory, "glassbox.db");
}

/** Opens a store that `removeDatabases` closes (a second connection to the same file is fine). */
export function openTestStore(path = databasePath(), options?: SqliteStoreOptions): SqliteStore {
  const store = openSqliteStore(path, options);
  stores.push(store);
  return store;
}

/** Call from afterEach: closes the stores opened by the test and deletes their files. */
export function removeDatabases(): void {
  for (const store of stores.splice(0)) if (store.db.open) store.close();
  for (const directory of directories.splice(0)) rmSync(directory, { recursive: true, force: true });
}

/** After each test of the calling file (or describe): the model servers closed, the stores closed and their files deleted. */
export function cleanUpAfterEach(): void {
  afterEach(async () => {
    await closeServers();
    removeDatabases();
  });
}

/** The model client the memory tests use (also for summaries). */
export const testModel = (server: ScriptedModelServer) => modelFor(server, { model: "gpt-4o-mini", maxRetries: 0 });

type SentMessage = ChatCompletionRequestBody["messages"][number];

/** A recorded message back in our Message shape, to count it the way memory does. */
export function toMessage(sent: SentMessage): Message {
  const content = typeof sent.content === "string" ? sent.content : null;
  if (sent.role === "assistant")
    return { role: "assistant", content, ...(sent.tool_calls ? { tool_calls: sent.tool_calls as never } : {}) };
  if (sent.role === "tool") return { role: "tool", content: content ?? "", tool_call_id: sent.tool_call_id ?? "" };
  return { role: sent.role as "user" | "system", content: content ?? "" };
}

/** Tokens of a recorded request, counted like memory counts them: messages, reply priming, tool schemas. */
export function requestTokens(counter: TokenCounter, request: RecordedRequest): number {
  const messages = request.body.messages.map((sent) => counter.message(toMessage(sent)));
  return promptTokens(messages) + counter.tools((request.body.tools ?? []) as ToolSpec[]);
}

export const isSummaryRequest = (body: ChatCompletionRequestBody) => body.messages[0]?.content === SUMMARY_PROMPT;

/**
 * The Chat Completions protocol: every assistant message with tool_calls is followed at once by one
 * tool message per call (in order, by tool_call_id), and no tool message stands anywhere else.
 */
export function expectValidProtocol(messages: SentMessage[], label = "request"): void {
  expect(messages[0]?.role, `${label}: starts with the system message`).toBe("system");
  for (let index = 0; index < messages.length; index++) {
    const message = messages[index] as SentMessage;
    if (message.role === "tool") {
      throw new Error(
        `${label}: tool message #${index} (${message.tool_call_id}) does not follow an assistant message that called it`,
      );
    }
    if (message.role !== "assistant" || !message.tool_calls?.length) continue;
    const ids = (message.tool_calls as Array<{ id: string }>).map((call) => call.id);
    const results = messages.slice(index + 1, index + 1 + ids.length);
    expect(
      results.map((result) => (result.role === "tool" ? result.tool_call_id : `<${result.role}>`)),
      `${label}: the results of assistant message #${index}`,
    ).toEqual(ids);
    index += ids.length;
  }
}

/** The text of every system message of a request, joined. */
export const systemTextOf = (body: ChatCompletionRequestBody) =>
  body.messages
    .filter((message) => message.role === "system")
    .map((message) => String(message.content))
    .join("\n");

/** Distinct words, so that token counts are realistic (a repeated word compresses to few tokens). */
export function prose(words: number, seed = 1): string {
  const vocabulary = [
    "invoice",
    "shipment",
    "warehouse",
    "customer",
    "refund",
    "parcel",
    "Berlin",
    "order",
    "delayed",
    "tracking",
    "supplier",
    "pallet",
    "courier",
    "address",
    "weight",
    "priority",
    "status",
    "ticket",
    "return",
    "label",
    "quantity",
    "discount",
  ];
  const out: string[] = [];
  let state = seed;
  for (let index = 0; index < words; index++) {
    state = (state * 1103515245 + 12345) % 2147483648;
    out.push(index % 7 === 6 ? String(state % 100000) : (vocabulary[state % vocabulary.length] as string));
  }
  return out.join(" ");
}
