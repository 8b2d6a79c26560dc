/**
 * How one run looks in a Slack thread. Where the app has the assistant status, the status says
 * what the run is doing ("is thinking…", "is calling get_order_status(order_id: …)…"); elsewhere a
 * placeholder message does, edited as tools start and end. Then the answer: streamed with Slack's
 * streaming API once there is more than a short reply's worth of it, posted whole when it is short,
 * and written by editing a message where the workspace refuses streaming.
 */
import type { WebClient } from "@slack/web-api";
import type { KnownBlock } from "@slack/types";
import slackifyMarkdown from "slackify-markdown";
import type { Approval } from "../../agent/approvals.js";
import type { ChatSurface } from "../../conversations/conversations.js";
import type { AgentEvent } from "../../agent/events.js";
import { answeredBy, type RunResult } from "../../agent/run.js";
import type { Logger } from "../../logger.js";
import { describeCall } from "../describe-call.js";
import { splitMessage } from "../split-message.js";
import { approvalQuestion } from "./approval-blocks.js";
import { feedbackButtons, feedbackValueOf, plainFeedbackButtons } from "./feedback-blocks.js";
import { answerButtons } from "./trace-button.js";
import type { TraceLink } from "../trace-link.js";
import type { AgentSessions } from "./slack-agent-view.js";
import { createMarkdownGuard, mrkdwnText, statusText, withoutBroadcasts } from "./slack-text.js";
import { withoutViewingNote } from "./slack-viewing.js";

/** Where a run talks: a channel, and the thread (absent for a top-level DM conversation). */
export interface SlackPlace {
  teamId: string;
  channel: string;
  threadTs?: string;
  /** The person the answer is for (Slack's streaming API wants to know). */
  userId: string;
}

// Slack advises at most 4,000 characters of text per message; keep a margin for formatting.
export const SLACK_MESSAGE_LIMIT = 3_900;
const EDIT_INTERVAL_MS = 1_000;
/** The status changes at most this often: Slack rate-limits it, and nobody reads a 100 ms flash. */
export const STATUS_INTERVAL_MS = 1_000;
const STATUS_LIMIT = 150;
const THINKING = "is thinking…";
/** What Slack rotates through under the status until the run says more (at most 10, Slack's limit). */
export const LOADING_MESSAGES = ["Reading your message…", "Thinking it through…", "Working out which tools can help…"];

/** While a request waits for a run slot (GLASSBOX_MAX_CONCURRENT_RUNS); removed once it starts. */
export const QUEUED_TEXT = "_Queued: I'm busy with other requests; yours starts as soon as one finishes._";

/** A section's text holds at most 3,000 characters: the part that carries the feedback buttons fits in one. */
const SECTION_LIMIT = 3_000;

/**
 * The clients (one per workspace) whose Slack refused the feedback buttons element (invalid_blocks,
 * Slack's answer for a block it does not take there): their answers carry plain 👍 / 👎 buttons from then on.
 */
const plainFeedbackClients = new WeakSet<WebClient>();
const refusedBlocks = (error: unknown) => (error as { data?: { error?: string } }).data?.error === "invalid_blocks";

/** How far before a run's start its answer is looked for (clocks differ), and how many pages of the conversation at most. */
const LOOKBACK_SECONDS = 300;
const LOOKUP_PAGES = 3;

/**
 * `agentSessions`: a DM thread is an agent session, "processing" (with Slack's stop button) while a
 * run works and settled when it ends. `traceLink`: each answer links to its run in the trace viewer.
 */
export function openSlackSurface(
  client: WebClient,
  place: SlackPlace,
  log: Logger,
  agentSessions?: AgentSessions,
  traceLink?: TraceLink,
): ChatSurface {
  const thread = place.threadTs ? { thread_ts: place.threadTs } : {};
  // The session's status goes beside the thread's messages (not behind them), in its own order.
  const threadTs = place.threadTs;
  const session = agentSessions && threadTs && place.channel.startsWith("D") ? { ...place, threadTs } : undefined;
  let sessionWork: Promise<unknown> | undefined;
  let work: Promise<unknown> = Promise.resolve();
  // Slack calls go out one at a time, in the order of the events, and a failed call is logged, not fatal.
  const then = (step: () => Promise<unknown>) => {
    work = work
      .then(step)
      .catch((error: unknown) =>
        log.warn({ error: (error as Error).message, channel: place.channel }, "a Slack call failed"),
      );
  };

  let statusShown = false;
  let statusSent = ""; // what the status says now
  let statusWanted = ""; // what the run is doing now
  let statusSentAt = 0;
  let statusTimer: NodeJS.Timeout | undefined;
  let answered = false; // a reply clears the status in Slack: no update after it
  const runningTools: string[] = [];
  let progressTs: string | undefined;
  let placeholderTs: string | undefined; // the "_Thinking…_" message while it says nothing else
  const activity: string[] = [];
  let answer = "";
  let stream: ReturnType<WebClient["chatStream"]> | undefined;
  let streamed = ""; // everything given to the stream, flushed or still in its buffer (as the model wrote it)
  const guard = createMarkdownGuard(); // what the stream is given: no command, no broadcast word
  let streaming = Boolean(place.threadTs); // the streaming API only works in threads
  let editTs: string | undefined;
  let lastEdit = 0;

  let queuedTs: string | undefined; // the "queued" note while the request waits for a run slot
  const showThinking = async () => {
    if (queuedTs) await client.chat.delete({ channel: place.channel, ts: queuedTs }).catch(() => undefined);
    queuedTs = undefined;
    if (place.threadTs) {
      try {
        await client.assistant.threads.setStatus({
          channel_id: place.channel,
          thread_ts: place.threadTs,
          status: THINKING,
          loading_messages: LOADING_MESSAGES,
        });
        statusShown = true;
        statusSent = statusWanted = THINKING;
        statusSentAt = Date.now();
        return;
      } catch {
        // not an assistant app here: a placeholder message says it instead
      }
    }
    progressTs = placeholderTs = (
      await client.chat.postMessage({ channel: place.channel, ...thread, text: "_Thinking…_" })
    ).ts;
  };

  /** The status follows the run at most once per STATUS_INTERVAL_MS, saying only the latest. */
  const wantStatus = (status: string) => {
    const safe = statusText(status); // it names tools and their arguments, which the model chose
    statusWanted = safe.length > STATUS_LIMIT ? `${safe.slice(0, STATUS_LIMIT - 1)}…` : safe;
    if (statusTimer) return;
    statusTimer = setTimeout(
      () => {
        statusTimer = undefined;
        then(async () => {
          if (answered || statusWanted === statusSent) return;
          statusSent = statusWanted;
          statusSentAt = Date.now();
          await client.assistant.threads.setStatus({
            channel_id: place.channel,
            thread_ts: place.threadTs as string,
            status: statusSent,
          });
        });
      },
      Math.max(0, statusSentAt + STATUS_INTERVAL_MS - Date.now()),
    );
  };
  const statusNow = () => (runningTools.length ? `is calling ${runningTools.join(", ")}…` : THINKING);

  /** A placeholder that the answer did not replace would say "Thinking…" forever: it goes. */
  const removePlaceholder = async () => {
    const ts = placeholderTs;
    placeholderTs = undefined;
    if (ts) await client.chat.delete({ channel: place.channel, ts });
  };

  // The text is taken when the event happens: a fast tool's "calling …" line still shows before its result.
  const showActivity = async (text: string) => {
    placeholderTs = undefined; // the message shows the activity now
    if (progressTs) await client.chat.update({ channel: place.channel, ts: progressTs, text });
    else progressTs = (await client.chat.postMessage({ channel: place.channel, ...thread, text })).ts;
  };

  const streamAnswer = async (delta: string) => {
    if (streaming) {
      try {
        stream ??= client.chatStream({
          channel: place.channel,
          thread_ts: place.threadTs as string,
          recipient_team_id: place.teamId,
          recipient_user_id: place.userId,
        });
        streamed += delta;
        const safe = guard.push(delta);
        if (safe) await stream.append({ markdown_text: safe });
        return;
      } catch (error) {
        log.info({ error: (error as Error).message }, "Slack refused streaming; editing a message instead");
        streaming = false;
        stream = undefined;
      }
    }
    if (Date.now() - lastEdit < EDIT_INTERVAL_MS) return; // the final answer is written at the end anyway
    lastEdit = Date.now();
    const text = `${withoutBroadcasts(mrkdwnOf(answer)).slice(0, SLACK_MESSAGE_LIMIT)} …`;
    if (editTs) await client.chat.update({ channel: place.channel, ts: editTs, text });
    else editTs = (await client.chat.postMessage({ channel: place.channel, ...thread, text })).ts;
  };

  /**
   * Sends with Slack's feedback buttons for the run (and its trace link, with a public URL); where
   * Slack refuses them, sends again with plain buttons, and remembers that for the workspace.
   */
  const withFeedback = async (runId: string, send: (buttons: KnownBlock[]) => Promise<unknown>) => {
    const link = traceLink?.(runId);
    if (!plainFeedbackClients.has(client)) {
      try {
        return await send(answerButtons(feedbackButtons(runId), runId, link));
      } catch (error) {
        if (!refusedBlocks(error)) throw error;
        plainFeedbackClients.add(client);
        log.info(
          { teamId: place.teamId },
          "Slack refused its feedback buttons here; answers carry plain 👍 / 👎 buttons instead",
        );
      }
    }
    return send(answerButtons(plainFeedbackButtons(runId), runId, link));
  };

  const postAnswer = async (markdown: string, runId: string) => {
    if (stream?.ts) {
      const active = stream;
      try {
        const tail = guard.end(); // the tail the guard held back
        // A refused stop keeps the stream open with its buffer: the retry sends only other buttons.
        let tried = false;
        await withFeedback(runId, (buttons) => {
          const markdown = tried ? {} : { markdown_text: tail };
          tried = true;
          return active.stop({ ...markdown, blocks: buttons });
        });
        return;
      } catch (error) {
        log.info({ error: (error as Error).message }, "Slack refused to finish the stream; posting the answer instead");
      }
    }
    // A short answer never left the streamer's buffer: one message says what the stream would have.
    if (stream && streamed) markdown = streamed;
    const parts = splitMessage(withoutBroadcasts(mrkdwnOf(markdown)), SLACK_MESSAGE_LIMIT);
    // The last part carries the buttons, shown as a section above them: within a section's limit.
    if ((parts.at(-1) ?? "").length > SECTION_LIMIT) parts.push(...splitMessage(parts.pop() ?? "", SECTION_LIMIT));
    const rated = parts.pop() ?? "";
    // The first part replaces the message that streamed the answer, or the "Thinking…" placeholder.
    let replacing = editTs ?? placeholderTs;
    if (!editTs) placeholderTs = undefined;
    const post = (message: { text: string; blocks?: KnownBlock[] }) => {
      const ts = replacing;
      replacing = undefined;
      return ts
        ? client.chat.update({ channel: place.channel, ts, ...message })
        : client.chat.postMessage({ channel: place.channel, ...thread, ...message });
    };
    for (const text of parts) await post({ text });
    const target = replacing;
    await withFeedback(runId, (buttons) => {
      replacing = target; // a refused attempt changed nothing: the retry goes to the same message
      return post({
        text: rated,
        blocks: [{ type: "section", text: { type: "mrkdwn", text: rated || " " } }, ...buttons],
      });
    });
  };

  return {
    onEvent(event: AgentEvent) {
      if (event.type === "run_start" || event.type === "run_resumed") {
        then(showThinking);
        if (session && agentSessions && !event.parent) {
          const input = event.type === "run_start" ? withoutViewingNote(event.input) : undefined;
          sessionWork = agentSessions.working(client, { ...session, user: place.userId, input });
        }
      } else if (event.type === "tool_start") {
        const call = describeCall(event.name, event.arguments);
        runningTools.push(call);
        const status = statusNow();
        activity.push(`:hourglass_flowing_sand: calling ${call}`);
        const text = mrkdwnText(activity.join("\n")); // the calls are plain text, as the model wrote them
        then(async () => (statusShown ? wantStatus(status) : showActivity(text)));
      } else if (event.type === "tool_end") {
        const { name, envelope, durationMs } = event.record;
        const running = runningTools.findIndex((call) => call.startsWith(`${name}(`));
        if (running >= 0) runningTools.splice(running, 1);
        const status = statusNow();
        const line =
          envelope.status === "success"
            ? `:white_check_mark: ${name} (${Math.round(durationMs)} ms)`
            : `:warning: ${name}: ${envelope.error.type}`;
        const index = activity.findIndex((entry) => entry.includes(`calling ${name}(`));
        if (index >= 0) activity[index] = line;
        else activity.push(line);
        const text = mrkdwnText(activity.join("\n"));
        then(async () => (statusShown ? wantStatus(status) : showActivity(text)));
      } else if (event.type === "model_delta") {
        answer += event.text;
        const delta = event.text;
        then(() => streamAnswer(delta));
      } else if (event.type === "model_start") {
        // A stream cannot take back what an earlier step said ("Let me look that up."): a paragraph
        // break keeps it apart from what follows.
        if (answer) {
          then(async () => {
            if (!stream) return;
            streamed += "\n\n";
            const safe = guard.push("\n\n"); // after any tail the guard still holds
            if (safe) await stream.append({ markdown_text: safe });
          });
        }
        answer = ""; // a new step: only the last step's text is the answer
      }
    },

    queued() {
      then(async () => {
        queuedTs = (await client.chat.postMessage({ channel: place.channel, ...thread, text: QUEUED_TEXT })).ts;
      });
    },

    async note(text: string) {
      then(() => client.chat.postMessage({ channel: place.channel, ...thread, text: withoutBroadcasts(text) }));
      await work;
    },

    async finish(result: RunResult, posted?: () => Promise<unknown>) {
      answered = true;
      clearTimeout(statusTimer);
      if (answeredBy(result.stopReason)) then(() => postAnswer(result.output, result.runId));
      else if (result.stopReason === "cancelled")
        then(() => client.chat.postMessage({ channel: place.channel, ...thread, text: "Stopped." }));
      else if (result.stopReason === "error") {
        log.warn(
          { code: result.error?.code, error: result.output, channel: place.channel, runId: result.runId },
          "a run failed",
        );
        then(() =>
          client.chat.postMessage({ channel: place.channel, ...thread, text: withoutBroadcasts(result.output) }),
        );
      }
      // Said the moment the outcome is posted, before the clean-up below: a queued turn records then that it was shown.
      if (posted)
        then(() =>
          posted().catch((error: unknown) =>
            log.warn(
              { error: (error as Error).message, runId: result.runId },
              "recording that an answer was shown failed",
            ),
          ),
        );
      then(removePlaceholder);
      if (statusShown && result.stopReason !== "final") {
        then(() =>
          client.assistant.threads.setStatus({
            channel_id: place.channel,
            thread_ts: place.threadTs as string,
            status: "",
          }),
        );
      }
      await work;
      if (session && agentSessions && sessionWork) {
        await sessionWork;
        sessionWork = undefined;
        await agentSessions.settled(client, session, result.stopReason);
      }
    },

    async askApproval(approval: Approval) {
      await work;
      const posted = await client.chat.postMessage({
        channel: place.channel,
        ...thread,
        ...approvalQuestion(approval),
      });
      return posted.ts ? `${place.channel}:${posted.ts}` : undefined;
    },

    shownAlready: (runId, since) => answerPosted(client, place, runId, since),
  };
}

/**
 * Whether the thread (a top-level DM: the channel) holds a message with run `runId`'s feedback
 * buttons, posted since `since`. Reading a channel's thread needs channels:history (groups:history,
 * mpim:history for private channels and group DMs; im:history for DMs): without it Slack says
 * missing_scope, and this rejects with a sentence naming the scope.
 */
async function answerPosted(client: WebClient, place: SlackPlace, runId: string, since: Date): Promise<boolean> {
  const oldest = String(Math.max(0, Math.floor(since.getTime() / 1000) - LOOKBACK_SECONDS));
  let cursor: string | undefined;
  try {
    for (let page = 0; page < LOOKUP_PAGES; page++) {
      const query = { channel: place.channel, oldest, limit: 200, ...(cursor ? { cursor } : {}) };
      const found = place.threadTs
        ? await client.conversations.replies({ ...query, ts: place.threadTs })
        : await client.conversations.history(query);
      if ((found.messages ?? []).some((message) => carriesFeedbackOf(message.blocks, runId))) return true;
      cursor = found.response_metadata?.next_cursor || undefined;
      if (!cursor) return false;
    }
    return false;
  } catch (error) {
    const data = (error as { data?: { error?: string; needed?: string } }).data;
    if (data?.error !== "missing_scope") throw error;
    throw new Error(
      `reading a Slack conversation needs the ${data.needed ?? "channels:history"} scope: add it to the app and reinstall it`,
      { cause: error },
    );
  }
}

/** A message's blocks hold a feedback button (Slack's element or a plain one) whose value names run `runId`. */
function carriesFeedbackOf(blocks: unknown, runId: string): boolean {
  for (const block of Array.isArray(blocks) ? (blocks as Array<{ elements?: unknown }>) : []) {
    for (const element of Array.isArray(block.elements)
      ? (block.elements as Array<{ value?: unknown; positive_button?: { value?: unknown } }>)
      : []) {
      if (feedbackValueOf(element.value ?? element.positive_button?.value)?.runId === runId) return true;
    }
  }
  return false;
}

/** One line with nothing markdown or Slack would read (no markup, list marker, link or entity). */
const PLAIN_LINE = /^(?![-+>#]|\d+[.)]\s)[^\n*_~`[\]#>|\\<&]*$/;

/**
 * Markdown as Slack mrkdwn. Most short answers are one plain line, which the converter would only
 * give back unchanged; parsing it costs more than the rest of posting it, so it is skipped.
 */
export function mrkdwnOf(markdown: string): string {
  const plain = PLAIN_LINE.test(markdown) && markdown === markdown.trim() && !/:\/\/|www\./i.test(markdown);
  return plain ? markdown : slackifyMarkdown(markdown);
}
