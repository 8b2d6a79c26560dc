/**
 * Joins what a server sent, streamed chunks or one completion, into one reply: the answer text
 * (streamed on as it comes, reasoning and text tool calls held out), the reasoning, the tool
 * calls and the usage. Every field is read as it may come, not as the OpenAI schema says it
 * should: a missing `index`, a missing `delta`, `choices: []`, a name repeated in every delta, a
 * whole call in one delta, arguments as an object, content as a list of typed parts.
 */
import OpenAI from "openai";
import { isPlainObject } from "../../tools/args.js";
import type { Usage } from "../types.js";
import { ThinkingFilter, type AnswerStart } from "./think.js";
import { TextCallGate } from "./text-calls.js";

export interface AssembledCall {
  id: string;
  name: string;
  arguments: string;
  extra_content?: Record<string, unknown>;
}

/** A reply as the server sent it, joined but not yet judged (see reply.ts). */
export interface Assembled {
  /** The content text as sent, reasoning tags and all. */
  text: string;
  /** Reasoning from the fields and typed parts that carry it. */
  reasoning: string;
  /** The server sent `reasoning_content` (even empty or null): it wants it back with tool calls. */
  reasoningContentField: boolean;
  calls: AssembledCall[];
  finishReason: string | undefined;
  usage: Usage | undefined;
  model: string;
  notes: string[];
}

export interface AssemblerOptions {
  /** Receives the answer text as it streams; absent when nothing streams. */
  onAnswer?: (text: string) => void;
  answerStart: AnswerStart;
  /** Tools are on offer: text that may be a tool call is held back from `onAnswer`. */
  holdTextCalls: boolean;
  /** Receives every piece of text, reasoning and call arguments as it is read (what the call spends). */
  onPiece?: (text: string) => void;
}

interface CallState {
  id: string;
  name: string;
  argumentPieces: string[];
  extra_content?: Record<string, unknown>;
}

export class ReplyAssembler {
  private readonly text: string[] = [];
  private readonly reasoning: string[] = [];
  /** Characters of text, reasoning and call arguments read so far (see MAX_REPLY_CHARS). */
  chars = 0;
  private reasoningContentField = false;
  private readonly calls: CallState[] = [];
  private readonly callsByIndex = new Map<number, CallState>();
  private finishReason: string | undefined;
  private usage: Usage | undefined;
  private model = "";
  private choiceIndex: number | undefined;
  private sawJson = false;
  private unreadable = 0;
  private readonly noted = new Set<string>();
  private readonly thinking: ThinkingFilter | undefined;
  private readonly gate: TextCallGate | undefined;
  private readonly onPiece: ((text: string) => void) | undefined;

  constructor(options: AssemblerOptions) {
    this.onPiece = options.onPiece;
    const onAnswer = options.onAnswer;
    if (onAnswer) {
      this.gate = options.holdTextCalls ? new TextCallGate(onAnswer) : undefined;
      const answer = this.gate ? (text: string) => this.gate?.push(text) : onAnswer;
      this.thinking = new ThinkingFilter(options.answerStart, answer);
    }
  }

  /** A part of the body that was not JSON (a garbage line, a half-written event). */
  addUnreadable(): void {
    this.unreadable++;
  }

  /**
   * One payload of the reply: a streamed chunk (`chat.completion.chunk`, its choice with a
   * `delta`), or a whole completion (its choice with a `message`), however incomplete.
   */
  add(value: unknown, event?: string): void {
    if (!this.accept(value, event)) return;
    const choice = this.choiceOf(value.choices);
    if (!choice) return; // Azure's prompt-filter results come as a chunk with `choices: []`
    if (isPlainObject(choice.usage)) this.usage = usageOf(choice.usage);
    // Azure's content-filter annotations come as choices without a delta.
    if (isPlainObject(choice.delta)) this.addDelta(choice.delta, false);
    else if (isPlainObject(choice.message)) this.addDelta(choice.message, true);
    else if (typeof choice.text === "string") this.addContent(choice.text);
    this.addFinish(choice.finish_reason);
  }

  /** The reply has ended: the joined parts. Streamed answer text still held back waits for `release`. */
  finish(): Assembled {
    this.thinking?.end();
    const notes = [...this.noted];
    if (this.unreadable > 0)
      notes.push(
        `skipped ${this.unreadable} part${this.unreadable === 1 ? "" : "s"} of the reply that ${this.unreadable === 1 ? "was" : "were"} not JSON`,
      );
    return {
      text: this.text.join(""),
      reasoning: this.reasoning.join(""),
      reasoningContentField: this.reasoningContentField,
      calls: this.calls.map((call) => ({
        id: call.id,
        name: call.name,
        arguments: call.argumentPieces.join(""),
        ...(call.extra_content ? { extra_content: call.extra_content } : {}),
      })),
      finishReason: this.finishReason,
      usage: this.usage,
      model: this.model,
      notes,
    };
  }

  /** True once any part of the reply was JSON; a body with none is not a chat completion at all. */
  get readSomething(): boolean {
    return this.sawJson;
  }

  /** Streams the answer text held back as a possible tool call, unless it was one. */
  release(wasTextCall: boolean): void {
    this.gate?.end(wasTextCall);
  }

  private accept(value: unknown, event: string | undefined): value is Record<string, unknown> {
    if (!isPlainObject(value)) {
      this.unreadable++;
      return false;
    }
    this.sawJson = true;
    // An error in the middle of a stream, as a chunk with `error` or an `event: error`.
    if ((value.error !== undefined && value.error !== null) || event === "error") throw serverError(value);
    if (typeof value.model === "string" && value.model !== "" && this.model === "") this.model = value.model;
    if (isPlainObject(value.usage)) this.usage = usageOf(value.usage);
    return true;
  }

  /** The first choice (index 0 where indexes are given); chunks for any other choice are ignored. */
  private choiceOf(choices: unknown): Record<string, unknown> | undefined {
    if (!Array.isArray(choices)) return undefined;
    for (const choice of choices) {
      if (!isPlainObject(choice)) continue;
      const index = typeof choice.index === "number" ? choice.index : 0;
      this.choiceIndex ??= index;
      if (index === this.choiceIndex) return choice;
    }
    return undefined;
  }

  private addFinish(reason: unknown): void {
    if (typeof reason === "string" && reason !== "") this.finishReason = reason;
  }

  /** A delta, or a whole message when `whole` (each tool call entry is then a call of its own). */
  private addDelta(delta: Record<string, unknown>, whole: boolean): void {
    this.addReasoningFields(delta);
    const content = delta.content;
    if (typeof content === "string") this.addContent(content);
    else if (Array.isArray(content)) for (const part of content) this.addPart(part);
    else if (isPlainObject(content)) this.addPart(content);
    const toolCalls = Array.isArray(delta.tool_calls)
      ? delta.tool_calls
      : isPlainObject(delta.tool_calls)
        ? [delta.tool_calls]
        : [];
    toolCalls.forEach((entry, position) => {
      if (isPlainObject(entry)) this.addCallEntry(entry, position, whole);
    });
    // The functions API that came before tools: one call, no id.
    if (isPlainObject(delta.function_call)) this.addCallEntry({ index: -1, function: delta.function_call }, 0, false);
  }

  private addReasoningFields(delta: Record<string, unknown>): void {
    if (
      "reasoning_content" in delta &&
      (typeof delta.reasoning_content === "string" || delta.reasoning_content === null)
    )
      this.reasoningContentField = true;
    // vLLM sends the same text as both `reasoning` and `reasoning_content`: one of them is read.
    const text = [delta.reasoning_content, delta.reasoning, delta.thinking].find(
      (value): value is string => typeof value === "string" && value !== "",
    );
    if (text !== undefined) this.addReasoning(text);
  }

  /** A typed content part: text is the answer, thinking (Magistral: a list of text parts) is reasoning. */
  private addPart(part: unknown): void {
    if (typeof part === "string") return this.addContent(part);
    if (!isPlainObject(part)) return;
    if (part.type === "thinking" || part.type === "reasoning") {
      const thinking = part.thinking ?? part.text ?? part.reasoning;
      const pieces = Array.isArray(thinking) ? thinking : [thinking];
      for (const piece of pieces) {
        const text =
          typeof piece === "string" ? piece : isPlainObject(piece) && typeof piece.text === "string" ? piece.text : "";
        if (text) this.addReasoning(text);
      }
      return;
    }
    if ((part.type === "text" || part.type === undefined) && typeof part.text === "string") this.addContent(part.text);
  }

  private addContent(text: string): void {
    if (text === "") return;
    this.chars += text.length;
    this.onPiece?.(text);
    this.text.push(text);
    this.thinking?.push(text);
  }

  private addReasoning(text: string): void {
    this.chars += text.length;
    this.onPiece?.(text);
    this.reasoning.push(text);
    // A server that sends reasoning on its own sends answers without it.
    this.thinking?.answerIsPlain();
  }

  /**
   * One tool-call entry. Streamed entries are fragments of calls, keyed by `index` where it is
   * given; a new call starts where an entry brings another id, another name after arguments, or
   * new JSON after a complete value, so calls that share an index (or have none) stay apart.
   */
  private addCallEntry(entry: Record<string, unknown>, position: number, whole: boolean): void {
    const fn = isPlainObject(entry.function) ? entry.function : {};
    const id = idOf(entry.id);
    const name = typeof fn.name === "string" ? fn.name.trim() : "";
    const args = this.argumentsOf(fn.arguments);
    const index =
      typeof entry.index === "number" && Number.isInteger(entry.index)
        ? entry.index
        : typeof entry.index === "string" && /^\d+$/.test(entry.index)
          ? Number(entry.index)
          : undefined;

    let call: CallState | undefined;
    let splitFrom: CallState | undefined;
    if (!whole) {
      const candidate =
        index !== undefined
          ? this.callsByIndex.get(index)
          : id
            ? this.calls.find((known) => known.id === id)
            : position === 0
              ? this.calls.at(-1)
              : undefined;
      if (candidate && continues(candidate, id, name, args)) call = candidate;
      else splitFrom = candidate;
    }
    if (!call) {
      call = { id: "", name: "", argumentPieces: [] };
      this.calls.push(call);
      // A call split off another under the same index without a name of its own calls the same tool.
      if (splitFrom && !name && !id && splitFrom.name) {
        call.name = splitFrom.name;
        this.noted.add(
          `a tool call's arguments came under another call's index without a name; read as a second call to '${splitFrom.name}'`,
        );
      }
    }
    if (index !== undefined) this.callsByIndex.set(index, call);
    if (id && !call.id) call.id = id;
    // A name repeated in every delta (MiniMax on NVIDIA NIM) is the same name, not more of it.
    if (name && name !== call.name)
      call.name = call.name && call.argumentPieces.length === 0 ? call.name + name : call.name || name;
    if (args) {
      this.chars += args.length;
      this.onPiece?.(args);
      call.argumentPieces.push(args);
    }
    if (isPlainObject(entry.extra_content)) call.extra_content = { ...call.extra_content, ...entry.extra_content };
  }

  private argumentsOf(value: unknown): string {
    if (typeof value === "string") return value;
    if (value === undefined || value === null) return "";
    // Some llama.cpp builds send the arguments as a JSON object, not as JSON text.
    this.noted.add(
      "tool-call arguments came as a JSON value instead of JSON text; glassbox passed them on as JSON text",
    );
    return JSON.stringify(value) ?? "";
  }
}

/** Whether an entry goes on with `call` rather than starting another. */
function continues(call: CallState, id: string, name: string, args: string): boolean {
  if (id && call.id && id !== call.id) return false;
  const hasArguments = call.argumentPieces.length > 0;
  if (name && call.name && name !== call.name && hasArguments) return false;
  // A second complete JSON value cannot continue the first: Gemini has sent two calls' arguments under one index.
  if (hasArguments && /^\s*[{[]/.test(args) && isCompleteJson(call.argumentPieces.join(""))) return false;
  return true;
}

function isCompleteJson(text: string): boolean {
  const trimmed = text.trim();
  if (!/^[{[]/.test(trimmed) || !/[}\]]$/.test(trimmed)) return false;
  try {
    JSON.parse(trimmed);
    return true;
  } catch {
    return false;
  }
}

function idOf(value: unknown): string {
  if (typeof value === "number" && Number.isFinite(value)) return String(value);
  if (typeof value !== "string") return "";
  const id = value.trim();
  return id === "null" || id === "undefined" ? "" : id;
}

export function usageOf(raw: Record<string, unknown>): Usage {
  const count = (value: unknown) =>
    typeof value === "number" && Number.isFinite(value) && value >= 0 ? Math.round(value) : 0;
  const promptTokens = count(raw.prompt_tokens ?? raw.input_tokens);
  const completionTokens = count(raw.completion_tokens ?? raw.output_tokens);
  const total = count(raw.total_tokens);
  return { promptTokens, completionTokens, totalTokens: total || promptTokens + completionTokens };
}

/**
 * An error the server reported inside its reply, as the SDK's error type with the body as sent and
 * no HTTP status (the reply's was 200), for describeModelError to word.
 */
function serverError(value: Record<string, unknown>): InstanceType<typeof OpenAI.APIError> {
  const body = value.error !== undefined && value.error !== null ? value.error : value;
  const message =
    isPlainObject(body) && typeof body.message === "string"
      ? body.message
      : typeof body === "string"
        ? body
        : "the server reported an error in its reply";
  return new OpenAI.APIError(undefined, body, message, undefined);
}
