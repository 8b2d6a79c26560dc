/**
 * Block Kit for feedback on an answer: Slack's feedback buttons (a `feedback_buttons` element in a
 * `context_actions` block) where Slack shows them, plain 👍 / 👎 buttons where it refuses them, and
 * the modal a 👎 opens to ask for an optional reason. Each button's value names the run it rates.
 */
import type { KnownBlock, View } from "@slack/types";
import { MAX_REASON_CHARS, type Rating } from "../../agent/feedback.js";

/** The action_id of the feedback buttons element, and of the plain buttons (…_up, …_down). */
export const FEEDBACK_ACTION = "glassbox_feedback";
export const FEEDBACK_ACTIONS = /^glassbox_feedback(_up|_down)?$/;
export const REASON_VIEW = "glassbox_feedback_reason";
export const REASON_BLOCK = "reason";
export const REASON_INPUT = "reason_input";

const valueOf = (rating: Rating, runId: string) => `${rating}:${runId}`;

/** What a feedback button's value says: the rating and the run; undefined for anything else. */
export function feedbackValueOf(value: unknown): { rating: Rating; runId: string } | undefined {
  const match = typeof value === "string" ? /^(up|down):(\S{1,200})$/.exec(value) : null;
  return match ? { rating: match[1] as Rating, runId: match[2] as string } : undefined;
}

/** Slack's own feedback buttons, under the answer. */
export function feedbackButtons(runId: string): KnownBlock {
  return {
    type: "context_actions",
    block_id: `glassbox_feedback:${runId}`.slice(0, 255),
    elements: [
      {
        type: "feedback_buttons",
        action_id: FEEDBACK_ACTION,
        positive_button: {
          text: { type: "plain_text", text: "👍" },
          value: valueOf("up", runId),
          accessibility_label: "This answer helped",
        },
        negative_button: {
          text: { type: "plain_text", text: "👎" },
          value: valueOf("down", runId),
          accessibility_label: "This answer did not help",
        },
      },
    ],
  };
}

/** The same choice as plain buttons, for where Slack refuses the feedback buttons element. */
export function plainFeedbackButtons(runId: string): KnownBlock {
  return {
    type: "actions",
    block_id: `glassbox_feedback:${runId}`.slice(0, 255),
    elements: [
      {
        type: "button",
        action_id: `${FEEDBACK_ACTION}_up`,
        text: { type: "plain_text", text: "👍" },
        value: valueOf("up", runId),
        accessibility_label: "This answer helped",
      },
      {
        type: "button",
        action_id: `${FEEDBACK_ACTION}_down`,
        text: { type: "plain_text", text: "👎" },
        value: valueOf("down", runId),
        accessibility_label: "This answer did not help",
      },
    ],
  };
}

/** The modal a 👎 opens: an optional reason; private_metadata names the run. */
export function reasonModal(runId: string): View {
  return {
    type: "modal",
    callback_id: REASON_VIEW,
    private_metadata: runId,
    title: { type: "plain_text", text: "What went wrong?" },
    submit: { type: "plain_text", text: "Send" },
    close: { type: "plain_text", text: "Skip" },
    blocks: [
      {
        type: "input",
        block_id: REASON_BLOCK,
        optional: true,
        label: { type: "plain_text", text: "Tell us why (optional)" },
        element: { type: "plain_text_input", action_id: REASON_INPUT, multiline: true, max_length: MAX_REASON_CHARS },
      },
    ],
  };
}
