/**
 * What people say about an answer: 👍 or 👎 on a run, with an optional reason, one per person and
 * run (their latest click is their answer). Kept in the store beside the run (the port's feedback
 * operations), read by the trace viewer, `glassbox trace` and `glassbox usage`. The adapters decide
 * who may rate where; a click is recorded only when the run exists and sits in the conversation the
 * click came from.
 */

export type Rating = "up" | "down";
export type FeedbackSource = "slack" | "discord" | "web";

export interface Feedback {
  runId: string;
  userId: string;
  rating: Rating;
  /** Why, in the person's words (at most MAX_REASON_CHARS); null when they gave none. */
  reason: string | null;
  source: FeedbackSource;
  at: string;
}

/** A reason is a sentence or a few, not a document: longer text is cut to this. */
export const MAX_REASON_CHARS = 1_000;
/** A reason as stored: trimmed, cut to the limit, null when empty. */
export function boundedReason(reason: unknown): string | null {
  if (typeof reason !== "string") return null;
  const trimmed = reason.trim();
  return trimmed ? trimmed.slice(0, MAX_REASON_CHARS) : null;
}

export function isRating(value: unknown): value is Rating {
  return value === "up" || value === "down";
}

/** What a click in a chat needs of the store (the port has it, on SQLite or PostgreSQL). */
export interface FeedbackWrites {
  run(runId: string): Promise<{ sessionId: string } | undefined>;
  recordFeedback(input: {
    runId: string;
    userId: string;
    rating: Rating;
    reason?: unknown;
    source: FeedbackSource;
  }): Promise<"recorded" | "unknown_run">;
}

/**
 * A 👍 / 👎 clicked in a chat, recorded only when the rated run is in the conversation the click came
 * from (`isHere` judges its session): whoever can see an answer there can rate it, nobody elsewhere.
 */
export async function rateInConversation(
  store: FeedbackWrites,
  click: { runId: string; userId: string; rating: Rating; source: FeedbackSource },
  isHere: (sessionId: string) => boolean,
): Promise<"recorded" | "not_here"> {
  const run = await store.run(click.runId);
  if (!run || !isHere(run.sessionId)) return "not_here";
  return (await store.recordFeedback(click)) === "recorded" ? "recorded" : "not_here";
}

/** A person's feedback in one line of text: "👎 U123: the total was wrong". */
export function feedbackLine(feedback: Feedback): string {
  return `${feedback.rating === "up" ? "👍" : "👎"} ${feedback.userId}${feedback.reason ? `: ${feedback.reason}` : ""}`;
}
