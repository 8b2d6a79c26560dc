// The store contract, erasure: a conversation, a channel, a workspace or a person removed from every
// table that holds them (and from the run queue's turns), the rest untouched, a person's id replaced
// where they decided someone else's call, a receipt per table and an audit row that names no one;
// then the database itself searched for their words and ids (SQLite: the file and its log, byte for
// byte; PostgreSQL: every table's rows as text, as a dump would have them, the queue's schema too).
import { existsSync, readFileSync } from "node:fs";
import pg from "pg";
import { expect, it, vi } from "vitest";
import { channelOf } from "../../../src/agent/memory.js";
import { startRetention } from "../../../src/conversations/retention.js";
import { acceptMessage, eraseWithTurns } from "../../../src/conversations/turns.js";
import type { Logger } from "../../../src/logger.js";
import type { RunQueue, Turn } from "../../../src/queue/types.js";
import type { AnyStorePort, StorePort } from "../../../src/store/index.js";
import { openInstallationRecords } from "../../../src/store/installations.js";
import {
  approvalRequest,
  outcomeOf,
  pausedWaitingFor,
  queueBeside,
  runRecord,
  stepOf,
  type Contract,
} from "../helpers/store-targets.js";

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

/** Every place the database keeps text, as one string: the SQLite file and its log, or every PostgreSQL table's rows (also of `schemas`). */
async function everything(contract: Contract, schemas: string[] = []): Promise<string> {
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
    const tables = await client.query<{ schema: string; name: string }>(
      "SELECT table_schema AS schema, table_name AS name FROM information_schema.tables WHERE table_schema = ANY($1)",
      [[options.databaseSchema, ...schemas]],
    );
    const rows: string[] = [];
    for (const { schema, name } of tables.rows)
      rows.push(
        ...(await client.query<{ row: string }>(`SELECT t::text AS row FROM "${schema}"."${name}" t`)).rows.map(
          (r) => r.row,
        ),
      );
    return rows.join("\n");
  } finally {
    await client.end();
  }
}

/** A message accepted as ingress accepts it: its run, its message and its turn (with a file's reference) in one transaction. */
async function queuedMessage(
  store: AnyStorePort,
  queue: RunQueue<unknown>,
  message: { runId: string; sessionId: string; userId: string; words: string },
) {
  const { runId, sessionId, userId, words } = message;
  const outcome = await acceptMessage(store as StorePort<unknown>, queue, {
    eventIds: [`Ev_${runId}`],
    run: runRecord(runId, sessionId, userId, `${words} queued`),
    message: { message: { role: "user", content: `${words} queued` }, tokens: 3 },
    files: [
      {
        platform: "slack",
        name: `${words}.txt`,
        mimeType: "text/plain",
        size: 10,
        url: `https://files.example/${words}`,
      },
    ],
  });
  expect(outcome.kind).toBe("accepted");
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

  it("takes the run queue's turns of what went: a person's waiting turns in their conversation and in another's, with their file names; another person's turn stays and runs", async () => {
    const store = await contract.open();
    const { queue, schemas, close } = await queueBeside(contract);
    try {
      // Nothing runs yet (no worker): every turn waits.
      await queuedMessage(store, queue, { runId: "run_ann_a", sessionId: THREAD_A, userId: ANN, words: "ZEBRAQUEUED" });
      await queuedMessage(store, queue, { runId: "run_bob_b", sessionId: THREAD_B, userId: BOB, words: "OTTERQUEUED" });
      await queuedMessage(store, queue, { runId: "run_ann_b", sessionId: THREAD_B, userId: ANN, words: "ZEBRABEHIND" });
      const receipt = await eraseWithTurns(store as StorePort<unknown>, queue, { kind: "user", id: ANN }, "test");
      expect(receipt.removed).toMatchObject({ queued_turns: 2, runs: 2, sessions: 1 });
      const left = await everything(contract, schemas);
      for (const gone of ["ZEBRAQUEUED", "ZEBRABEHIND", ANN, THREAD_A]) expect(left).not.toContain(gone);
      expect(left).toContain("OTTERQUEUED");

      // A worker now finds bob's turn, then one enqueued after it in the same conversation, and nothing of ann's.
      const ran: Turn[] = [];
      await queue.work(async (turn) => void ran.push(turn), { concurrency: 1 });
      await queue.enqueue({ conversation: THREAD_B, key: "after", payload: {} });
      await vi.waitFor(() => expect(ran.map((turn) => turn.key)).toContain("after"), { timeout: 10_000 });
      expect(ran.map((turn) => turn.key)).toEqual(["Ev_run_bob_b", "after"]);
    } finally {
      await close();
    }
  });

  it("a conversation erased whole takes its queued turns with it, and the audit row counts them", async () => {
    const store = await contract.open();
    const { queue, schemas, close } = await queueBeside(contract);
    try {
      await queuedMessage(store, queue, { runId: "run_one", sessionId: THREAD_A, userId: BOB, words: "ZEBRAONE" });
      await queuedMessage(store, queue, { runId: "run_two", sessionId: THREAD_A, userId: BOB, words: "ZEBRATWO" });
      await queuedMessage(store, queue, { runId: "run_three", sessionId: THREAD_B, userId: BOB, words: "OTTERSTAYS" });
      const receipt = await eraseWithTurns(
        store as StorePort<unknown>,
        queue,
        { kind: "session", id: THREAD_A },
        "test",
      );
      expect(receipt.removed).toMatchObject({ queued_turns: 2, runs: 2, sessions: 1 });
      await store.close();
      const left = await everything(contract, schemas);
      for (const gone of ["ZEBRAONE", "ZEBRATWO", THREAD_A]) expect(left).not.toContain(gone);
      expect(left).toContain("OTTERSTAYS");
      expect(left).toMatch(/queued_turns"+: ?2/); // the audit row's counts
    } finally {
      await close();
    }
  });

  it("a person who decided someone else's call: their id becomes \"erased\" in that run's approval and its stored tool call, and the run stays", async () => {
    const store = await contract.open();
    const callId = "call_bob";
    await store.record([
      { kind: "start_run", run: runRecord("run_bob", THREAD_B, BOB, "OTTERSTAYS asked") },
      {
        kind: "step",
        step: stepOf("run_bob", 1, {
          requestedCalls: [{ id: callId, name: "post_notice", arguments: `{"text":"lunch is here"}` }],
        }),
      },
      {
        kind: "end_run",
        outcome: outcomeOf("run_bob", {
          status: "awaiting_approval",
          output: "Waiting",
          paused: pausedWaitingFor({ id: callId, hash: `hash-${callId}` }),
        }),
      },
      {
        kind: "open_approvals",
        requests: [approvalRequest("run_bob", THREAD_B, callId, BOB)],
        ttlSeconds: 600,
      },
    ]);
    const [approval] = await store.approvalsOfRun("run_bob");
    // Ann decides as one of the platform's approvers (SLACK_APPROVERS: configuration, not stored with the approval).
    const decided = await store.decideApproval({
      approvalId: approval?.id ?? "",
      userId: ANN,
      approved: true,
      approvers: [ANN],
    });
    expect(decided.kind).toBe("decided");
    const decision = (await store.decisionsOf("run_bob"))[callId];
    expect(decision?.by).toBe(ANN);
    await store.record([
      {
        kind: "tool_calls",
        runId: "run_bob",
        step: 1,
        records: [
          {
            id: callId,
            name: "post_notice",
            rawArguments: `{"text":"lunch is here"}`,
            repairs: [],
            envelope: { status: "success", data: "OTTERSTAYS posted" },
            content: "OTTERSTAYS posted",
            truncatedChars: 0,
            durationMs: 1,
            dangerous: true,
            approval: decision,
          },
        ],
      },
      { kind: "end_run", outcome: outcomeOf("run_bob", { output: "OTTERSTAYS answered" }) },
    ]);
    await converse(store, THREAD_A, ANN, "ZEBRAGONE", "run_ann");

    const receipt = await store.erase({ kind: "user", id: ANN }, "cli:operator");
    expect(receipt.anonymised).toEqual({ steps: 1, approvals: 1 });
    expect(receipt.removed).toMatchObject({ runs: 1 });
    expect(await store.approval(approval?.id ?? "")).toMatchObject({ status: "approved", decidedBy: "erased" });
    const [step] = await store.steps("run_bob");
    expect(step?.toolCalls.map((call) => [call.id, call.approval?.by, call.content])).toEqual([
      [callId, "erased", "OTTERSTAYS posted"],
    ]);
    expect((await store.run("run_bob"))?.output).toBe("OTTERSTAYS answered");
    await store.close();
    const left = await everything(contract);
    expect(left).not.toContain(ANN);
    expect(left).not.toContain("ZEBRAGONE");
    expect(left).toContain("OTTERSTAYS");
  });

  it('a person who gave the first of two approvals of someone else\'s call: their id becomes "erased" in the list of who approved, once', async () => {
    const store = await contract.open();
    const callId = "call_two";
    // Ann and Carl decide as the platform's approvers (configuration, not stored with the approval).
    const policy = { requesterMayApprove: false, approvalsNeeded: 2 };
    await store.record([
      { kind: "start_run", run: runRecord("run_two", THREAD_B, BOB, "OTTERSTAYS asked twice") },
      { kind: "step", step: stepOf("run_two", 1) },
      {
        kind: "end_run",
        outcome: outcomeOf("run_two", {
          status: "awaiting_approval",
          output: "Waiting",
          paused: pausedWaitingFor({ id: callId, hash: `hash-${callId}` }),
        }),
      },
      {
        kind: "open_approvals",
        requests: [{ ...approvalRequest("run_two", THREAD_B, callId, BOB), ...policy }],
        ttlSeconds: 600,
      },
    ]);
    const [approval] = await store.approvalsOfRun("run_two");
    const click = { approvalId: approval?.id ?? "", approved: true, approvers: [ANN, "U0CARL"] };
    expect(await store.decideApproval({ ...click, userId: ANN })).toMatchObject({ kind: "counted" });
    expect(await store.decideApproval({ ...click, userId: "U0CARL" })).toMatchObject({ kind: "decided" });
    const decision = (await store.decisionsOf("run_two"))[callId];
    expect(decision?.approvedBy).toEqual([ANN, "U0CARL"]);
    const record = {
      id: callId,
      name: "post_notice",
      rawArguments: "{}",
      repairs: [],
      envelope: { status: "success" as const, data: "OTTERSTAYS posted" },
      content: "OTTERSTAYS posted",
      truncatedChars: 0,
      durationMs: 1,
      dangerous: true,
      approval: decision,
    };
    await store.record([{ kind: "tool_calls", runId: "run_two", step: 1, records: [record] }]);
    await converse(store, THREAD_A, ANN, "ZEBRAGONE", "run_ann");

    const receipt = await store.erase({ kind: "user", id: ANN }, "cli:operator");
    expect(receipt.anonymised).toEqual({ steps: 1, approvals: 1 });
    expect(await store.approval(approval?.id ?? "")).toMatchObject({
      decidedBy: "U0CARL",
      approvedBy: ["erased", "U0CARL"],
    });
    const [step] = await store.steps("run_two");
    expect(step?.toolCalls[0]?.approval).toMatchObject({ by: "U0CARL", approvedBy: ["erased", "U0CARL"] });
    await store.close();
    const left = await everything(contract);
    expect(left).not.toContain(ANN);
    expect(left).toContain("OTTERSTAYS");
  });

  it("erases a workspace: its conversations, the notes shared there and its Slack installation; another workspace's stays", async () => {
    const store = await contract.open();
    const { options } = contract.database();
    const installations = await openInstallationRecords(options);
    const install = (key: string, sealed: string) =>
      installations.put({
        key,
        teamId: key,
        enterpriseId: null,
        orgWide: false,
        botUserId: `B_${key}`,
        scopes: ["chat:write"],
        sealed,
        installedAt: new Date().toISOString(),
      });
    try {
      await install("T0ERASE", "SEALEDZEBRA");
      await install("T0STAYS", "SEALEDOTTER");
      await converse(store, THREAD_A, ANN, "ZEBRAGONE", "run_one");
      await converse(store, "slack:T0STAYS:C0STAYS:3.3", BOB, "OTTERSTAYS", "run_two");
      const receipt = await store.erase({ kind: "workspace", id: "T0ERASE" }, "cli:operator");
      expect(receipt.kind).toBe("workspace");
      expect(receipt.removed).toMatchObject({ sessions: 1, runs: 1, facts: 1, slack_installations: 1 });
      expect(await installations.get("T0ERASE")).toBeUndefined();
      expect((await installations.get("T0STAYS"))?.sealed).toBe("SEALEDOTTER");
    } finally {
      await installations.close();
    }
    await store.close();
    const left = await everything(contract);
    expect(left).not.toContain("ZEBRAGONE");
    expect(left).not.toContain("SEALEDZEBRA");
    expect(left).toContain("SEALEDOTTER");
    expect(left).toContain("OTTERSTAYS");
  });
}
