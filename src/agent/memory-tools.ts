import type { FactStore } from "./contracts.js";
import type { AnyTool, ToolDefinition } from "../tools/types.js";
import { channelOf } from "./memory.js";

/** Long-term facts as tools, kept through the store port: the model decides what is worth remembering, per user or per channel. */
export function createMemoryTools(store: Pick<FactStore, "addFact" | "forgetFact">): AnyTool[] {
  const remember: ToolDefinition<{ fact: string; shared_with_channel?: boolean }> = {
    name: "remember",
    description:
      "Stores a lasting fact about the user (a preference, a name, an id, a decision) so it can be recalled in later conversations. Use a short, self-contained sentence.",
    parameters: {
      type: "object",
      properties: {
        fact: {
          type: "string",
          minLength: 3,
          maxLength: 500,
          description: "The fact, e.g. 'Prefers answers in French'.",
        },
        shared_with_channel: {
          type: "boolean",
          default: false,
          description: "True to share it with everyone in this channel.",
        },
      },
      required: ["fact"],
      additionalProperties: false,
    },
    handler: async ({ fact, shared_with_channel }, context) => {
      const scope = shared_with_channel ? channelOf(context.sessionId) : "user";
      return {
        factId: await store.addFact(context.userId, scope, fact.trim()),
        fact: fact.trim(),
        scope: shared_with_channel ? "channel" : "user",
      };
    },
  };
  const forget: ToolDefinition<{ fact_id: number }> = {
    name: "forget",
    description: "Deletes a remembered fact by its id (shown as 'fact N' where facts are listed).",
    parameters: {
      type: "object",
      properties: { fact_id: { type: "integer", minimum: 1, description: "The fact's id." } },
      required: ["fact_id"],
      additionalProperties: false,
    },
    handler: async ({ fact_id }, context) => {
      if (!(await store.forgetFact(context.userId, fact_id)))
        throw new Error(`There is no fact ${fact_id} of this user to forget.`);
      return { forgotten: fact_id };
    },
  };
  return [remember, forget];
}
