// URLs as people and logs see them (src/redact.ts): no user and password, no credential in the query,
// wherever a URL reaches a sentence (the model client's, the database's) or a log line.
import { createServer } from "node:net";
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { GlassboxError } from "../../src/agent/errors.js";
import { createOpenAIModel } from "../../src/agent/llm/index.js";
import { createLogger } from "../../src/logger.js";
import { redactUrl, redactUrlsIn } from "../../src/redact.js";
import { locationOf } from "../../src/store/postgres-client.js";

/** A port on 127.0.0.1 that nothing listens on (one was just let go). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe("redactUrl", () => {
  it("hides the user and password, and the values of credential query keys, keeping the rest as written", () => {
    expect(redactUrl("http://user:S3cretPw@models.internal:8000/v1")).toBe("http://[redacted]@models.internal:8000/v1");
    expect(redactUrl("https://sk-abc@host/v1")).toBe("https://[redacted]@host/v1");
    expect(
      redactUrl("https://host/v1?api-version=2024-06-01&api-key=K3y&access_token=T0k&X-Amz-Signature=S1g&sig=s#frag"),
    ).toBe(
      "https://host/v1?api-version=2024-06-01&api-key=[redacted]&access_token=[redacted]&X-Amz-Signature=[redacted]&sig=[redacted]#frag",
    );
    expect(redactUrl("http://127.0.0.1:11434/v1")).toBe("http://127.0.0.1:11434/v1");
    expect(redactUrl("not a url")).toBe("not a url");
  });

  it("keeps a database user where asked, never its password", () => {
    expect(redactUrl("postgres://glassbox:pw@db:5432/app?password=x&sslmode=require", { keepUser: true })).toBe(
      "postgres://glassbox@db:5432/app?password=[redacted]&sslmode=require",
    );
  });

  it("finds URLs inside free text", () => {
    expect(redactUrlsIn('failed: "http://u:p@a.example/x?token=t" then https://b.example/y.')).toBe(
      'failed: "http://[redacted]@a.example/x?token=[redacted]" then https://b.example/y.',
    );
  });
});

describe("credentials in URLs never reach a sentence or a log line", () => {
  it("credentials in OPENAI_BASE_URL reach the chat: the model server's sentence names it without them", async () => {
    const port = await closedPort();
    const model = createOpenAIModel({
      baseURL: `http://user:S3cretPw@127.0.0.1:${port}/v1?api-key=K3yValue`,
      model: "gpt-4o-mini",
      maxRetries: 0,
    });
    const failure = await model.chat({ messages: [{ role: "user", content: "hi" }] }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(GlassboxError);
    const sentence = (failure as GlassboxError).message;
    expect(sentence).toContain(`127.0.0.1:${port}/v1`);
    expect(sentence).not.toMatch(/S3cretPw|K3yValue|user:/);
  });

  it("a password in GLASSBOX_DATABASE_URL's query is not printed", () => {
    expect(locationOf("postgres://glassbox:pw@db:5432/app?password=S3cret")).toBe(
      "postgres://glassbox@db:5432/app?password=[redacted]",
    );
  });

  it("a log line's message and fields lose a URL's password", () => {
    const lines: string[] = [];
    const destination = new Writable({
      write(chunk, _encoding, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const log = createLogger({ level: "info", destination });
    log.warn({ url: "http://bot:S3cretPw@proxy.internal/v1" }, "cannot reach http://bot:S3cretPw@proxy.internal/v1");
    expect(lines.join("")).toContain("proxy.internal/v1");
    expect(lines.join("")).not.toContain("S3cretPw");
  });
});
