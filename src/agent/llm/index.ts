/**
 * The model layer: whatever an OpenAI-compatible server sends, turned into one ModelResponse with
 * notes for the trace, and sent back the way the server needs it. client.ts makes the requests;
 * sse.ts reads the body, stream.ts joins it, reply.ts judges it (think.ts, text-calls.ts, ids.ts),
 * outgoing.ts shapes the conversation sent; text-protocol.ts is tool calling for servers without it.
 */
export { createOpenAIModel, DEFAULT_BASE_URL, type OpenAIModelOptions, type ToolMode } from "./client.js";
export type { ImageMode } from "./images.js";
export { REEMIT_REQUEST } from "./text-protocol.js";
