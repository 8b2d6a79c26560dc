// The store contract, erasure: a conversation, a channel or a person removed from every table that
// holds them, the rest untouched, a receipt per table and an audit row that names no one; then the
// database itself searched for their words and ids (SQLite: the file and its log, byte for byte;
// PostgreSQL: every table's rows as text, as a dump would have them).
import { existsSync, readFileSync } from "node:fs";
import pg from "pg";
import { expect, it } from "vitest";
import { channelOf } from "../../../src/agent/memory.js";
import { startRetention } from "../../../src/conversations/retention.js";
import type { Logger } from "../../../src/logger.js";
import type { AnyStorePort } from "../../../src/store/index.js";
import { approvalRequest, outcomeOf, runRecord, stepOf, type Contract } from "../helpers/store-targets.js";

const ANN = "U0ANNERASE";
const BOB = "U0BOBKEEPS";
const THREAD_A = "slack:T0ERASE:C0GONE:1.1";
const THREAD_B = "slack:T0ERASE:C0STAYS:2.2";

/** A conversation with everything a run leaves: messages, a step with its request and tool call, an approval, a summary, a rating, a stop, notes. */
async function converse(store: AnyStorePort, sessionId: string, userId: string, words: string, runId: string) {
  await store.record([
    { kind: "start_run", run: runRecord(runId, sessionId, userId, `${words} asked`) },
    {
      kind: "messages",
      sessionId,
      runId,
      entries: [{ message: { role: "user", content: `${words} asked` }, tokens: 3 }],
    },
    {
      kind: "step",
      step: stepOf(runId, 1, {
        request: [{ role: "user", content: `${words} in the request` }],
        requestedCalls: [{ id: `${runId}_call`, name: "post_notice", arguments: `{"text":"${words}"}` }],
      }),
    },
  ]);
  await store.record([
    {
      kind: "tool_calls",
      runId,
      step: 1,
      records: [
        {
          id: `${runId}_call`,
          name: "post_notice",
          rawArguments: `{"text":"${words}"}`,
          repairs: [],
          envelope: { status: "success", data: `${words} posted` },
          content: `${words} posted`,
          truncatedChars: 0,
          durationMs: 1,
          dangerous: false,
        },
      ],
    },
    {
      kind: "messages",
      sessionId,
      runId,
      entries: [{ message: { role: "assistant", content: `${words} answered` }, tokens: 3 }],
    },
    { kind: "end_run", outcome: outcomeOf(runId, { output: `${words} answered` }) },
    { kind: "open_approvals", requests: [approvalRequest(runId, sessionId, `${runId}_wait`, userId)], ttlSeconds: 600 },
  ]);
  const history = await store.sessionHistory(sessionId);
  await store.saveSummary(sessionId, history.epoch, {
    content: `${words} summarised`,
    tokens: 3,
    firstMessageId: history.messages[0]?.message ? (history.messages[0].id as number) : 1,
    lastMessageId: history.messages.at(-1)?.id as number,
  });
  expect(await store.recordFeedback({ runId, userId, rating: "down", reason: `${words} rated`, source: "web" })).toBe(
    "recorded",
  );
  // Notes belong to the person, or to the channel: they go with an erasure of either, not of one thread.
  await store.addFact(userId, "user", `about ${userId}`);
  await store.addFact(userId, channelOf(sessionId), `shared in ${channelOf(sessionId)}`);
  const reservation = await store.reserveQuota({ userId, tokens: 10, cost: 0, limits: { tokens: 1_000 } });
  if (reservation.kind === "reserved") await store.settleQuota(reservation.reservationId, { tokens: 5, cost: 0 });
}

/** Every place the database keeps text, as one string: the SQLite file and its log, or every PostgreSQL table's rows. */
async function everything(contract: Contract): Promise<string> {
  const { options } = contract.database();
  if (contract.target.kind === "sqlite") {
    const path = options.databasePath as string;
    return [path, `${path}-wal`]
      .filter((file) => existsSync(file))
      .map((file) => readFileSync(file).toString("latin1"))
      .join("\n");
  }
  const client = new pg.Client({ connectionString: options.databaseUrl });
  await client.connect();
  try {
    await client.query(`SET search_path = ${options.databaseSchema}`);
    const tables = await client.query<{ name: string }>(
      "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = $1",
      [options.databaseSchema],
    );
    const rows: string[] = [];
    for (const { name } of tables.rows)
      rows.push(
        ...(await client.query<{ row: string }>(`SELECT t::text AS row FROM "${name}" t`)).rows.map((r) => r.row),
      );
    return rows.join("\n");
  } finally {
    await client.end();
  }
}

export function eraseContract(contract: Contract): void {
  it("erases one conversation from every table, leaves the others, and keeps a receipt and an audit row that names no one", async () => {
    const store = await contract.open();
    await converse(store, THREAD_A, ANN, "ZEBRAGONE", "run_gone");
    await converse(store, THREAD_B, BOB, "OTTERSTAYS", "run_stays");
    const receipt = await store.erase({ kind: "session", id: THREAD_A }, "cli:operator");
    expect(receipt.kind).toBe("session");
    for (const table of [
      "sessions",
      "runs",
      "messages",
      "steps",
      "step_messages",
      "approvals",
      "summaries",
      "feedback",
    ])
      expect({ table, removed: receipt.removed[table] ?? 0 }).toEqual({ table, removed: expect.any(Number) });
    expect(receipt.removed).toMatchObject({ sessions: 1, runs: 1, messages: 2, steps: 1, approvals: 1, feedback: 1 });
    expect(await store.run("run_gone")).toBeUndefined();
    expect((await store.sessionHistory(THREAD_A)).messages).toEqual([]);
    expect((await store.sessionHistory(THREAD_B)).summary?.content).toBe("OTTERSTAYS summarised");
    expect(await store.run("run_stays")).toBeDefined();
    await store.close();
    const left = await everything(contract);
    expect(left).not.toContain("ZEBRAGONE");
    expect(left).toContain("OTTERSTAYS");
  });

  it("erases a person: their runs and what came of them, their notes, quota and ratings, and the summaries that may retell them", async () => {
    const store = await contract.open();
    await converse(store, THREAD_A, ANN, "ZEBRAGONE", "run_ann");
    await converse(store, THREAD_B, BOB, "OTTERSTAYS", "run_bob");
    await converse(store, THREAD_B, ANN, "ZEBRAINB", "run_ann_b"); // ann in bob's thread too
    const receipt = await store.erase({ kind: "user", id: ANN }, "cli:operator");
    expect(receipt.removed).toMatchObject({ runs: 2, facts: 4, quota_days: 1, sessions: 1 });
    expect(await store.run("run_bob")).toBeDefined();
    expect((await store.sessionHistory(THREAD_B)).messages.map((stored) => stored.message.content)).toEqual([
      "OTTERSTAYS asked",
      "OTTERSTAYS answered",
    ]);
    expect((await store.sessionHistory(THREAD_B)).summary).toBeUndefined(); // it retold ann's words
    expect((await store.searchFacts(BOB, channelOf(THREAD_B), "shared about", 5)).length).toBe(2);
    await store.close();
    const left = await everything(contract);
    expect(left).not.toContain("ZEBRAGONE");
    expect(left).not.toContain("ZEBRAINB");
    expect(left).not.toContain(ANN);
    expect(left).toContain("OTTERSTAYS");
  });

  it("retention: the daily sweep removes the conversations idle since its cut-off, never one with a run in progress, and logs what went", async () => {
    const store = await contract.open();
    await converse(store, THREAD_A, ANN, "ZEBRAOLD", "run_old");
    await store.acceptEvent({ eventIds: [], run: runRecord("run_waiting", THREAD_B, BOB, "OTTERWAITS") });
    const lines: Array<Record<string, unknown>> = [];
    const log = { info: (fields: Record<string, unknown>) => lines.push(fields), warn: () => {} } as unknown as Logger;
    // Two days on, with a retention of one day: both conversations are idle, one has a run waiting its turn.
    const retention = startRetention({ store, days: 1, log, everyMs: 3_600_000 });
    retention.stop();
    await retention.sweep(new Date(Date.now() + 2 * 86_400_000));
    expect(lines.at(-1)?.removed).toMatchObject({ sessions: 1, runs: 1 });
    expect(await store.run("run_old")).toBeUndefined();
    expect(await store.run("run_waiting")).toBeDefined();
    await store.close();
    const left = await everything(contract);
    expect(left).not.toContain("ZEBRAOLD");
    expect(left).toContain("OTTERWAITS");
  });

  it("erases a channel: every conversation in it and the notes shared there", async () => {
    const store = await contract.open();
    await converse(store, THREAD_A, ANN, "ZEBRAGONE", "run_one");
    await converse(store, `${channelOf(THREAD_A)}:3.3`, BOB, "ZEBRATWO", "run_two");
    await converse(store, THREAD_B, BOB, "OTTERSTAYS", "run_three");
    const receipt = await store.erase({ kind: "segment", id: "C0GONE" }, "cli:operator");
    expect(receipt.removed).toMatchObject({ sessions: 2, runs: 2, facts: 2 });
    expect(await store.run("run_three")).toBeDefined();
    await store.close();
    const left = await everything(contract);
    expect(left).not.toContain("ZEBRAGONE");
    expect(left).not.toContain("ZEBRATWO");
    expect(left).not.toContain(`shared in ${channelOf(THREAD_A)}`);
    expect(left).toContain(`shared in ${channelOf(THREAD_B)}`);
    expect(left).toContain("OTTERSTAYS");
  });
}
