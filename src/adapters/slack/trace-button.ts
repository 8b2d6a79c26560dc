/**
 * The "Trace" button under an answer: a link to its run in the trace viewer (GLASSBOX_PUBLIC_URL).
 * Slack's context_actions block takes only feedback and icon buttons, and an icon button has no
 * `url`, so the link is a URL button in an actions block: the plain 👍 / 👎 buttons' block where
 * the answer has those, one of its own under Slack's feedback buttons otherwise. Slack still sends
 * a click on a URL button to the app, which acknowledges it and does nothing else.
 */
import type { ActionsBlock, Button, KnownBlock } from "@slack/types";

export const TRACE_ACTION = "glassbox_trace";

export function traceButton(url: string): Button {
  return {
    type: "button",
    action_id: TRACE_ACTION,
    text: { type: "plain_text", text: "Trace" },
    url,
    accessibility_label: "See every step of this answer in the trace viewer",
  };
}

/** The blocks under an answer: its feedback buttons, and the trace link when there is one. */
export function answerButtons(feedback: KnownBlock, runId: string, url: string | undefined): KnownBlock[] {
  if (!url) return [feedback];
  if (feedback.type === "actions") return [{ ...feedback, elements: [...feedback.elements, traceButton(url)] }];
  const links: ActionsBlock = {
    type: "actions",
    block_id: `glassbox_trace:${runId}`.slice(0, 255),
    elements: [traceButton(url)],
  };
  return [feedback, links];
}
