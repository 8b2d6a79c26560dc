/**
 * The tool contract (see DESIGN.md). A tool is a plain object, so a module of tools needs nothing
 * from glassbox: `export default [{ name, description, parameters, handler }]`.
 */

/** A JSON Schema for a tool's arguments. Its top level describes an object. */
export type JsonSchema = { [keyword: string]: unknown };

/** What a handler receives besides its arguments. */
export interface ToolContext {
  /** Aborted when the call times out or the run is cancelled; long work should watch it. */
  signal: AbortSignal;
  sessionId: string;
  userId: string;
  runId: string;
  toolCallId: string;
  /**
   * Whether the run had read files or tool results before this call: text that neither the person
   * nor glassbox wrote was in the model's context, so the call may have been planted by it.
   */
  readContent?: boolean;
  /** The run's approval gate, for a tool that runs an agent of its own (its dangerous calls ask the same person). */
  approve?: ApprovalGate;
  /** A tool that calls a model itself (a sub-agent) reports the tokens, so they count toward the run. */
  reportUsage?: (usage: TokenUsage) => void;
}

export interface TokenUsage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
}

export interface ToolDefinition<Args = Record<string, unknown>> {
  /** Matches ^[a-zA-Z0-9_-]{1,64}$ and is unique in a registry. */
  name: string;
  /** What the model reads to decide when to call the tool. */
  description: string;
  /** JSON Schema of the arguments object. */
  parameters: JsonSchema;
  /**
   * Returns any JSON-serialisable value; a throw becomes an `execution_error` for the model. A tool
   * that runs an agent of its own may return a ToolPause instead: the run stops until people decide.
   */
  handler: (args: Args, context: ToolContext) => unknown;
  /** Continues a call that returned a ToolPause, with the decisions people made (by tool_call_id). */
  resume?: (state: unknown, decisions: Record<string, ApprovalDecision>, context: ToolContext) => unknown;
  /**
   * A dangerous call never runs without a human's decision: true for every call, or a rule of the
   * validated arguments (`({ amount }) => amount > 100`); a rule that throws or answers anything but false asks.
   */
  dangerous?: boolean | ((args: Args) => boolean);
  /**
   * Who may decide this tool's calls (user ids as the platform names them: Slack's U…, Discord's
   * numbers, the API's users), instead of the platform's approvers (SLACK_APPROVERS, DISCORD_APPROVERS).
   */
  approvers?: string[];
  /**
   * Whether the person who asked may decide their own call (default GLASSBOX_REQUESTER_MAY_APPROVE,
   * true). False: only an approver other than the requester can, as for "refunds need a second person".
   */
  requesterMayApprove?: boolean;
  /**
   * How many different people must approve a call (default 1): 2 is the two-person rule. The
   * requester counts as one of them only where they may approve their own call.
   */
  approvalsNeeded?: number;
  /**
   * True: a call that asks is the requester confirming something done in their name (a note for
   * their whole channel), not asking leave: they may always decide it, whatever
   * GLASSBOX_REQUESTER_MAY_APPROVE or a channel's requesterMayApprove says, and approvers may too;
   * the card asks them to confirm. Not with `requesterMayApprove: false`.
   */
  requesterConfirms?: boolean;
  /** Per-call time limit in ms (default 10 s). */
  timeoutMs?: number;
  /** Names of tools whose calls in the same model response must finish before this one starts. */
  dependsOn?: string[];
}

/** Any tool, whatever its argument type, as stored in a registry. */
// The handler is typed loosely here because a registry holds tools of many argument types;
// `defineTool` keeps each handler's own argument type where the tool is written.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
// biome-ignore lint/suspicious/noExplicitAny: a registry holds tools of every argument type
export type AnyTool = ToolDefinition<any>;

export type ToolErrorType =
  | "tool_not_found"
  | "invalid_arguments"
  | "timeout"
  | "denied"
  | "execution_error"
  | "repeated_call";

/** The one envelope the model sees for every tool result. */
export type ToolEnvelope =
  | { status: "success"; data: unknown }
  | { status: "error"; error: { type: ToolErrorType; message: string } };

/** A tool call as the model sends it (OpenAI Chat Completions shape). */
export interface ToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

/** A tool as the model is told about it. */
export interface ToolSpec {
  type: "function";
  function: { name: string; description: string; parameters: JsonSchema };
}

/** Everything about one executed call: what the model sent, what ran, what it read back. */
export interface ToolCallRecord {
  id: string;
  name: string;
  /** The arguments text exactly as the model sent it. */
  rawArguments: string;
  /** The arguments the handler received (after repair, coercion and defaults), if they got that far. */
  arguments?: Record<string, unknown>;
  /** Every repair or coercion applied between rawArguments and arguments. */
  repairs: string[];
  /** The result as the store, the trace and pages keep it: whole up to 64 KB of JSON, else cut with a marker. */
  envelope: ToolEnvelope;
  /** How many characters of the result the kept envelope lost (absent when it is whole). */
  storedCutChars?: number;
  /** The text the model reads: the envelope as compact JSON, cut to the result limit. */
  content: string;
  /** How many characters were cut from the model's view (0 when nothing was). */
  truncatedChars: number;
  durationMs: number;
  dangerous: boolean;
  approval?: ApprovalDecision;
  /** Model tokens the tool spent itself (a sub-agent), counted toward the run. */
  usage?: TokenUsage;
  /**
   * Where the handler threw, for people reading the trace: its stack's frames (file and line). The
   * model never reads it: `content` holds the envelope alone.
   */
  errorStack?: string;
}

/** What a human is asked to decide. Bound to one exact call by runId, toolCallId and argumentsHash. */
export interface ApprovalRequest extends ApprovalPolicy {
  runId: string;
  sessionId: string;
  userId: string;
  toolCallId: string;
  toolName: string;
  arguments: Record<string, unknown>;
  argumentsHash: string;
}

/** Who may decide a call, as its tool says; what it leaves out is the deployment's (its approvers, its default). */
export interface ApprovalPolicy {
  approvers?: string[];
  requesterMayApprove?: boolean;
  /** Different people who must approve (default 1). */
  approvalsNeeded?: number;
  /** The call is done in the requester's name: they confirm it whatever the self-approval setting says (see ToolDefinition). */
  requesterConfirms?: boolean;
}

export interface ApprovalDecision {
  approved: boolean;
  /** Who decided ("cli", a user id, or "expired"); under a rule of several approvals, the last of them. */
  by: string;
  /** Under a rule of several approvals: everyone who approved, in order. */
  approvedBy?: string[];
  reason?: string;
  /** The call the decision is for; a decision for other arguments is ignored. */
  argumentsHash: string;
}

/**
 * The approval hook. Resolve with a decision now (a terminal prompt, a policy), or with "pending"
 * when a person will decide later (chat buttons): the run then stops and is resumed with the decision.
 */
export type ApprovalGate = (request: ApprovalRequest) => Promise<ApprovalDecision | "pending">;

/**
 * A tool's call waits for people: the approvals of calls made inside it (a sub-agent's dangerous
 * calls). The run stops with this call pending; `state` (plain data, stored with the run) is handed
 * back to the tool's `resume` once they have decided.
 */
export class ToolPause {
  constructor(
    readonly requests: ApprovalRequest[],
    readonly state: unknown,
  ) {}
}

/** Progress from the tool engine, forwarded by the loop as agent events. */
export type ToolEvent =
  | { type: "tool_start"; runId: string; toolCallId: string; name: string; arguments: Record<string, unknown> }
  | { type: "tool_end"; runId: string; record: ToolCallRecord }
  | { type: "approval_requested"; runId: string; request: ApprovalRequest };
