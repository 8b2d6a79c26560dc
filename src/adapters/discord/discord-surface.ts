/**
 * How one run looks in a Discord channel: the typing indicator (renewed before it lapses), one
 * progress message edited with tool activity, then the answer in messages of at most 2,000
 * characters. Approvals are a message with Approve / Deny buttons.
 */
import {
  ActionRowBuilder,
  ButtonBuilder,
  ButtonStyle,
  makeURLSearchParams,
  Routes,
  SnowflakeUtil,
  type APIMessage,
  type Client,
  type Message,
  type MessageMentionOptions,
  type SendableChannels,
} from "discord.js";
import type { Approval } from "../../agent/approvals.js";
import type { ChatSurface } from "../../conversations/conversations.js";
import type { AgentEvent } from "../../agent/events.js";
import { answeredBy, type RunResult } from "../../agent/run.js";
import type { Logger } from "../../logger.js";
import { argumentsForDisplay, codeName, describeCall } from "../describe-call.js";
import { approvers, whoDecides } from "../approval-replies.js";
import { splitMessage } from "../split-message.js";
import { feedbackId, feedbackRow } from "./discord-feedback.js";
import type { TraceLink } from "../trace-link.js";

export const DISCORD_MESSAGE_LIMIT = 2_000;
// Discord shows "typing" for about 10 seconds; renew it a little before.
const TYPING_RENEW_MS = 8_000;
const ARGUMENTS_LIMIT = 1_500; // with the question around it, within a message's 2,000 characters
/** How far before a run's start its answer is looked for (clocks differ), and how many pages of 100 messages at most. */
const LOOKBACK_MS = 300_000;
const LOOKUP_PAGES = 3;

/**
 * What the bot's messages may ping: nobody. The text comes from the model (answers, tool calls),
 * so `@everyone`, `@here`, a role or a user it writes shows as written and notifies no one. Set on
 * every message and edit (and as the client's default) rather than trusting the text.
 */
export const NO_PINGS: MessageMentionOptions = { parse: [] };

export const approveId = (approvalId: string) => `glassbox:approve:${approvalId}`;
export const denyId = (approvalId: string) => `glassbox:deny:${approvalId}`;

/** While a request waits for a run slot (GLASSBOX_MAX_CONCURRENT_RUNS); removed once it starts. */
export const QUEUED_TEXT = "⏳ Queued: I'm busy with other requests; yours starts as soon as one finishes.";

/** `traceLink`: each answer links to its run in the trace viewer (a link button beside 👍 / 👎). */
export function openDiscordSurface(client: Client, channelId: string, log: Logger, traceLink?: TraceLink): ChatSurface {
  let channel: Promise<SendableChannels> | undefined;
  const target = () =>
    // allowUnknownGuild: a worker process's client has no gateway, so no guild is cached to build the channel on.
    (channel ??= client.channels.fetch(channelId, { allowUnknownGuild: true }).then((found) => {
      if (!found?.isSendable()) throw new Error(`cannot post in channel ${channelId}`);
      return found;
    }));
  let work: Promise<unknown> = Promise.resolve();
  // Discord calls go out one at a time, in the order of the events; a failed call is logged, not fatal.
  const then = (step: () => Promise<unknown>) => {
    work = work
      .then(step)
      .catch((error: unknown) => log.warn({ error: (error as Error).message, channelId }, "a Discord call failed"));
  };

  let typing: NodeJS.Timeout | undefined;
  const keepTyping = () => {
    const type = () => target().then((found) => found.sendTyping());
    // The first one in line, so it shows before the progress message; renewals beside the rest.
    then(() => type().catch(() => {}));
    typing = setInterval(() => void type().catch(() => {}), TYPING_RENEW_MS);
    typing.unref();
  };

  const activity: string[] = [];
  // Messages are edited and deleted through their channel: a worker's client caches no channel to reach them by.
  let progress: Message | undefined;
  // The activity as it was at the event: the calls before it may still be waiting their turn.
  const showActivity = (content: string) => async () => {
    const channel = await target();
    if (progress) await channel.messages.edit(progress.id, { content, allowedMentions: NO_PINGS });
    else progress = await channel.send({ content, allowedMentions: NO_PINGS });
  };

  let queued: Message | undefined; // the "queued" note while the request waits for a run slot

  return {
    queued() {
      then(async () => {
        queued = await (await target()).send({ content: QUEUED_TEXT, allowedMentions: NO_PINGS });
      });
    },

    async note(text: string) {
      then(async () => (await target()).send({ content: text, allowedMentions: NO_PINGS }));
      await work;
    },

    onEvent(event: AgentEvent) {
      if (event.type === "run_start" || event.type === "run_resumed") {
        const note = queued;
        queued = undefined;
        if (note) then(async () => (await target()).messages.delete(note.id));
      }
      if ((event.type === "run_start" || event.type === "run_resumed") && !typing) keepTyping();
      else if (event.type === "tool_start") {
        activity.push(`⏳ calling ${describeCall(event.name, event.arguments)}`);
        then(showActivity(activity.join("\n")));
      } else if (event.type === "tool_end") {
        const { name, envelope, durationMs } = event.record;
        const line =
          envelope.status === "success"
            ? `✅ ${name} (${Math.round(durationMs)} ms)`
            : `⚠️ ${name}: ${envelope.error.type}`;
        const index = activity.findIndex((entry) => entry.includes(`calling ${name}(`));
        if (index >= 0) activity[index] = line;
        else activity.push(line);
        then(showActivity(activity.join("\n")));
      }
    },

    async finish(result: RunResult) {
      clearInterval(typing);
      const text = answeredBy(result.stopReason)
        ? result.output || "(no answer)"
        : result.stopReason === "cancelled"
          ? "Stopped."
          : result.stopReason === "error"
            ? result.output
            : undefined;
      if (text) {
        const parts = splitMessage(text, DISCORD_MESSAGE_LIMIT);
        // An answer's last message carries 👍 / 👎 for its run.
        const rated = answeredBy(result.stopReason);
        for (const [index, part] of parts.entries()) {
          const last = rated && index === parts.length - 1;
          const components = last ? [feedbackRow(result.runId, traceLink?.(result.runId))] : [];
          then(async () => (await target()).send({ content: part, components, allowedMentions: NO_PINGS }));
        }
      }
      await work;
    },

    async askApproval(approval: Approval) {
      await work;
      const posted = await (await target()).send({
        content: approvalQuestionText(approval),
        components: [approvalButtons(approval)],
        allowedMentions: { parse: [], users: [approval.requester] }, // the person whose decision it is
      });
      return `${posted.channelId}:${posted.id}`;
    },

    shownAlready: (runId, since) => answerPosted(client, channelId, runId, since),
  };
}

/**
 * Whether the channel holds a message with run `runId`'s feedback buttons, posted since `since`: its
 * messages after that moment, over REST (a worker has no gateway), oldest pages first. Discord answers
 * a channel whose history the bot may not read (no Read Message History) with no messages.
 */
async function answerPosted(client: Client, channelId: string, runId: string, since: Date): Promise<boolean> {
  const wanted = feedbackId("up", runId);
  let after = SnowflakeUtil.generate({
    timestamp: Math.max(Number(SnowflakeUtil.epoch), since.getTime() - LOOKBACK_MS),
  }).toString();
  for (let page = 0; page < LOOKUP_PAGES; page++) {
    const messages = (await client.rest.get(Routes.channelMessages(channelId), {
      query: makeURLSearchParams({ after, limit: 100 }),
    })) as APIMessage[];
    if (messages.some((message) => holdsButton(message.components ?? [], wanted))) return true;
    if (messages.length < 100) return false;
    after = messages.reduce((newest, message) => (BigInt(message.id) > BigInt(newest) ? message.id : newest), after);
  }
  return false;
}

/** Components (action rows and what they hold, at any depth) with a button whose custom_id is `customId`. */
function holdsButton(components: readonly unknown[], customId: string): boolean {
  return components.some((component) => {
    const { custom_id: id, components: inner } = component as { custom_id?: unknown; components?: unknown };
    return id === customId || (Array.isArray(inner) && holdsButton(inner, customId));
  });
}

/** The approval's question: who asked for which call, with which arguments, who may decide and until when. */
export function approvalQuestionText(approval: Approval): string {
  // No backtick is left in the arguments to close the block early, nor a hidden character.
  const call = `\`\`\`json\n${argumentsForDisplay(approval.arguments, ARGUMENTS_LIMIT)}\n\`\`\``;
  const requester = `<@${approval.requester}>`;
  const tool = `\`${codeName(approval.toolName)}\``;
  const expires = `<t:${Math.floor(Date.parse(approval.expiresAt) / 1000)}:R>`;
  if (approval.policy.requesterConfirms === true)
    return `🔒 **Confirmation needed**: I would run ${tool} in ${requester}'s name\n${call}\n${requester}, approve it only if you asked for it: it is done in your name, so you can confirm it whoever decides other calls here (an approver can too); it expires ${expires}.`;
  return `🔒 **Approval needed**: ${requester} asked me to run ${tool}\n${call}\n${whoDecides(approval)}; it expires ${expires}.`;
}

export function approvalButtons(approval: Approval): ActionRowBuilder<ButtonBuilder> {
  return new ActionRowBuilder<ButtonBuilder>().addComponents(
    new ButtonBuilder().setCustomId(approveId(approval.id)).setLabel("Approve").setStyle(ButtonStyle.Success),
    new ButtonBuilder().setCustomId(denyId(approval.id)).setLabel("Deny").setStyle(ButtonStyle.Danger),
  );
}

/** The approval message once decided: the question stays, the buttons go, the outcome is added. */
export function approvalOutcomeText(approval: Approval): string {
  const when = approval.decidedAt ? ` <t:${Math.floor(Date.parse(approval.decidedAt) / 1000)}:t>` : "";
  const outcome =
    approval.status === "approved"
      ? `✅ Approved by ${approvers(approval)}${when}`
      : approval.status === "denied"
        ? `❌ Denied by <@${approval.decidedBy}>${when}`
        : approval.decidedBy === "superseded"
          ? "⌛ No longer needed: the conversation moved on before anyone decided."
          : "⌛ Expired: nobody decided in time, so it was not run.";
  return `🔒 \`${codeName(approval.toolName)}\` for <@${approval.requester}>: ${outcome}`;
}
