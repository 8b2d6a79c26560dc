// The files of a queued message, below the processes: what ingress puts in a turn (references only,
// bounded to fit its payload), and what a worker's runQueued does with them (fetches them through
// receiveFiles on every delivery, tells the person only on the first), on the store port with the
// real loop, memory and the scripted model server. And a queued turn claims its answer shown the
// moment its surface says the answer is posted, before the surface's clean-up. SQLite always;
// PostgreSQL too when GLASSBOX_TEST_DATABASE_URL is set.
import { afterEach, describe, expect, it } from "vitest";
import type { Attachment } from "../../../src/agent/attachments.js";
import { createConversations, type ChatSurface } from "../../../src/conversations/conversations.js";
import type { AgentConfig } from "../../../src/agent/loop.js";
import { createMemory } from "../../../src/agent/memory.js";
import { createTokenCounter } from "../../../src/agent/tokens.js";
import { createTraceRecorder } from "../../../src/agent/trace.js";
import type { Message } from "../../../src/agent/types.js";
import {
  FILES_PAYLOAD_BYTES,
  MAX_TURN_FILES,
  storedTextOf,
  turnFilesOf,
  type TurnFile,
} from "../../../src/conversations/turn-files.js";
import { messageTurn, workOf, type TurnWork } from "../../../src/conversations/turns.js";
import { checkTurn } from "../../../src/queue/types.js";
import type { Script } from "../../../src/testing/scripted-model-server.js";
import { createToolRegistry } from "../../../src/tools/registry.js";
import { closeServers, startServer } from "../../helpers/agent.js";
import { PNG, type Part } from "../../helpers/attachments.js";
import { testModel } from "../../helpers/memory.js";
import { runRecord, TARGETS, useContract } from "../helpers/store-targets.js";

const counter = await createTokenCounter("o200k_base");
afterEach(closeServers);

describe("a turn's file references", () => {
  it("are bounded to fit the payload however long the platform's names and addresses are, never more than 10", () => {
    const long = "é".repeat(5_000);
    const refs = Array.from({ length: 25 }, (_, index) => ({
      name: `${long}${index}.png`,
      mimeType: `image/png${"x".repeat(500)}`,
      size: 70,
      url: `https://files.slack.com/files-pri/T1-F${index}/${encodeURIComponent(long.slice(0, 150))}`,
    }));
    const files = turnFilesOf(refs, "slack");
    expect(files).toHaveLength(MAX_TURN_FILES);
    expect(Buffer.byteLength(JSON.stringify(files))).toBeLessThanOrEqual(FILES_PAYLOAD_BYTES);
    expect(files.every((file) => file.name.length <= 200 && file.mimeType.length <= 100)).toBe(true);
    // The first files keep their addresses; those that did not fit say why instead.
    expect(files[0]?.url).toMatch(/^https:\/\/files\.slack\.com\//);
    expect(files.at(-1)).toMatchObject({ url: "", problem: "its download address was too long to pass on" });
    expect(() =>
      checkTurn(messageTurn(runRecord("run_1", "slack:T1:C1:1.1"), ["slack:event:Ev1", "slack:message:C1:1.1"], files)),
    ).not.toThrow();
  });

  it("say why a file cannot be fetched when its address is not a web address, and read back only what ingress made", () => {
    const [file] = turnFilesOf([{ name: "a.txt", mimeType: "text/plain", size: 3, url: "not a url" }], "discord");
    expect(file).toEqual({
      platform: "discord",
      name: "a.txt",
      mimeType: "text/plain",
      size: 3,
      url: "",
      problem: "its download address is not a web address",
    });
    const turn = messageTurn(runRecord("run_2", "discord:dm:D1"), ["discord:message:1"]);
    const work = workOf({ ...turn, payload: { ...turn.payload, files: [file as TurnFile, { name: 1 }, "x"] } });
    expect(work).toEqual({
      kind: "message",
      runId: "run_2",
      sessionId: "discord:dm:D1",
      eventIds: ["discord:message:1"],
      files: [file],
    });
    expect(workOf(turn)).not.toHaveProperty("files");
  });

  it("are named in the stored text by what the platform declared", () => {
    const files = turnFilesOf(
      [{ name: "cat.png", mimeType: "image/png", size: 70, url: "https://files.slack.com/x/cat.png" }],
      "slack",
    );
    expect(storedTextOf("what is it?", files)).toBe(
      "what is it?\n\n[Attached file: cat.png (image/png, 70 B); what could be read of it was shown to you with this message only]",
    );
    expect(storedTextOf("", files)).toMatch(/^\[Attached file: cat\.png/);
  });
});

for (const target of TARGETS) {
  describe(`a queued message's files on ${target.name}`, () => {
    const contract = useContract(target);

    async function setUp(script: Script, surface: ChatSurface) {
      const server = await startServer({ script });
      const store = await contract.open();
      const model = testModel(server);
      const memory = createMemory({ store, model, counter, budgetTokens: 12_000 });
      const agent: AgentConfig = {
        model,
        tools: createToolRegistry([]),
        memory,
        trace: createTraceRecorder(store, { estimateTokens: memory.estimate }),
      };
      const received: Array<{ names: string[]; tell: boolean }> = [];
      // A worker's receiveFiles: the image is read, the other file could not be.
      const receiveFiles = async (files: readonly TurnFile[], where: { tell: boolean }): Promise<Attachment[]> => {
        received.push({ names: files.map((file) => file.name), tell: where.tell });
        return files.map((file) =>
          file.name.endsWith(".png")
            ? { name: file.name, mimeType: file.mimeType, size: PNG.length, data: PNG }
            : { name: file.name, mimeType: file.mimeType, size: file.size, problem: "the download failed (HTTP 404)" },
        );
      };
      const conversations = createConversations(agent, store, { openSurface: () => surface, receiveFiles });
      return { server, store, conversations, received };
    }

    /** What ingress does: the run accepted, the text with its files' lines stored; the turn it enqueues. */
    async function accept(
      store: Awaited<ReturnType<typeof contract.open>>,
      input: string,
      refs: Parameters<typeof turnFilesOf>[0],
    ) {
      const files = turnFilesOf(refs, "slack");
      const run = runRecord("run_files", "slack:T1:C1:1.1", "U1", input);
      const message: Message = { role: "user", content: storedTextOf(input, files) };
      expect(
        await store.acceptEvent({ eventIds: ["Ev1"], run, message: { message, tokens: counter.message(message) } }),
      ).toMatchObject({ kind: "accepted" });
      return workOf(messageTurn(run, ["Ev1"], files)) as Extract<TurnWork, { kind: "message" }>;
    }

    it("gives the model the fetched image as a part and the unread file as a line; claims the answer shown the moment the surface posted it", async () => {
      let claimedWhenPosted: boolean | undefined;
      const surface: ChatSurface = {
        onEvent: () => {},
        askApproval: async () => undefined,
        finish: async (_result, posted) => {
          await posted?.();
          // Still inside finish (the clean-up after the post would come here): the claim is taken already.
          claimedWhenPosted = !(await store.claim("answered:run_files"));
        },
      };
      const { server, store, conversations, received } = await setUp(
        () => ({ content: "A cat, and a file I could not read." }),
        surface,
      );
      const work = await accept(store, "what are these?", [
        { name: "cat.png", mimeType: "image/png", size: 70, url: "https://files.slack.com/files-pri/T1-F1/cat.png" },
        { name: "gone.txt", mimeType: "text/plain", size: 9, url: "https://files.slack.com/files-pri/T1-F2/gone.txt" },
      ]);
      const result = await conversations.runQueued(work, { signal: new AbortController().signal, delivery: 1 });
      expect(result).toMatchObject({ stopReason: "final", output: "A cat, and a file I could not read." });
      expect(received).toEqual([{ names: ["cat.png", "gone.txt"], tell: true }]);
      const parts = server.requests[0]?.body.messages.find((message) => message.role === "user")?.content as Part[];
      expect(parts[0]?.text).toContain("what are these?\n\n[Attached image: cat.png (image/png, 70 B)]");
      expect(parts[1]?.image_url?.url).toBe(`data:image/png;base64,${PNG.toString("base64")}`);
      expect(parts[2]?.text).toContain(
        "[Attached file gone.txt (text/plain, 9 B) could not be read: the download failed (HTTP 404).]",
      );
      expect(claimedWhenPosted).toBe(true);
      // The conversation keeps what ingress stored (no image data); a later turn reads these lines.
      const stored = (await store.sessionHistory(work.sessionId)).messages.filter(
        (entry) => entry.message.role === "user",
      );
      expect(stored.map((entry) => entry.message.content)).toEqual([storedTextOf("what are these?", work.files ?? [])]);
    });

    it("a run taken over on a redelivery fetches the files again, and does not tell the person again", async () => {
      const surface: ChatSurface = { onEvent: () => {}, askApproval: async () => undefined, finish: async () => {} };
      const { server, store, conversations, received } = await setUp(() => ({ content: "Seen again." }), surface);
      const work = await accept(store, "look", [
        { name: "cat.png", mimeType: "image/png", size: 70, url: "https://files.slack.com/files-pri/T1-F1/cat.png" },
      ]);
      // The worker that started it died before its first step was written.
      await store.record([{ kind: "start_run", run: runRecord(work.runId, work.sessionId, "U1", "look") }]);
      await store.record([
        {
          kind: "end_run",
          outcome: {
            runId: work.runId,
            status: "interrupted",
            output: "",
            steps: 0,
            promptTokens: 0,
            completionTokens: 0,
            paused: null,
            error: null,
          },
        },
      ]);
      const result = await conversations.runQueued(work, { signal: new AbortController().signal, delivery: 2 });
      expect(result).toMatchObject({ stopReason: "final", output: "Seen again." });
      expect(received).toEqual([{ names: ["cat.png"], tell: false }]);
      const parts = server.requests[0]?.body.messages.find((message) => message.role === "user")?.content as Part[];
      expect(parts[1]?.image_url?.url).toBe(`data:image/png;base64,${PNG.toString("base64")}`);
    });
  });
}
