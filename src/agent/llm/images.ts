/**
 * Image parts and servers that do not take them. A text-only model answers a request with an image
 * part with an error (OpenAI: "Invalid content type. image_url is only supported by certain models.";
 * llama.cpp: 'Unsupported content part type: "image_url"', a 500; DeepSeek: "unknown variant
 * `image_url`, expected `text`"; LM Studio, Ollama: "... does not support images"; Groq: "content
 * must be a string"). The request is then sent again with each image replaced by a sentence (the
 * line before it already names the file), so the run goes on; in "auto" the refusal is remembered
 * for the process. Detected from the error's words, never from the model's name.
 *
 * GLASSBOX_MODEL_IMAGES: "auto" (default) sends images and learns a refusal; "on" sends them on
 * every request (a refusal still falls back, and is not remembered); "off" never sends them.
 */
import type { ContentPart, Message, ModelRequest, ModelResponse } from "../types.js";
import { detailsOf } from "./capabilities.js";

export type ImageMode = "auto" | "on" | "off";

const NOT_SHOWN =
  "(An image was attached here, but this model does not take images: only the name, type and size above are given.)";

const IMAGES_REFUSED = [
  /image_url is only supported by certain models/i,
  /unsupported content (part )?type:?\s*"?image_url/i,
  /unknown variant `?image_url/i,
  /image input is not supported/i,
  /does not support (image|images|vision|multimodal|multi-modal|image input)\b/i,
  /not a multimodal model/i,
  /(vision|image|multimodal) (input )?(is )?not (supported|enabled)/i,
  /content.{0,40}must be a string/i,
];

/** How many image parts the messages carry. */
export function imagesIn(messages: readonly Message[]): number {
  let count = 0;
  for (const message of messages)
    if (message.role === "user" && typeof message.content !== "string")
      count += message.content.filter((part) => part.type === "image_url").length;
  return count;
}

/** The messages with each image part replaced by a sentence; a user message left with text alone goes as a string. */
export function withoutImages(messages: readonly Message[]): Message[] {
  return messages.map((message) => {
    if (message.role !== "user" || typeof message.content === "string") return message;
    const parts: ContentPart[] = message.content.map((part) =>
      part.type === "image_url" ? { type: "text", text: NOT_SHOWN } : part,
    );
    return { role: "user", content: parts.map((part) => (part.type === "text" ? part.text : "")).join("\n") };
  });
}

/** The server's words when `error` refuses image input, else undefined. */
export function imageRefusalIn(error: unknown): string | undefined {
  const details = detailsOf(error);
  if (!details || details.status === 401 || details.status === 403 || details.status === 429) return undefined;
  return IMAGES_REFUSED.some((pattern) => pattern.test(details.message)) ? details.message : undefined;
}

/**
 * Sends requests with their images, or described where the server does not take them; the reply's
 * notes say when the model was sent descriptions instead, so the trace shows what it received.
 */
export function createImageGate(mode: ImageMode, warn: (message: string) => void) {
  let refused: string | undefined;
  const plural = (count: number) => (count === 1 ? "1 image" : `${count} images`);
  const withNote = (reply: ModelResponse, note: string): ModelResponse => ({
    ...reply,
    notes: [...(reply.notes ?? []), note],
  });
  return {
    async send(request: ModelRequest, call: (request: ModelRequest) => Promise<ModelResponse>): Promise<ModelResponse> {
      const count = imagesIn(request.messages);
      if (count === 0) return call(request);
      const described = { ...request, messages: withoutImages(request.messages) };
      if (mode === "off")
        return withNote(
          await call(described),
          `images are not sent to this model (GLASSBOX_MODEL_IMAGES=off): ${plural(count)} went as a sentence each, after the line naming the file`,
        );
      if (refused !== undefined)
        return withNote(
          await call(described),
          `this model refused image input earlier (${refused}): ${plural(count)} went as a sentence each, after the line naming the file`,
        );
      try {
        return await call(request);
      } catch (error) {
        const said = imageRefusalIn(error);
        if (said === undefined) throw error;
        if (mode === "auto") {
          refused = said;
          warn(
            `The model refused image input (${said}); images now go to it as a line naming the file. Set GLASSBOX_MODEL_IMAGES=off to skip the first try, or use a model that takes images.`,
          );
        }
        return withNote(
          await call(described),
          `the model refused image input (${said}): sent again with ${plural(count)} as a sentence each, after the line naming the file`,
        );
      }
    },
  };
}
