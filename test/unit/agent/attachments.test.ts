// Files that come with a message reach the model: glassbox as `npm start` builds it (real SQLite,
// the openai SDK) against the scripted model server, which records what it was sent and can refuse
// images as a text-only model does.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { Attachment } from "../../../src/agent/attachments.js";
import { runAgent } from "../../../src/agent/loop.js";
import { createTraceReader } from "../../../src/store/sqlite-traces.js";
import { loadConfig } from "../../../src/config.js";
import { sqliteAgentConfig, type SqliteAgent } from "../../helpers/sqlite-agent.js";
import { startScriptedModelServer, type ScriptedModelServer } from "../../../src/testing/scripted-model-server.js";
import { hasImagePart, PNG, userContent, type Part } from "../../helpers/attachments.js";
import { quietLogger } from "../../helpers/web.js";

const image: Attachment = { name: "cat.png", mimeType: "image/png", size: PNG.length, data: PNG };
const notes: Attachment = {
  name: "notes.txt",
  mimeType: "text/plain",
  size: 24,
  data: Buffer.from("The launch is on Friday."),
};
const pdf: Attachment = { name: "report.pdf", mimeType: "application/pdf", size: 5, data: Buffer.from("%PDF-") };

describe("attachments reach the model", () => {
  const directory = mkdtempSync(join(tmpdir(), "glassbox-attachments-"));
  const open: Array<{ model: ScriptedModelServer; agent: SqliteAgent }> = [];
  afterEach(async () => {
    for (const { model, agent } of open.splice(0)) {
      agent.store.close();
      await model.close();
    }
  });
  afterAll(() => rmSync(directory, { recursive: true, force: true }));

  async function start(options: { rejectImages?: boolean; images?: string; env?: Record<string, string> } = {}) {
    const model = await startScriptedModelServer({
      rejectImages: options.rejectImages,
      // A clock call first, so the run has two steps; then the answer.
      script: (request) =>
        request.messages.some((message) => message.role === "tool")
          ? { content: "A cat, and the launch is on Friday." }
          : { toolCalls: [{ name: "current_time", arguments: "{}" }] },
    });
    const env = {
      OPENAI_BASE_URL: model.url,
      OPENAI_API_KEY: "k",
      LLM_MODEL: "scripted-model",
      GLASSBOX_DB: join(directory, `${open.length}-${Date.now()}.db`),
      ...(options.images ? { GLASSBOX_MODEL_IMAGES: options.images } : {}),
      ...options.env,
    };
    const agent = await sqliteAgentConfig(loadConfig(env), quietLogger());
    open.push({ model, agent });
    return { model, agent, trace: createTraceReader(agent.store) };
  }

  it("sends an image as an image part and a text file's content; the trace and the conversation say what was attached", async () => {
    const { model, agent, trace } = await start();
    const result = await runAgent(agent, {
      sessionId: "web:a",
      userId: "ann",
      input: "What is in these?",
      attachments: [image, notes, pdf],
    });
    expect(result.stopReason).toBe("final");
    expect(result.output).toContain("Friday");

    const content = userContent(model.requests[0]!.body);
    expect(Array.isArray(content)).toBe(true);
    const parts = content as Part[];
    expect(parts[0]?.text).toContain("What is in these?");
    expect(parts[0]?.text).toContain("[Attached image: cat.png (image/png, 70 B)]");
    expect(parts[1]).toEqual({
      type: "image_url",
      image_url: { url: `data:image/png;base64,${PNG.toString("base64")}` },
    });
    expect(parts[2]?.text).toContain('<file name="notes.txt">\nThe launch is on Friday.\n</file>');
    expect(parts[2]?.text).toContain("report.pdf (application/pdf, 5 B); its content cannot be read here");
    // The second step is sent the image again (the request is pinned in view).
    expect(hasImagePart(model.requests[1]!.body)).toBe(true);

    // The run's trace lists each file and how it was given.
    const input = trace.run(result.runId)?.input ?? "";
    expect(input).toContain("Attached: cat.png (image/png, 70 B) — offered as an image");
    expect(input).toContain("Attached: notes.txt (text/plain, 24 B) — its text inlined");
    expect(input).toContain("Attached: report.pdf (application/pdf, 5 B) — named only");
    // The step's recorded request is what the model was sent, image part included...
    const recorded = trace.payload(result.runId, 2);
    const messages = Array.isArray(recorded) ? recorded : (recorded?.messages ?? []);
    expect(JSON.stringify(messages)).toContain(PNG.toString("base64"));
    // ...stored once for the run, not once per step.
    const copies = agent.store.db
      .prepare("SELECT count(*) FROM step_messages WHERE run_id = ? AND body LIKE ?")
      .pluck()
      .get(result.runId, `%${PNG.toString("base64")}%`);
    expect(copies).toBe(1);
    // The conversation keeps the text: no image data in the messages table; a later turn sees the line.
    const stored = agent.store.db.prepare("SELECT content FROM messages WHERE role = 'user'").pluck().all() as string[];
    expect(stored[0]).toContain("[Attached image: cat.png (image/png, 70 B)]");
    expect(stored[0]).toContain("(the image was shown to you in this turn only)");
    expect(stored[0]).not.toContain("base64");

    await runAgent(agent, { sessionId: "web:a", userId: "ann", input: "And the date again?" });
    const later = model.requests[2]!.body;
    expect(hasImagePart(later)).toBe(false);
    expect(JSON.stringify(later.messages)).toContain("[Attached image: cat.png (image/png, 70 B)]");
  });

  it("describes the image to a model that refuses images, and the answer still arrives; the refusal is remembered", async () => {
    const { model, agent, trace } = await start({ rejectImages: true });
    const result = await runAgent(agent, {
      sessionId: "web:b",
      userId: "ann",
      input: "What is this?",
      attachments: [image],
    });
    expect(result.stopReason).toBe("final");
    expect(result.output).toContain("cat");
    // Refused once, then sent again with the image as a sentence after its line.
    expect(hasImagePart(model.requests[0]!.body)).toBe(true);
    const retried = userContent(model.requests[1]!.body);
    expect(typeof retried).toBe("string");
    expect(retried).toContain("[Attached image: cat.png (image/png, 70 B)]");
    expect(retried).toContain("this model does not take images");
    const [first, second] = trace.steps(result.runId);
    expect(first?.modelNotes.join(" ")).toContain(
      "the model refused image input (Invalid content type. image_url is only supported by certain models.)",
    );
    // The next step goes without the image at once, saying so.
    expect(hasImagePart(model.requests[2]!.body)).toBe(false);
    expect(second?.modelNotes.join(" ")).toContain("this model refused image input earlier");
    expect(model.requests.filter((request) => hasImagePart(request.body))).toHaveLength(1);
    // The run's input says what was offered, not that the model saw it (the notes above say what it got).
    expect(trace.run(result.runId)?.input).toContain("Attached: cat.png (image/png, 70 B) — offered as an image");
  });

  it("never sends images with GLASSBOX_MODEL_IMAGES=off", async () => {
    const { model, agent, trace } = await start({ images: "off" });
    const result = await runAgent(agent, {
      sessionId: "web:c",
      userId: "ann",
      input: "What is this?",
      attachments: [image],
    });
    expect(result.stopReason).toBe("final");
    expect(model.requests.filter((request) => hasImagePart(request.body))).toHaveLength(0);
    expect(trace.steps(result.runId)[0]?.modelNotes.join(" ")).toContain("GLASSBOX_MODEL_IMAGES=off");
  });

  it("cuts a long text file to its share, saying so to the model and in the trace", async () => {
    const { model, agent, trace } = await start();
    const long = Buffer.from("line of a long log\n".repeat(2_000));
    const result = await runAgent(agent, {
      sessionId: "web:d",
      userId: "ann",
      input: "Summarise",
      attachments: [{ name: "app.log", mimeType: "text/plain", size: long.length, data: long }],
    });
    const content = userContent(model.requests[0]!.body) as string;
    expect(content).toContain(`app.log (text/plain, 37 KB); its first 12000 of ${long.length} characters follow`);
    expect(content).toContain(`…[cut: ${long.length - 12_000} more characters not shown]`);
    expect(content.length).toBeLessThan(13_000);
    expect(trace.run(result.runId)?.input).toContain(`its text inlined, cut to 12000 of ${long.length} characters`);
  });

  it("refuses an unknown GLASSBOX_MODEL_IMAGES in one sentence", () => {
    expect(() => loadConfig({ GLASSBOX_MODEL_IMAGES: "maybe" })).toThrow(
      "GLASSBOX_MODEL_IMAGES is 'maybe'; set it to auto, on or off.",
    );
    expect(loadConfig({}).model.images).toBe("auto");
  });

  it("cuts the text of a request with an image to fit a small context budget, keeping the image", async () => {
    const { model, agent } = await start({ env: { GLASSBOX_CONTEXT_TOKENS: "3000" } });
    const long = Buffer.from("a line of a long log file\n".repeat(1_000));
    await runAgent(agent, {
      sessionId: "web:e",
      userId: "ann",
      input: "Explain",
      attachments: [image, { name: "app.log", mimeType: "text/plain", size: long.length, data: long }],
    });
    const sent = model.requests[0]!.body;
    expect(hasImagePart(sent)).toBe(true);
    // Half the budget is the request's: its text parts were cut, with the marker, to share what the image leaves.
    const text = JSON.stringify(sent.messages);
    expect(text).toContain("characters to fit the context]");
    expect(text.length).toBeLessThan(12_000);
  });
});
