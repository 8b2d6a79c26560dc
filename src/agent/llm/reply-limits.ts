/**
 * The bounds of one reply's body, which the SDK's timeout does not cover (it stops counting at the
 * headers): the body ends within `deadlineMs` of its headers, no gap between its pieces is longer
 * than `idleMs`, and it holds at most MAX_REPLY_CHARS of text, reasoning and call arguments. A server
 * that sends a token every 100 ms forever, or one enormous answer, ends the call with a sentence.
 */
import { GlassboxError } from "../errors.js";

/** About 250,000 tokens: far beyond any answer or call a chat needs. */
export const MAX_REPLY_CHARS = 1_000_000;

/**
 * How much of a body read whole (a reply that is not an event stream), or of one line of a stream, is
 * read: JSON may spell a character in six (\uXXXX), so any reply within MAX_REPLY_CHARS fits, and a
 * body past this is longer than MAX_REPLY_CHARS whatever it holds. Stopped with the same sentence.
 */
export const MAX_BODY_CHARS = 8 * MAX_REPLY_CHARS;

type Reason = "deadline" | "idle" | "size";

export class ReplyLimits {
  /** Aborts the request (its body stream too) when a bound is passed, or when `outer` aborts. */
  readonly signal: AbortSignal;
  private readonly controller = new AbortController();
  private readonly timers: NodeJS.Timeout[] = [];
  private idleTimer: NodeJS.Timeout | undefined;
  private reason: Reason | undefined;

  constructor(
    private readonly bounds: { deadlineMs: number; idleMs: number },
    outer?: AbortSignal,
  ) {
    this.signal = outer ? AbortSignal.any([outer, this.controller.signal]) : this.controller.signal;
  }

  /** The headers came: the body's clocks start. */
  started(): void {
    this.timers.push(setTimeout(() => this.stop("deadline"), this.bounds.deadlineMs));
    this.heard(0);
  }

  /** A piece of the body came; `chars`: how much the reply holds now. */
  heard(chars: number): void {
    if (chars > MAX_REPLY_CHARS) return this.stop("size");
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => this.stop("idle"), this.bounds.idleMs);
  }

  /** The body itself passed MAX_BODY_CHARS while being read: stopped as a reply past the size cap. */
  tooLong(): void {
    this.stop("size");
  }

  done(): void {
    for (const timer of this.timers) clearTimeout(timer);
    clearTimeout(this.idleTimer);
  }

  /** The sentence for a reply these limits ended; undefined when they did not. */
  failure(baseURL: string): GlassboxError | undefined {
    if (!this.reason) return undefined;
    const seconds = (ms: number) => `${Math.round(ms / 100) / 10} s`;
    const text = {
      deadline: `The model server at ${baseURL} was still sending its reply ${seconds(this.bounds.deadlineMs)} after it began; the call was stopped. Try again, or raise GLASSBOX_MODEL_TIMEOUT_MS (or set GLASSBOX_MAX_OUTPUT_TOKENS to ask for shorter replies).`,
      idle: `The model server at ${baseURL} went silent for ${seconds(this.bounds.idleMs)} in the middle of its reply; the call was stopped. Try again, or raise GLASSBOX_MODEL_IDLE_MS.`,
      size: `The model server at ${baseURL} sent a reply longer than ${MAX_REPLY_CHARS.toLocaleString("en-US")} characters; the call was stopped. Set GLASSBOX_MAX_OUTPUT_TOKENS to ask for shorter replies.`,
    }[this.reason];
    return new GlassboxError("model_timeout", text);
  }

  private stop(reason: Reason): void {
    this.reason ??= reason;
    this.done();
    this.controller.abort(new Error(`the reply passed its ${reason} limit`));
  }
}
