/**
 * "What can you do here?": asked in any chat (a mention, a DM, the web page), the bot answers for
 * this person in this place, without a model call: the tools it may use here and which ask first
 * (and whom), what is left of their daily budget, what it remembers, and how to have it erased.
 */
import type { AgentConfig, NotesScope } from "../agent/run.js";
import { dayStartOf, type DailyLimits } from "../agent/quota.js";
import type { StorePort } from "../store/port.js";
import { approverEntry, approverInWords } from "../tools/approver-entries.js";
import type { ToolDefinition } from "../tools/types.js";
import { budgetLeft, type BudgetReading } from "./channel-budget.js";

/** The question, however it is punctuated or cased: "what can you do here?", "What can you do?". */
/** The question as a button or command asks it. */
export const CAPABILITIES_QUESTION_TEXT = "What can you do here?";

export const CAPABILITIES_QUESTION = /^\s*what\s+can\s+you\s+do(\s+here)?(\s+for\s+me)?\s*\??\s*$/i;

/**
 * Who decides a dangerous tool's calls made by `userId` in `sessionId`: named approvers but them (the
 * groups or roles of the session's platform with what they are; another platform's left out), how
 * many, whether they may.
 */
function whoApproves(tool: ToolDefinition, userId: string | undefined, sessionId: string): string {
  if (tool.requesterConfirms) return "you confirm it, as it is done in your name (or an approver)";
  const own = tool.requesterMayApprove !== false;
  const plain = (id: string) => id.slice(id.lastIndexOf(":") + 1);
  const platformKind = sessionId.startsWith("slack:") ? "group" : sessionId.startsWith("discord:") ? "role" : "user";
  const others = tool.approvers
    ?.filter((id) => [platformKind, "user"].includes(approverEntry(id).kind))
    .filter((id) => !userId || plain(id) !== plain(userId))
    .map(approverInWords);
  const needed = tool.approvalsNeeded ?? 1;
  if (needed > 1) {
    const from = others?.length ? others.join(", ") : "the approvers";
    return `${needed === 2 ? "two" : needed} of ${from}${own ? " and you" : ""} must approve${own ? "" : ", not you"}`;
  }
  if (others?.length) return `${others.join(", ")}${own ? " or you" : ""} decide${own ? "" : ", not you"}`;
  return own ? "you (or an approver) decide" : "an approver other than you decides";
}

export async function describeCapabilities(
  agent: AgentConfig,
  store: Pick<StorePort, "userUsageSince">,
  asker: { userId: string | undefined; sessionId: string },
  dailyLimits: DailyLimits | undefined,
  budgets: BudgetReading[] = [],
  memory: { retentionDays?: number; notes?: NotesScope } = {},
  now = new Date(),
): Promise<string> {
  const { userId, sessionId } = asker;
  const tools = agent.tools.list().map((tool) => tool.definition);
  const lines = ["Here is what I can do here, for you:"];
  if (tools.length === 0) lines.push("- I can answer and talk things through; I have no tools in this channel.");
  else {
    const plain = tools.filter((tool) => !tool.dangerous).map((tool) => tool.name);
    if (plain.length > 0) lines.push(`- Tools I use on my own: ${plain.join(", ")}.`);
    for (const tool of tools.filter((candidate) => candidate.dangerous)) {
      const when = typeof tool.dangerous === "function" ? "asks first when its arguments call for it" : "asks first";
      lines.push(`- ${tool.name} ${when}: ${whoApproves(tool, userId, sessionId)}.`);
    }
  }
  if (userId && (dailyLimits?.tokens !== undefined || dailyLimits?.cost !== undefined)) {
    const used = await store.userUsageSince(userId, dayStartOf(now));
    const parts: string[] = [];
    if (dailyLimits.tokens !== undefined) {
      const left = Math.max(0, dailyLimits.tokens - used.promptTokens - used.completionTokens);
      parts.push(`${left.toLocaleString("en-US")} of ${dailyLimits.tokens.toLocaleString("en-US")} tokens`);
    }
    if (dailyLimits.cost !== undefined && used.cost !== null)
      parts.push(`$${Math.max(0, dailyLimits.cost - used.cost).toFixed(2)} of $${dailyLimits.cost.toFixed(2)}`);
    if (parts.length > 0) lines.push(`- Left of your budget today (UTC): ${parts.join(", ")}.`);
  }
  for (const reading of budgets) lines.push(`- ${budgetLeft(reading)}`);
  lines.push(...memoryLines(memory));
  return lines.join("\n");
}

/** What is remembered here, which notes runs here are shown, for how long, and how it goes. */
function memoryLines({ retentionDays, notes = "channel" }: { retentionDays?: number; notes?: NotesScope }): string[] {
  const kept =
    retentionDays === undefined
      ? "until someone erases it"
      : `for ${retentionDays} day${retentionDays === 1 ? "" : "s"} after its last message, then deleted`;
  const shown: Record<NotesScope, string> = {
    channel: "your notes and those shared with this channel are shown to me here",
    mine: "only your own notes are shown to me here",
    none: "no remembered notes are shown to me here",
  };
  return [
    `- I remember this conversation, summarising its oldest parts, ${kept}; and the notes you ask me to remember (${shown[notes]}).`,
    "  `forget` removes a note. Whoever runs glassbox can erase everything of yours (glassbox erase --user).",
  ];
}
