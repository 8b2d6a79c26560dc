/**
 * What the page and API clients see of runs: agent events as plain JSON, numbered in order, kept
 * per run (a stream opened late replays its run from the start) and per session (a page that
 * reconnects gets what it missed), and pushed to whoever listens. In memory only: the trace in
 * SQLite is the record; this is the live view.
 */
import type { Approval } from "../../agent/approvals.js";
import type { ErrorCode } from "../../agent/errors.js";
import type { PipelineStage, StopReason } from "../../agent/run.js";
import type { Usage } from "../../agent/types.js";
import type { ToolCallRecord } from "../../tools/types.js";
import { approvalsNeeded } from "../../store/approval-rules.js";
import { approverEntry } from "../../tools/approver-entries.js";
import { whoDecides } from "../approval-replies.js";

/** An approval as the page shows it. */
export interface ApprovalView {
  id: string;
  runId: string;
  sessionId: string;
  /** The call that waits, as its `tool_start` and `tool_end` name it. */
  toolCallId: string;
  tool: string;
  arguments: Record<string, unknown>;
  requester: string;
  status: Approval["status"];
  decidedBy: string | null;
  decidedAt: string | null;
  expiresAt: string;
  /** Who approved so far, and how many different people must (a rule of several approvals). */
  approvedBy: string[];
  approvalsNeeded: number;
  /** The call is done in the requester's name (a channel note): they confirm it, whatever the self-approval setting. */
  requesterConfirms?: true;
  /** Who may decide, and why, in a sentence (as the Slack and Discord cards say it). */
  whoDecides: string;
  /** The approvers its tool or channel names (the deployment's own are not listed). */
  approvers?: string[];
  /** The requester may not decide their own call (channel or tool policy). */
  requesterMayApprove?: false;
}

export type WebEvent =
  | { type: "run_start"; runId: string; sessionId: string; userId: string; input: string; pipeline?: PipelineStage }
  | { type: "run_resumed"; runId: string; sessionId: string }
  | { type: "model_start"; runId: string; step: number }
  | { type: "model_delta"; runId: string; step: number; text: string }
  /** `reasoning`: the model's thinking, when it sent any, cut to a size a page shows (reasoningCutChars more are in the trace). */
  | {
      type: "model_end";
      runId: string;
      step: number;
      promptTokens: number;
      completionTokens: number;
      latencyMs: number;
      reasoning?: string;
      reasoningCutChars?: number;
    }
  | {
      type: "tool_start";
      runId: string;
      step: number;
      toolCallId: string;
      name: string;
      arguments: Record<string, unknown>;
    }
  | { type: "tool_end"; runId: string; step: number; record: Omit<ToolCallRecord, "content"> }
  | { type: "note"; runId: string; step: number; text: string }
  /** The request waits for a free run slot (GLASSBOX_MAX_CONCURRENT_RUNS). */
  | { type: "queued"; runId: string; sessionId: string }
  /** Said to the person after the run's answer (a budget past 80 %); kept by no stored row. */
  | { type: "notice"; runId: string; sessionId: string; text: string }
  | { type: "approval_requested"; runId: string; approval: ApprovalView }
  | { type: "approval_decided"; runId: string; approval: ApprovalView }
  /** How the run ended; "awaiting_approval" is a pause: the run goes on once its approvals are decided. */
  | {
      type: "run_end";
      runId: string;
      sessionId: string;
      output: string;
      stopReason: StopReason;
      steps: number;
      usage: Usage;
      error?: { code: ErrorCode; message: string };
    };

export interface NumberedEvent {
  id: number;
  event: WebEvent;
}

/** Where a run the hub has seen stands; "queued": accepted, waiting for its turn or a run slot. */
type RunPhase = "queued" | "running" | "paused" | "ended";

export interface Watcher {
  event(numbered: NumberedEvent): void;
  /** The run is over (only for run watchers). */
  end(): void;
}

interface RunEntry {
  sessionId: string;
  phase: RunPhase;
  events: NumberedEvent[];
  watchers: Set<Watcher>;
}

interface SessionEntry {
  events: NumberedEvent[];
  watchers: Set<Watcher>;
}

export interface EventHubLimits {
  /** Runs whose events are kept (the oldest ended ones go first). */
  runs: number;
  /** Recent events kept per session, for a page that reconnects. */
  sessionEvents: number;
  /** Sessions whose recent events are kept. */
  sessions: number;
}

export function approvalView(approval: Approval): ApprovalView {
  return {
    id: approval.id,
    runId: approval.runId,
    sessionId: approval.sessionId,
    toolCallId: approval.toolCallId,
    tool: approval.toolName,
    arguments: approval.arguments,
    requester: approval.requester,
    status: approval.status,
    decidedBy: approval.decidedBy,
    decidedAt: approval.decidedAt,
    expiresAt: approval.expiresAt,
    approvedBy: approval.approvedBy,
    approvalsNeeded: approvalsNeeded(approval),
    ...(approval.policy.requesterConfirms === true ? { requesterConfirms: true as const } : {}),
    // A page's people are named by their ids; Slack groups and Discord roles never decide here.
    whoDecides: whoDecides(approval, (entry) => (approverEntry(entry).kind === "user" ? entry : undefined)),
    ...(approval.policy.approvers ? { approvers: approval.policy.approvers } : {}),
    ...(approval.policy.requesterMayApprove === false ? { requesterMayApprove: false as const } : {}),
  };
}

export function createEventHub(limits: EventHubLimits = { runs: 500, sessionEvents: 2_000, sessions: 500 }) {
  let nextId = 1;
  const runs = new Map<string, RunEntry>();
  const sessions = new Map<string, SessionEntry>();

  const runOf = (runId: string, sessionId: string): RunEntry => {
    let entry = runs.get(runId);
    if (!entry) {
      entry = { sessionId, phase: "queued", events: [], watchers: new Set() };
      runs.set(runId, entry);
      forgetOldRuns();
    }
    return entry;
  };

  const sessionOf = (sessionId: string): SessionEntry => {
    let entry = sessions.get(sessionId);
    if (!entry) {
      entry = { events: [], watchers: new Set() };
      sessions.set(sessionId, entry);
      forgetOldSessions();
    }
    return entry;
  };

  function forgetOldRuns(): void {
    for (const [runId, entry] of runs) {
      if (runs.size <= limits.runs) return;
      if (entry.phase === "ended" && entry.watchers.size === 0) runs.delete(runId);
    }
  }

  function forgetOldSessions(): void {
    for (const [sessionId, entry] of sessions) {
      if (sessions.size <= limits.sessions) return;
      if (entry.watchers.size === 0) sessions.delete(sessionId);
    }
  }

  function publishToSession(sessionId: string, numbered: NumberedEvent): void {
    const session = sessionOf(sessionId);
    session.events.push(numbered);
    if (session.events.length > limits.sessionEvents)
      session.events.splice(0, session.events.length - limits.sessionEvents);
    for (const watcher of session.watchers) watcher.event(numbered);
  }

  function end(entry: RunEntry): void {
    entry.phase = "ended";
    for (const watcher of [...entry.watchers]) watcher.end();
    entry.watchers.clear();
  }

  return {
    /** A run that was accepted and waits for its turn. */
    accept(runId: string, sessionId: string): void {
      runOf(runId, sessionId);
    },

    publish(sessionId: string, event: WebEvent): void {
      const numbered = { id: nextId++, event };
      // A notice may come after its run's end, once the hub forgot the run: it makes no run of its own.
      const run = event.type === "notice" ? runs.get(event.runId) : runOf(event.runId, sessionId);
      if (!run) return publishToSession(sessionId, numbered);
      if (event.type === "run_start" || event.type === "run_resumed") run.phase = "running";
      run.events.push(numbered);
      for (const watcher of run.watchers) watcher.event(numbered);
      publishToSession(sessionId, numbered);
      if (event.type === "run_end") {
        if (event.stopReason === "awaiting_approval") run.phase = "paused";
        else end(run);
      }
    },

    /** The run is over without a run_end of its own (a newer message made its approvals moot, or it failed to start). */
    end(runId: string): void {
      const run = runs.get(runId);
      if (run) end(run);
    },

    /**
     * Everything the run did so far, then what comes, until it ends. Undefined when this process
     * has not seen the run (it ran before a restart, or elsewhere); `watch` then starts its record.
     */
    watchRun(
      runId: string,
      watcher: Watcher,
      sessionId?: string,
    ): { replay: NumberedEvent[]; ended: boolean; stop(): void } | undefined {
      const run = runs.get(runId) ?? (sessionId ? runOf(runId, sessionId) : undefined);
      if (!run) return undefined;
      if (run.phase === "ended") return { replay: [...run.events], ended: true, stop: () => {} };
      run.watchers.add(watcher);
      return { replay: [...run.events], ended: false, stop: () => void run.watchers.delete(watcher) };
    },

    /** The session's events after `afterId` (those still kept), then every new one. */
    watchSession(
      sessionId: string,
      afterId: number | undefined,
      watcher: Watcher,
    ): { replay: NumberedEvent[]; stop(): void } {
      const session = sessionOf(sessionId);
      session.watchers.add(watcher);
      const replay = afterId === undefined ? [] : session.events.filter((numbered) => numbered.id > afterId);
      return { replay, stop: () => void session.watchers.delete(watcher) };
    },

    /** Ends every open stream (server shutdown). */
    closeAll(): void {
      for (const entry of [...runs.values(), ...sessions.values()]) {
        for (const watcher of [...entry.watchers]) watcher.end();
        entry.watchers.clear();
      }
    },
  };
}

export type EventHub = ReturnType<typeof createEventHub>;
