/**
 * Durable approvals: a dangerous call that waits for a person is kept by the store, bound to one
 * exact call (run id, tool_call_id, argument hash), decided once, by the requester (unless its tool
 * says otherwise) or an approver, before it expires. Conversations decide through the store port, on either store.
 */

import type { ApprovalPolicy } from "../tools/types.js";

export type ApprovalStatus = "pending" | "approved" | "denied" | "expired";

export interface Approval {
  id: string;
  runId: string;
  sessionId: string;
  toolCallId: string;
  toolName: string;
  arguments: Record<string, unknown>;
  argumentsHash: string;
  /** Who asked for the run that wants this call. */
  requester: string;
  status: ApprovalStatus;
  decidedBy: string | null;
  decidedAt: string | null;
  /** Who approved so far, in order: under a rule of several approvals it stays pending until enough have. */
  approvedBy: string[];
  expiresAt: string;
  /** Where the platform shows the buttons (e.g. a Slack channel and ts), to update them later. */
  messageRef: string | null;
  /** Who may decide, as the call's tool said when it was asked; what it leaves out is the deployment's. */
  policy: ApprovalPolicy;
}

/**
 * Where a click came from, as the platform vouches for it: an approval is decided only in the
 * workspace or guild, and on the message, where it was posted. A click carrying another place's
 * approval id finds nothing ("unknown"), so ids say nothing about other conversations.
 */
export interface ClickOrigin {
  /** The session keys of the platform and workspace or guild the click came from ("slack:T1:", "discord:G1:", "discord:dm:D1"). */
  sessionPrefix: string;
  /** The message that carried the buttons, in the form the adapter stored as `messageRef`. */
  messageRef?: string;
}

export type DecisionOutcome =
  | { kind: "decided"; approval: Approval; runReady: boolean }
  /** An approval counted toward a rule of several; it waits for `needed` in all. */
  | { kind: "counted"; approval: Approval; needed: number }
  /** `approved_already`: this person's approval is counted already, and it needs someone else's. */
  | { kind: "not_allowed"; approval: Approval; reason?: "approved_already" }
  | { kind: "already_decided"; approval: Approval }
  | { kind: "expired"; approval: Approval }
  | { kind: "stale"; approval: Approval }
  | { kind: "unknown" };
