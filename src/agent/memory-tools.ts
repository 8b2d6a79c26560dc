import type { FactStore } from "./contracts.js";
import type { AnyTool, ToolDefinition } from "../tools/types.js";
import { channelOf } from "./memory.js";

export interface MemoryToolOptions {
  /**
   * Each platform's approvers (SLACK_APPROVERS, DISCORD_APPROVERS), by the first part of a session
   * key ("slack", "discord"): they may forget any note shared with a channel of their platform.
   */
  approvers?: Readonly<Record<string, readonly string[]>>;
}

/** Long-term facts as tools, kept through the store port: the model decides what is worth remembering, per user or per channel. */
export function createMemoryTools(
  store: Pick<FactStore, "addFact" | "forgetFact">,
  options: MemoryToolOptions = {},
): AnyTool[] {
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
          description: "True to share it with everyone in this channel (the user confirms it first).",
        },
      },
      required: ["fact"],
      additionalProperties: false,
    },
    // A note every member's runs in the channel will read is shown to the person first, on a card
    // they confirm: text in a file or a tool result must not plant one in their name.
    dangerous: ({ shared_with_channel }) => shared_with_channel === true,
    // The note is kept in their name: confirming it is theirs whatever the self-approval setting says.
    requesterConfirms: true,
    handler: async ({ fact, shared_with_channel }, context) => {
      if (!shared_with_channel)
        return { factId: await store.addFact(context.userId, "user", fact.trim()), fact: fact.trim(), scope: "user" };
      const origin = { runId: context.runId, readContent: context.readContent === true };
      const factId = await store.addFact(context.userId, channelOf(context.sessionId), fact.trim(), origin);
      return { factId, fact: fact.trim(), scope: "channel" };
    },
  };
  const forget: ToolDefinition<{ fact_id: number }> = {
    name: "forget",
    description:
      "Deletes a remembered fact by its id (shown as 'fact N' where facts are listed): the user's own, or a note shared with this channel (an approver: with any channel).",
    parameters: {
      type: "object",
      properties: { fact_id: { type: "integer", minimum: 1, description: "The fact's id." } },
      required: ["fact_id"],
      additionalProperties: false,
    },
    handler: async ({ fact_id }, context) => {
      // Anyone in a channel may forget what was shared with it, as anyone there could be misled by it;
      // an approver may forget a note of any channel of their platform, wherever they ask.
      const platform = context.sessionId.split(":")[0] ?? "";
      const approver = platform !== "" && options.approvers?.[platform]?.includes(context.userId) === true;
      const forgotten = await store.forgetFact(
        context.userId,
        fact_id,
        channelOf(context.sessionId),
        approver ? `${platform}:` : undefined,
      );
      if (!forgotten)
        throw new Error(
          `There is no fact ${fact_id} of this user or shared with ${approver ? "a channel on this platform" : "this channel"} to forget.`,
        );
      return { forgotten: fact_id };
    },
  };
  return [remember, forget];
}
