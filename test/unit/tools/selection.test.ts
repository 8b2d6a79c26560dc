/**
 * Dynamic tool selection: every tool below the threshold; above it the relevant tools, the used
 * and requested ones, and list_tools, in registry order, deterministically. Ranking is checked on
 * the benchmark's 60 realistic tools (bench/fixtures/tools-60.ts).
 */
import { describe, expect, it } from "vitest";
import type { RunState } from "../../../src/agent/run.js";
import { emptyUsage } from "../../../src/agent/types.js";
import { executeToolCalls, newToolRunState } from "../../../src/tools/executor.js";
import { createToolRegistry, ToolDefinitionError } from "../../../src/tools/registry.js";
import { wordNet } from "../../../src/tools/lexicon.js";
import {
  createToolSelector,
  editDistance,
  formatsOf,
  LIST_TOOLS,
  stem,
  terms,
  type SelectionRun,
} from "../../../src/tools/selection.js";
import { expandShorthand } from "../../../src/tools/shorthand.js";
import type { AnyTool, ToolSpec } from "../../../src/tools/types.js";
import { tools60 } from "../../../bench/fixtures/tools-60.js";

const registry60 = createToolRegistry(tools60);
const names = (specs: ToolSpec[]) => specs.map((spec) => spec.function.name);
const userRun = (request: string, toolCalls: SelectionRun["toolCalls"] = []): SelectionRun => ({
  messages: [{ role: "user", content: request }],
  toolCalls,
});

function plainTool(
  name: string,
  description = `Does ${name.replace(/_/g, " ")}.`,
  extra: Partial<AnyTool> = {},
): AnyTool {
  return { name, description, parameters: { type: "object", properties: {} }, handler: () => ({ ok: true }), ...extra };
}
const plainTools = (count: number) => Array.from({ length: count }, (_, index) => plainTool(`tool_${index}`));

/** list_tools' answer, run through the real executor as the model would call it. */
async function callListTools(tools: ReturnType<typeof createToolSelector>["tools"], args: Record<string, unknown>) {
  const outcome = await executeToolCalls(
    [{ id: "call_1", type: "function", function: { name: LIST_TOOLS, arguments: JSON.stringify(args) } }],
    { registry: tools, maxResultChars: 100_000 },
    { runId: "run_1", sessionId: "session_1", userId: "user_1", state: newToolRunState(), emit: () => undefined },
  );
  const envelope = outcome.records[0]?.envelope;
  if (envelope?.status !== "success") throw new Error(`list_tools failed: ${JSON.stringify(envelope)}`);
  return { data: envelope.data as { tools: unknown[]; note?: string }, content: outcome.records[0]?.content ?? "" };
}

describe("at or below the threshold", () => {
  it("sends every tool, unchanged, and registers no list_tools", () => {
    const registry = createToolRegistry(plainTools(20));
    const selector = createToolSelector(registry, { threshold: 20 });
    expect(selector.active).toBe(false);
    expect(selector.tools).toBe(registry);
    expect(selector.select({ text: "tool 3", usedTools: [] })).toBe(registry.specs());
    expect(selector.selectForRun(userRun("nothing in common"))).toBe(registry.specs());
    expect(selector.tools.get(LIST_TOOLS)).toBeUndefined();
  });

  it("selects once there is one tool more than the threshold", () => {
    const selector = createToolSelector(createToolRegistry(plainTools(21)), { threshold: 20 });
    expect(selector.active).toBe(true);
    expect(selector.tools.names()).toHaveLength(22);
    expect(names(selector.select({ text: "nothing in common" }))).toEqual([LIST_TOOLS]);
  });

  it("defaults to a threshold of 20", () => {
    expect(createToolSelector(createToolRegistry(plainTools(20))).active).toBe(false);
    expect(createToolSelector(createToolRegistry(plainTools(21))).active).toBe(true);
  });
});

describe("above the threshold", () => {
  const selector = createToolSelector(registry60);

  it("sends the tools a request needs and leaves unrelated ones out", () => {
    const sent = names(selector.selectForRun(userRun("please cancel my order 20240315001, I ordered the wrong size")));
    expect(sent).toContain("cancel_order");
    expect(sent).toContain(LIST_TOOLS);
    for (const unrelated of [
      "get_weather_forecast",
      "deploy_service",
      "translate_text",
      "run_sql_query",
      "create_calendar_event",
    ]) {
      expect(sent).not.toContain(unrelated);
    }
    expect(sent.length).toBeLessThan(tools60.length / 3); // the default limit is 12, plus the tools the best ones lead to
  });

  it.each([
    ["is it going to rain in Paris tomorrow?", "get_weather_forecast"],
    ["roll back the checkout deployment in production", "rollback_deployment"],
    ["translate 'thank you for your order' into French", "translate_text"],
    ["what's the status of ticket TCK-4412", "get_ticket"],
    ["how many kilometers is 10 miles", "convert_units"],
    ["share the Q3 report with ana@acme.com as an editor", "share_file"],
  ])("%s -> %s", (request, tool) => {
    expect(names(selector.selectForRun(userRun(request)))).toContain(tool);
    // Top two, not first: the lexicon's reading of other words ("going": leave) may come first.
    expect(selector.rank(request).slice(0, 2)).toContain(tool);
  });

  it("finds a tool through a word none of the tools uses, by what the word means (WordNet)", () => {
    // No tool says "chilly"; WordNet relates it to cold and temperature.
    expect(
      wordNet()
        ?.related("parcels")
        .map((related) => related.word),
    ).toContain("package");
    expect(selector.rank("how chilly is it in Oslo").slice(0, 2)).toEqual([
      "get_current_weather",
      "get_weather_forecast",
    ]);
    const vocabulary = new Set(tools60.flatMap((tool) => terms(`${tool.name} ${tool.description}`)));
    expect(terms("how chilly is it in Oslo").filter((term) => vocabulary.has(term))).toEqual([]);
  });

  it("reads a word made with re- as the word (resend: send)", () => {
    expect(selector.rank("resend it to ana")[0]).toBe("send_email");
  });

  it("matches identifiers by the shape of the parameter examples", () => {
    expect(formatsOf("what about TCK-9001 and #random, search-api and 20240101001?")).toEqual([
      "format:TCK-9",
      "format:#a",
      "format:a-a",
      "format:11digits",
    ]);
    expect(formatsOf("plain words, 3pm and Berlin")).toEqual([]);
    // "TCK-9001" is shaped like get_ticket's example TCK-4412; "#random" like #eng-announcements.
    expect(selector.rank("what about TCK-9001").slice(0, 3)).toEqual(
      expect.arrayContaining(["get_ticket", "update_ticket", "add_ticket_comment"]),
    );
    expect(selector.rank("anything for #random?")[0]).toBe("post_channel_message");
  });

  it("brings along the tools that need what one of the two best tools gives", () => {
    // get_order_status returns the tracking number that track_shipment requires.
    const request = "status of order 20240315001";
    expect(selector.rank(request).slice(0, 2)).toContain("get_order_status");
    expect(names(createToolSelector(registry60, { limit: 2 }).select({ text: request }))).toContain("track_shipment");
  });

  it("sends at most `limit` ranked tools when maxLimit is no larger", () => {
    const small = createToolSelector(registry60, { limit: 3, maxLimit: 3 });
    const request = "order shipping invoice payment refund ticket calendar email file deploy";
    expect(selector.rank(request).length).toBeGreaterThan(3);
    expect(names(small.select({ text: request }))).toEqual(
      registry60
        .names()
        .filter((name) => small.rank(request).slice(0, 3).includes(name))
        .concat(LIST_TOOLS),
    );
  });

  it("sends more than `limit` ranked tools, up to maxLimit, only while they score close to the best", () => {
    const request = "order shipping invoice payment refund ticket calendar email file deploy";
    const ranked = selector.rank(request);
    expect(ranked.length).toBeGreaterThan(8);
    const sentRanked = (options: { limit: number; maxLimit: number; closeScore: number }) =>
      names(createToolSelector(registry60, options).select({ text: request })).filter((name) => ranked.includes(name));
    // every ranked tool scores at least 0% of the best: maxLimit decides
    expect(sentRanked({ limit: 3, maxLimit: 8, closeScore: 0 })).toEqual(expect.arrayContaining(ranked.slice(0, 8)));
    // no tool scores more than the best: limit decides (the tools the best two lead to may come along)
    const atLimit = sentRanked({ limit: 3, maxLimit: 8, closeScore: 1.01 });
    expect(atLimit).toEqual(expect.arrayContaining(ranked.slice(0, 3)));
    expect(atLimit.length).toBeLessThan(sentRanked({ limit: 3, maxLimit: 8, closeScore: 0 }).length);
    // a request with one clear match gets no more than its limit
    const clear = "translate this into French";
    expect(
      names(createToolSelector(registry60, { limit: 2, maxLimit: 20 }).select({ text: clear })).filter((name) =>
        selector.rank(clear).includes(name),
      ).length,
    ).toBeLessThan(20);
  });

  it("spells out chat shorthand before ranking (db: database, 1:1: a one-to-one meeting)", () => {
    expect(expandShorthand("pls check the db tmrw, w/ Ana, our 1:1 rn")).toBe(
      "please check the database tomorrow, with Ana, our  one-to-one meeting  right now",
    );
    expect(expandShorthand("Tomorrow's plan")).toBe("Tomorrow's plan");
    expect(selector.rank("count the signups in the db")).toContain("run_sql_query"); // "database" is in its description
    expect(selector.rank("count the signups in the")).not.toContain("run_sql_query");
  });

  it("reads a phrasal verb WordNet knows as one lemma, also with a word in between (call off: cancel)", () => {
    expect(wordNet()?.has("call off")).toBe(true);
    expect(wordNet()?.has("called off")).toBe(true); // the verb inflected
    expect(wordNet()?.has("call into")).toBe(false);
    // "call" alone is a sales call (log_sales_activity); "call off" is cancelling
    expect(selector.rank("call the standup")).not.toContain("cancel_calendar_event");
    expect(selector.rank("call off the standup").slice(0, 3)).toContain("cancel_calendar_event");
    expect(selector.rank("call it off, the standup").slice(0, 3)).toContain("cancel_calendar_event");
  });

  it("reads a misspelt word, unknown to the tools and to WordNet, as the nearest tool word (cancle: cancel)", () => {
    expect(editDistance("cancle", "cancel")).toBe(1); // a swap of neighbouring letters is one edit
    expect(editDistance("invoc", "invoic")).toBe(1); // "invoce" stemmed, against "invoice" stemmed
    expect(editDistance("kitten", "sitting")).toBe(3);
    expect(wordNet()?.has("cancle")).toBe(false);
    expect(selector.rank("cancle order 20240315001")[0]).toBe("cancel_order");
    expect(selector.rank("the invoce").slice(0, 2)).toEqual(expect.arrayContaining(["create_invoice", "get_invoice"]));
    // too far from any tool word to be read as one
    expect(selector.rank("xqzvtk")).toEqual([]);
  });

  it("reads an irregular past tense as its verb when the tools use the verb (paid: pay)", () => {
    expect(
      wordNet()
        ?.related("dug")
        .some((related) => related.word === "excavate"),
    ).toBe(true);
    expect(selector.rank("how much has Initech paid us").slice(0, 3)).toContain("list_payments");
  });

  it("always keeps the tools the run has used, whatever the conversation is about now", () => {
    const run = userRun("what's the weather in Oslo?", [
      { name: "deploy_service", arguments: { service: "payments-api" } },
    ]);
    const sent = names(selector.selectForRun(run));
    expect(sent).toContain("deploy_service");
    expect(sent).toContain("get_current_weather");
    expect(names(selector.select({ text: "", usedTools: ["calculator", "convert_currency"] }))).toEqual([
      "calculator",
      "convert_currency",
      LIST_TOOLS,
    ]);
  });

  it("ignores used or requested names that are not registered", () => {
    expect(names(selector.select({ text: "", usedTools: ["no_such_tool"], requested: ["nor_this"] }))).toEqual([
      LIST_TOOLS,
    ]);
  });

  it("adds the tools list_tools pointed the model to, from then on", () => {
    const before = names(selector.selectForRun(userRun("help me with order 20240315001")));
    expect(before).not.toContain("convert_timezone");
    const run = userRun("help me with order 20240315001", [
      { name: LIST_TOOLS, arguments: { query: "convert a time between time zones" } },
    ]);
    expect(names(selector.selectForRun(run))).toContain("convert_timezone");
    expect(names(selector.select({ text: "help me with order 20240315001", requested: ["translate_text"] }))).toContain(
      "translate_text",
    );
  });

  it("brings along the tools a tool's author said it goes with", () => {
    // create_email_draft's reply_to_thread_id says "Thread id from search_email".
    expect(names(selector.select({ text: "", usedTools: ["create_email_draft"] }))).toContain("search_email");
    // cancel_calendar_event requires event_id; list_calendar_events says it returns the event id.
    expect(names(selector.select({ text: "", usedTools: ["cancel_calendar_event"] }))).toContain(
      "list_calendar_events",
    );
    // dependsOn
    const tools = [...plainTools(21), plainTool("publish", "Publishes.", { dependsOn: ["tool_7"] })];
    expect(names(createToolSelector(createToolRegistry(tools)).select({ text: "", usedTools: ["publish"] }))).toEqual([
      "tool_7",
      "publish",
      LIST_TOOLS,
    ]);
  });

  it("keeps registry order, list_tools last, whatever the ranking", () => {
    const request = "refund the payment and cancel the order, then email the customer";
    const sent = names(selector.selectForRun(userRun(request)));
    const ranked = selector.rank(request).slice(0, 8);
    expect(sent).not.toEqual([...ranked, LIST_TOOLS]);
    expect(sent).toEqual([...selector.tools.names().filter((name) => sent.includes(name))]);
    expect(sent.at(-1)).toBe(LIST_TOOLS);
  });

  it("is deterministic, and returns the same array for the same choice", () => {
    const request = "where is my parcel, tracking 1Z999AA10123456784";
    const again = createToolSelector(createToolRegistry(tools60));
    expect(names(again.selectForRun(userRun(request)))).toEqual(names(selector.selectForRun(userRun(request))));
    expect(again.rank(request)).toEqual(selector.rank(request));
    const first = selector.select({ text: "convert 100 USD to EUR" });
    expect(selector.select({ text: "convert 100 USD to EUR" })).toBe(first);
    expect(selector.select({ text: "convert 100 USD to EUR", usedTools: ["calculator"] })).not.toBe(first);
  });

  it("reads the request and the latest messages, not tool results", () => {
    const run: SelectionRun = {
      history: [
        { role: "user", content: "I have a message for our Madrid customers" },
        { role: "assistant", content: "I can translate it into Spanish if you like." },
      ],
      messages: [
        { role: "user", content: "yes please" },
        { role: "tool", content: "weather forecast rain snow temperature" },
      ],
      toolCalls: [],
    };
    const sent = names(selector.selectForRun(run));
    expect(sent).toContain("translate_text");
    expect(sent).not.toContain("get_weather_forecast");
  });

  it("accepts a RunState as it is", () => {
    const run: RunState = {
      runId: "run_1",
      sessionId: "s",
      userId: "u",
      history: [],
      messages: [{ role: "user", content: "cancel order 20240315001" }],
      steps: 1,
      usage: emptyUsage(),
      toolCalls: [{ name: "get_order_status", arguments: { order_id: "20240315001" }, status: "success" }],
      toolState: newToolRunState(),
      lastResults: {},
    };
    expect(names(createToolSelector(registry60).selectForRun(run))).toEqual(
      expect.arrayContaining(["get_order_status", "cancel_order"]),
    );
  });

  it("refuses a registry that already has a list_tools", () => {
    const tools = [...plainTools(21), plainTool(LIST_TOOLS)];
    expect(() => createToolSelector(createToolRegistry(tools))).toThrow(ToolDefinitionError);
  });
});

describe("list_tools", () => {
  const selector = createToolSelector(registry60);

  it("is registered and sent on every call", () => {
    expect(selector.tools.get(LIST_TOOLS)).toBeDefined();
    expect(names(selector.select({ text: "weather in Rome" }))).toContain(LIST_TOOLS);
  });

  it("without a query lists every tool with a short description, within the listing size", async () => {
    const { data } = await callListTools(selector.tools, {});
    const lines = data.tools as string[];
    expect(lines.map((line) => line.split(":")[0])).toEqual(registry60.names());
    expect(lines.find((line) => line.startsWith("track_shipment: "))).toMatch(
      /^track_shipment: Gets the carrier's tracking events/,
    );
    expect(JSON.stringify(lines).length).toBeLessThanOrEqual(3_500);
  });

  it("shortens the descriptions, then drops them, as the listing budget shrinks", async () => {
    const tight = createToolSelector(registry60, { listingChars: 2_500 });
    const shortened = (await callListTools(tight.tools, {})).data.tools as string[];
    expect(JSON.stringify(shortened).length).toBeLessThanOrEqual(2_500);
    expect(shortened.some((line) => line.endsWith("…"))).toBe(true);
    const namesOnly = createToolSelector(registry60, { listingChars: 100 });
    expect((await callListTools(namesOnly.tools, {})).data.tools).toEqual(registry60.names());
  });

  it("with a query returns the best matches, a named tool first", async () => {
    const byWords = (await callListTools(selector.tools, { query: "give a customer their money back" })).data
      .tools as Array<{ name: string; description: string }>;
    expect(byWords.map((tool) => tool.name)).toContain("refund_payment");
    expect(byWords.length).toBeLessThanOrEqual(12); // the selector's limit
    const byName = (await callListTools(selector.tools, { query: "convert_units" })).data.tools as Array<{
      name: string;
      description: string;
    }>;
    expect(byName[0]).toEqual({
      name: "convert_units",
      description: expect.stringMatching(/^Converts a quantity between units/),
    });
    // By its words alone, describe_table would come first.
    const query = "the columns of a table: describe it with current_time";
    expect(selector.rank(query)[0]).toBe("describe_table");
    const named = (await callListTools(selector.tools, { query })).data.tools as Array<{ name: string }>;
    expect(named.map((tool) => tool.name).slice(0, 2)).toEqual(["current_time", "describe_table"]);
  });

  it("says so when nothing matches", async () => {
    const { data } = await callListTools(selector.tools, { query: "zxqv" });
    expect(data.tools).toEqual([]);
    expect(data.note).toContain("without a query");
  });

  it("names every tool in its description, unless told not to", () => {
    const description = selector.tools.get(LIST_TOOLS)?.definition.description ?? "";
    for (const name of registry60.names()) expect(description).toContain(name);
    const quiet =
      createToolSelector(registry60, { nameEveryTool: false }).tools.get(LIST_TOOLS)?.definition.description ?? "";
    expect(quiet).not.toContain("track_shipment");
  });
});

describe("words", () => {
  it.each([
    ["orders", "order"],
    ["cancelled", "cancel"],
    ["cancelling", "cancel"],
    ["scheduling", "schedul"],
    ["schedule", "schedul"],
    ["shipments", "ship"],
    ["invoices", "invoic"],
    ["replies", "reply"],
    ["addresses", "address"],
    ["ids", "id"],
    ["status", "status"],
    ["calculator", "calculat"],
    ["calculate", "calculat"],
  ])("stems %s to %s", (word, stemmed) => {
    expect(stem(word)).toBe(stemmed);
  });

  it("splits names, drops stopwords, numbers, addresses and links", () => {
    expect(terms("getOrderStatus list-tools cancel_order")).toEqual([
      "order",
      "status",
      "list",
      "tool",
      "cancel",
      "order",
    ]);
    expect(terms("Could you please email ana@acme.com the 20240315001 invoice from https://x.io/a")).toEqual([
      "email",
      "invoic",
    ]);
    expect(terms("17.5% of it")).toEqual(["percent"]);
  });
});
