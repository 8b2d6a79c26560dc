// How model servers refuse image input, as they word it, through the real openai SDK against the
// scripted server: each refusal is read as one, the request goes again with the images described,
// and an error that is not about images stays an error.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GlassboxError } from "../../../../src/agent/errors.js";
import { createOpenAIModel } from "../../../../src/agent/llm/index.js";
import type { Message } from "../../../../src/agent/types.js";
import {
  startScriptedModelServer,
  type ScriptedModelServer,
  type ScriptedReply,
} from "../../../../src/testing/scripted-model-server.js";
import { hasImagePart, PNG } from "../../../helpers/attachments.js";

const REFUSALS: Array<[server: string, status: number, message: string]> = [
  ["OpenAI (a text-only model)", 400, "Invalid content type. image_url is only supported by certain models."],
  [
    "llama.cpp without a vision projector",
    500,
    'Failed to parse messages: Unsupported content part type: "image_url"; messages = [...]',
  ],
  [
    "llama.cpp, newer",
    500,
    "image input is not supported - hint: if this is unexpected, you may need to provide the mmproj",
  ],
  [
    "DeepSeek",
    400,
    "Failed to deserialize the JSON body into the target type: messages[1]: unknown variant `image_url`, expected `text` at line 1 column 220",
  ],
  ["LM Studio", 400, "Model does not support images. Please use a model that does."],
  ["vLLM", 400, "Qwen/Qwen2.5-7B-Instruct is not a multimodal model"],
  [
    "Groq",
    400,
    "'messages.1' : for 'role:user' the following must be satisfied[('messages.1.content' : value must be a string)]",
  ],
];

const withImage: Message[] = [
  {
    role: "user",
    content: [
      { type: "text", text: "What is this?\n\n[Attached image: cat.png (image/png, 70 B)]" },
      { type: "image_url", image_url: { url: `data:image/png;base64,${PNG.toString("base64")}` } },
    ],
  },
];

describe("servers that refuse image input", () => {
  let server: ScriptedModelServer;
  let refusal: ScriptedReply = { content: "unused" };
  beforeAll(async () => {
    server = await startScriptedModelServer({
      script: (request) => (hasImagePart(request) ? refusal : { content: "It is described as cat.png." }),
    });
  });
  afterAll(() => server.close());

  it.each(REFUSALS)("reads %s's refusal and sends the image as a sentence", async (_server, status, message) => {
    refusal = { error: { status, message } };
    const model = createOpenAIModel({
      model: "text-only",
      baseURL: server.url,
      apiKey: "k",
      maxRetries: 0,
      stream: false,
      warn: () => {},
    });
    const before = server.requests.length;
    const reply = await model.chat({ messages: withImage });
    expect(reply.content).toBe("It is described as cat.png.");
    expect(reply.notes?.join(" ")).toContain(`the model refused image input (${message})`);
    const [refused, retried] = server.requests.slice(before);
    expect(hasImagePart(refused!.body)).toBe(true);
    expect(retried?.body.messages[0]?.content).toContain("[Attached image: cat.png (image/png, 70 B)]");
    expect(retried?.body.messages[0]?.content).toContain("this model does not take images");
  });

  it("keeps an error that is not about images an error", async () => {
    refusal = { error: { status: 400, message: "This model's maximum context length is 8192 tokens." } };
    const model = createOpenAIModel({
      model: "text-only",
      baseURL: server.url,
      apiKey: "k",
      maxRetries: 0,
      stream: false,
      warn: () => {},
    });
    await expect(model.chat({ messages: withImage })).rejects.toBeInstanceOf(GlassboxError);
  });
});
