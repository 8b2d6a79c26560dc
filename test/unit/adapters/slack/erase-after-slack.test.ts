// Erasure after a real conversation: the Slack app against the fake Slack, the agent as `npm start`
// builds it over its SQLite file, one process (the in-process queue), daily caps on and a small
// memory budget. Ann leaves everything the pipeline keeps (test/helpers/slack-erasure.ts: a shared
// note, a thread long enough to be summarised, a file, a rating, a stopped run, her approval of Bob's
// call) and a turn that waits in the process's memory behind a run of Bob's. Erasing her through
// POST /api/erase drops that turn, puts "erased" where she approved Bob's call, and leaves neither
// her words nor her id nor her conversations' keys in any byte of the file or its log; Bob's
// conversation stays as it was.
import { existsSync, readFileSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import type { ErasureReceipt } from "../../../../src/store/port-data.js";
import { cleanUp, startHarness } from "../../../helpers/slack.js";
import {
  ANN,
  ANN_WORD,
  annLeavesEverything,
  BOB,
  BOB_CHANNEL,
  BOB_WORD,
  erasureScript,
  FILE_WORD,
  HOLD,
  modelAsked,
  slackPeople,
} from "../../../helpers/slack-erasure.js";

afterEach(cleanUp);

const fileText = (path: string) =>
  [path, `${path}-wal`]
    .filter((file) => existsSync(file))
    .map((file) => readFileSync(file).toString("latin1"))
    .join("\n");

describe("erasing a person after a Slack conversation", () => {
  it("removes their words, id and conversations from every byte of the SQLite file, drops their turn waiting in memory, and keeps another person's conversation", async () => {
    const h = await startHarness({
      script: erasureScript,
      env: { GLASSBOX_USER_DAILY_TOKENS: "1000000", GLASSBOX_CONTEXT_TOKENS: "2000" },
      slack: { approvers: [ANN] },
    });
    const place = { fake: h.fake, eventsUrl: h.slack.eventsUrl as string, model: h.model };
    const { ann, bob, bobTs } = await annLeavesEverything(place);
    await h.slack.conversations.idle();
    const people = slackPeople(place);
    const db = h.agent.store.db;
    const count = (sql: string, ...values: unknown[]) =>
      db
        .prepare(sql)
        .pluck()
        .get(...values) as number;

    // Bob's next run holds the model; Ann's message in his thread waits behind it, in this process's memory.
    await people.mention(BOB, BOB_CHANNEL, `${HOLD} ${BOB_WORD} once more`, { threadTs: bobTs });
    await modelAsked(h.model, `${HOLD} ${BOB_WORD} once more`);
    await people.mention(ANN, BOB_CHANNEL, `${ANN_WORD} waits behind Bob`, { threadTs: bobTs });
    await expect.poll(() => count("SELECT count(*) FROM runs WHERE user_id = ? AND status = 'accepted'", ANN)).toBe(1);

    // Everything the pipeline keeps is there before the erasure.
    for (const table of [
      "sessions",
      "runs",
      "messages",
      "summaries",
      "steps",
      "step_messages",
      "approvals",
      "facts",
      "feedback",
      "cancel_requests",
      "quota_days",
      "quota_reservations", // Bob's call in flight
    ])
      expect(count(`SELECT count(*) FROM ${table}`), table).toBeGreaterThan(0);
    expect(count("SELECT count(*) FROM summaries WHERE session_id = ?", ann[0])).toBeGreaterThan(0);
    const before = fileText(h.paths.db);
    for (const kept of [ANN_WORD, FILE_WORD, ANN]) expect(before).toContain(kept);

    const response = await fetch(new URL("/api/erase", h.slack.apiUrl), {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ user: ANN }),
    });
    expect(response.status).toBe(200);
    const receipt = (await response.json()) as ErasureReceipt;
    expect(receipt.removed).toMatchObject({ queued_turns: 1, cancel_requests: 1, feedback: 1, quota_days: 1 });
    for (const table of ["sessions", "runs", "messages", "summaries", "steps", "step_messages", "approvals", "facts"])
      expect(receipt.removed[table], table).toBeGreaterThan(0);
    expect(receipt.anonymised).toEqual({ steps: 1, approvals: 1 });

    // Bob stops his run; Ann's turn, forgotten, never reaches the model.
    await people.mention(BOB, BOB_CHANNEL, "stop", { threadTs: bobTs });
    await people.botMessage(BOB_CHANNEL, bobTs, people.saying("Stopped."));
    await h.slack.conversations.idle();
    const asked = JSON.stringify(h.model.requests.map((request) => request.body.messages));
    expect(asked).not.toContain("waits behind Bob");

    const left = fileText(h.paths.db);
    for (const gone of [ANN_WORD, FILE_WORD, ANN, ...ann]) expect(left, gone).not.toContain(gone);
    for (const kept of [BOB_WORD, BOB, bob]) expect(left, kept).toContain(kept);
    expect(db.prepare("SELECT DISTINCT user_id FROM runs").pluck().all()).toEqual([BOB]);
    expect(db.prepare("SELECT decided_by FROM approvals").pluck().all()).toEqual(["erased"]);
  });
});
