// The store contract, conversations and facts: exact message round trips, one transaction per run's
// writes, epochs and summaries, history versions across handles, listings, and fact search.
import { expect, it } from "vitest";
import { channelOf } from "../../../src/agent/memory.js";
import type { Message } from "../../../src/agent/types.js";
import { outcomeOf, runRecord, type Contract } from "../helpers/store-targets.js";

const entries = (messages: Message[]) => messages.map((message, index) => ({ message, tokens: 10 + index }));

export function conversationsContract({ open }: Contract): void {
  it("round-trips messages exactly (tool_calls, tool results, null content, system notes), ids ascending", async () => {
    const store = await open();
    await store.record([{ kind: "start_run", run: runRecord("run_1", "slack:T1:C1:1.1") }]);
    const messages: Message[] = [
      { role: "user", content: "What's the weather in Paris and in Oslo?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "call_a", type: "function", function: { name: "weather", arguments: '{"city":"Paris"}' } },
          { id: "call_b", type: "function", function: { name: "weather", arguments: '{"city":"Oslo","unit":"C"}' } },
        ],
      },
      { role: "tool", tool_call_id: "call_a", content: '{"status":"success","data":{"c":21}}' },
      {
        role: "tool",
        tool_call_id: "call_b",
        content: '{"status":"error","error":{"type":"timeout","message":"slow"}}',
      },
      { role: "system", content: "A guard's note." },
      {
        role: "assistant",
        content: "Let me check once more.",
        tool_calls: [{ id: "call_c", type: "function", function: { name: "weather", arguments: "{}" } }],
      },
      { role: "tool", tool_call_id: "call_c", content: "" },
      { role: "assistant", content: "Paris 21 °C; Oslo did not answer. 🌦️" },
      { role: "assistant", content: null },
    ];
    const ids = await store.appendMessages("slack:T1:C1:1.1", "run_1", entries(messages));
    expect(ids).toHaveLength(messages.length);
    expect([...ids].sort((a, b) => a - b)).toEqual(ids);
    const stored = await store.messagesAfter("slack:T1:C1:1.1", 0, 0);
    expect(stored.map((row) => row.message)).toEqual(messages);
    expect(stored.map((row) => row.id)).toEqual(ids);
    expect(stored.map((row) => row.tokens)).toEqual(messages.map((_, index) => 10 + index));
    expect(stored.every((row) => row.runId === "run_1")).toBe(true);
    expect((await store.messagesAfter("slack:T1:C1:1.1", 0, ids[3] as number)).map((row) => row.message)).toEqual(
      messages.slice(4),
    );
  });

  it("applies a run's writes as one transaction: a failing write leaves none of them, nor a new session", async () => {
    const store = await open();
    await store.appendMessages("cli:tx", null, entries([{ role: "user", content: "before" }]));
    const failing = (sessionId: string) =>
      store.record([
        {
          kind: "messages",
          sessionId,
          runId: null,
          entries: entries([{ role: "user", content: "first of the unit" }]),
        },
        {
          kind: "messages",
          sessionId,
          runId: "run_missing",
          entries: entries([{ role: "assistant", content: "of a run that does not exist" }]),
        },
      ]);
    await expect(failing("cli:tx")).rejects.toThrow();
    expect((await store.messagesAfter("cli:tx", 0, 0)).map((row) => row.message.content)).toEqual(["before"]);
    await expect(failing("cli:never")).rejects.toThrow();
    expect((await store.listSessions()).map((session) => session.id)).toEqual(["cli:tx"]);
  });

  it("resetSession starts a new epoch: earlier messages are kept but not read for it; summaries are per epoch, the latest first", async () => {
    const store = await open();
    const ids = await store.appendMessages(
      "web:r",
      null,
      entries([
        { role: "user", content: "old question" },
        { role: "assistant", content: "old answer" },
      ]),
    );
    await store.saveSummary("web:r", 0, {
      content: "first",
      tokens: 1,
      firstMessageId: ids[0] as number,
      lastMessageId: ids[0] as number,
    });
    await store.saveSummary("web:r", 0, {
      content: "second",
      tokens: 2,
      firstMessageId: ids[0] as number,
      lastMessageId: ids[1] as number,
    });
    expect(await store.sessionHistory("web:r")).toMatchObject({
      epoch: 0,
      summary: { content: "second", tokens: 2, lastMessageId: ids[1] },
      messages: [],
    });
    expect(await store.resetSession("web:r")).toBe(true);
    const newId = (await store.appendMessages("web:r", null, entries([{ role: "user", content: "new question" }])))[0];
    expect(await store.sessionHistory("web:r")).toMatchObject({
      epoch: 1,
      summary: undefined,
      messages: [{ id: newId, message: { role: "user", content: "new question" } }],
    });
    expect((await store.messagesAfter("web:r", 0, 0)).map((row) => row.message.content)).toEqual([
      "old question",
      "old answer",
    ]);
    expect(await store.resetSession("web:unknown")).toBe(false);
    expect(await store.sessionHistory("web:unknown")).toMatchObject({ epoch: 0, summary: undefined, messages: [] });
  });

  it("historyVersion stays the same through this handle's own writes, and changes when another handle writes or the session is reset", async () => {
    const mine = await open();
    const other = await open();
    await mine.appendMessages("web:v", null, entries([{ role: "user", content: "one" }]));
    const loaded = await mine.sessionHistory("web:v");
    expect(await mine.historyVersion("web:v")).toBe(loaded.version);
    const ids = await mine.appendMessages("web:v", null, entries([{ role: "assistant", content: "two" }]));
    await mine.saveSummary("web:v", 0, {
      content: "one, two",
      tokens: 3,
      firstMessageId: ids[0] as number,
      lastMessageId: ids[0] as number,
    });
    expect(await mine.historyVersion("web:v")).toBe(loaded.version);

    await other.appendMessages("web:v", null, entries([{ role: "user", content: "from elsewhere" }]));
    const afterOther = await mine.historyVersion("web:v");
    expect(afterOther).not.toBe(loaded.version);
    expect(await mine.historyVersion("web:v")).toBe(afterOther);
    await mine.resetSession("web:v");
    expect(await mine.historyVersion("web:v")).not.toBe(afterOther);
  });

  it("listSessions counts messages, billed tokens and runs (sub-agents' left out), most recent first; sessionUsage and sessionOwner agree", async () => {
    const store = await open();
    await store.record([
      { kind: "start_run", run: runRecord("run_a1", "web:a", "U1", "one") },
      {
        kind: "messages",
        sessionId: "web:a",
        runId: "run_a1",
        entries: entries([
          { role: "user", content: "one" },
          { role: "assistant", content: "1" },
        ]),
      },
      {
        kind: "start_run",
        run: {
          ...runRecord("run_sub", "web:a", "U1", "a specialist's task"),
          parent: { runId: "run_a1", toolCallId: "call_1" },
        },
      },
      { kind: "end_run", outcome: outcomeOf("run_sub", { promptTokens: 1_000, completionTokens: 1_000 }) },
      { kind: "end_run", outcome: outcomeOf("run_a1", { promptTokens: 100, completionTokens: 7 }) },
    ]);
    await store.record([
      { kind: "start_run", run: runRecord("run_a2", "web:a", "U2", "two") },
      { kind: "messages", sessionId: "web:a", runId: "run_a2", entries: entries([{ role: "user", content: "two" }]) },
      {
        kind: "end_run",
        outcome: outcomeOf("run_a2", { status: "error", promptTokens: 50, error: '{"code":"model_unavailable"}' }),
      },
    ]);
    await store.record([
      { kind: "start_run", run: runRecord("run_b1", "web:b", "U2", "hi") },
      {
        kind: "messages",
        sessionId: "web:b",
        runId: "run_b1",
        entries: entries([
          { role: "user", content: "hi" },
          { role: "assistant", content: "hello" },
        ]),
      },
      { kind: "end_run", outcome: outcomeOf("run_b1", { promptTokens: 20, completionTokens: 3 }) },
    ]);
    const sessions = await store.listSessions();
    expect(
      [...sessions]
        .sort((a, b) => a.id.localeCompare(b.id))
        .map(({ id, messageCount, tokens, runCount, startedBy }) => ({
          id,
          messageCount,
          tokens,
          runCount,
          startedBy,
        })),
    ).toEqual([
      { id: "web:a", messageCount: 3, tokens: 157, runCount: 2, startedBy: "U1" },
      { id: "web:b", messageCount: 2, tokens: 23, runCount: 1, startedBy: "U2" },
    ]);
    const times = sessions.map((session) => Date.parse(session.lastActivity));
    expect(times.every((time) => !Number.isNaN(time))).toBe(true);
    expect([...times].sort((a, b) => b - a)).toEqual(times);
    expect(await store.sessionUsage("web:a")).toEqual({ runs: 2, promptTokens: 150, completionTokens: 7 });
    expect(await store.sessionUsage("web:none")).toEqual({ runs: 0, promptTokens: 0, completionTokens: 0 });
    expect(await store.sessionOwner("web:a")).toBe("U1");
    expect(await store.sessionOwner("web:none")).toBeUndefined();
  });
}

export function factsContract({ open }: Contract): void {
  it("ranks the fact that matches more of the words first", async () => {
    const store = await open();
    const weak = await store.addFact("U1", "user", "The office server room is on the second floor.");
    const strong = await store.addFact("U1", "user", "The staging server deploy key is stored in the team vault.");
    await store.addFact("U1", "user", "Likes espresso in the morning.");
    const found = await store.searchFacts("U1", "cli:x", "Where is the deploy key for the staging server?", 5);
    expect(found.map((fact) => fact.id)).toEqual([strong, weak]);
    expect(found[0]).toMatchObject({
      userId: "U1",
      scope: "user",
      content: "The staging server deploy key is stored in the team vault.",
    });
    expect(Number.isNaN(Date.parse(found[0]?.createdAt ?? ""))).toBe(false);
    expect((await store.searchFacts("U1", "cli:x", "staging server deploy", 1)).map((fact) => fact.id)).toEqual([
      strong,
    ]);
    // The words a fact repeats count too.
    await store.addFact("U2", "user", "Parks in spot 42 of the north garage.");
    const tea = await store.addFact("U2", "user", "Prefers green tea; oolong tea when green tea is out.");
    const afternoon = await store.addFact("U2", "user", "Drinks tea only in the afternoon.");
    expect(
      (await store.searchFacts("U2", "cli:x", "Should I bring tea? Green or black tea?", 5)).map((fact) => fact.id),
    ).toEqual([tea, afternoon]);
  });

  it("does not match on common words alone, and finds words inside addresses and without their accents", async () => {
    const store = await open();
    await store.addFact("U1", "user", "The office is on the second floor.");
    expect(await store.searchFacts("U1", "cli:x", "What is the weather like?", 5)).toEqual([]);
    expect(await store.searchFacts("U1", "cli:x", "Which floor is the office on?", 5)).toHaveLength(1);
    const mail = await store.addFact(
      "U1",
      "user",
      "Invoices go to billing@example.com and the wiki is at wiki.example.com/finance.",
    );
    expect((await store.searchFacts("U1", "cli:x", "who gets billing questions", 5)).map((fact) => fact.id)).toEqual([
      mail,
    ]);
    expect((await store.searchFacts("U1", "cli:x", "finance wiki", 5)).map((fact) => fact.id)).toEqual([mail]);
    const cafe = await store.addFact("U1", "user", "The team lunch is at Café Müller.");
    expect((await store.searchFacts("U1", "cli:x", "cafe muller", 5)).map((fact) => fact.id)).toEqual([cafe]);
  });

  it("never returns another user's personal facts; a channel's facts reach everyone in it, from any thread, and no other channel", async () => {
    const store = await open();
    await store.addFact("U2", "user", "U2 prefers answers in French.");
    const own = await store.addFact("U1", "user", "U1 prefers answers in German.");
    expect(
      (await store.searchFacts("U1", "slack:T1:C1", "prefers answers French German", 10)).map((fact) => fact.id),
    ).toEqual([own]);
    expect(await store.searchFacts("U3", "slack:T1:C1", "prefers answers French German", 10)).toEqual([]);
    const shared = await store.addFact("U1", "slack:T1:C1", "The release train leaves on Thursdays.");
    expect(
      (await store.searchFacts("U2", channelOf("slack:T1:C1:1234.5"), "when does the release train leave", 5)).map(
        (fact) => fact.id,
      ),
    ).toEqual([shared]);
    expect(await store.searchFacts("U2", channelOf("slack:T1:C2:1234.5"), "release train", 5)).toEqual([]);
    expect(await store.searchFacts("U1", channelOf("discord:dm:C1"), "release train", 5)).toEqual([]);
  });

  it("a channel note keeps its origin; anyone in its channel may forget it, while a personal fact stays its owner's", async () => {
    const store = await open();
    const note = await store.addFact("U1", "slack:T1:C1", "Standup moves to 10:30.", {
      runId: "run_n",
      readContent: true,
    });
    const personal = await store.addFact("U1", "user", "Standup reminders by DM please.");
    expect(await store.searchFacts("U2", "slack:T1:C1", "standup", 5)).toEqual([
      expect.objectContaining({ id: note, origin: { runId: "run_n", readContent: true } }),
    ]);
    expect(
      (await store.searchFacts("U1", "slack:T1:C1", "standup reminders", 5)).find((f) => f.id === personal),
    ).not.toHaveProperty("origin");
    // A personal fact: not for another user, whatever channel they are in ("user" is no channel).
    expect(await store.forgetFact("U2", personal, "user")).toBe(false);
    expect(await store.forgetFact("U2", personal, "slack:T1:C1")).toBe(false);
    // The channel note: not from another channel; from its own, by anyone.
    expect(await store.forgetFact("U2", note, "slack:T1:C2")).toBe(false);
    expect(await store.forgetFact("U2", note)).toBe(false);
    expect(await store.forgetFact("U2", note, "slack:T1:C1")).toBe(true);
    expect((await store.searchFacts("U1", "slack:T1:C1", "standup", 5)).map((fact) => fact.id)).toEqual([personal]);
  });

  it("an approver of a platform may forget any note shared with one of its channels, and nothing else", async () => {
    const store = await open();
    const note = await store.addFact("U1", "slack:T1:C1", "Refunds go to account 999.");
    const discordNote = await store.addFact("U1", "discord:G1:C1", "Refunds go to account 999.");
    const personal = await store.addFact("U1", "user", "Refunds to my own account please.");
    // Not a personal fact, not another platform's note, and no prefix that matches everything.
    expect(await store.forgetFact("UA", personal, "slack:T9:C9", "slack:")).toBe(false);
    expect(await store.forgetFact("UA", discordNote, "slack:T9:C9", "slack:")).toBe(false);
    expect(await store.forgetFact("UA", note, "slack:T9:C9", "")).toBe(false);
    expect(await store.forgetFact("UA", note, "slack:T9:C9", "slack:")).toBe(true);
    expect(await store.forgetFact("UA", discordNote, "slack:T9:C9", "discord:")).toBe(true);
    expect((await store.searchFacts("U1", "slack:T1:C1", "refunds account", 5)).map((fact) => fact.id)).toEqual([
      personal,
    ]);
  });

  it("forgetFact works only for the fact's owner, and a forgotten fact is no longer found", async () => {
    const store = await open();
    const id = await store.addFact("U1", "user", "Parking spot number 42 in the garage.");
    expect(await store.forgetFact("U2", id)).toBe(false);
    expect((await store.searchFacts("U1", "cli:x", "parking garage", 5)).map((fact) => fact.id)).toEqual([id]);
    expect(await store.forgetFact("U1", id)).toBe(true);
    expect(await store.forgetFact("U1", id)).toBe(false);
    expect(await store.searchFacts("U1", "cli:x", "parking garage", 5)).toEqual([]);
    const again = await store.addFact("U1", "user", "Parking moved to the north garage.");
    expect((await store.searchFacts("U1", "cli:x", "parking garage", 5)).map((fact) => fact.id)).toEqual([again]);
  });

  it.each([
    'AND OR "NEAR(',
    '"',
    "'); DROP TABLE facts; --",
    "NEAR(vault key, 2)",
    "deploy* -staging ^key content:vault",
    "key & !vault | (rotates <-> monthly)",
    "(((",
    "!!! ??? ...",
    "",
    "🙂 ключ vault",
    Array.from({ length: 200 }, (_, index) => `word${index}`).join(" "),
  ])("searches without failing for a query made of %j", async (query) => {
    const store = await open();
    const id = await store.addFact("U1", "user", "The vault key rotates monthly.");
    const found = await store.searchFacts("U1", "cli:x", query, 5);
    expect(found.map((fact) => fact.id)).toEqual(/vault|key/i.test(query) ? [id] : []);
  });
}
