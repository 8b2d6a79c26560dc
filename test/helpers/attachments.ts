// Shared by the attachment tests: a tiny real image, and what the scripted model server was sent.
import type { ChatCompletionRequestBody } from "../../src/testing/scripted-model-server.js";

/** A 1x1 PNG (70 bytes). */
export const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
  "base64",
);

export type Part = { type: string; text?: string; image_url?: { url: string } };

/** The first user message's content as the server got it: a string, or parts. */
export const userContent = (body: ChatCompletionRequestBody) =>
  body.messages.find((message) => message.role === "user")?.content as string | Part[];

export const hasImagePart = (body: ChatCompletionRequestBody) =>
  body.messages.some(
    (message) => Array.isArray(message.content) && message.content.some((part) => part.type === "image_url"),
  );
