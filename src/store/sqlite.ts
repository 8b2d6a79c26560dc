/**
 * The store port on SQLite, the embedded default: the synchronous core (sqlite-store.ts) and the
 * modules that read and write its file with it (the approval and feedback books, the trace reader,
 * the trace viewer's queries, tool-usage history), behind async operations. One connection; writes
 * of one event-loop turn share one commit; other processes on the same file are seen through the file.
 */
import type { AfterCommit, StorePort } from "./port.js";
import { createApprovalBook } from "./sqlite-approvals.js";
import { createSqliteErase } from "./sqlite-erase.js";
import { createFeedbackBook } from "./sqlite-feedback.js";
import { createFoldReader } from "./sqlite-folds.js";
import { createSqliteGates } from "./sqlite-gates.js";
import { createSqliteSchedules } from "./sqlite-schedules.js";
import { createSessionSearch } from "./sqlite-session-search.js";
import { openSqliteStore, type SqliteStore } from "./sqlite-store.js";
import { createTraceReader } from "./sqlite-traces.js";
import { readRunUsage, readUsageHistory } from "./sqlite-usage.js";
import { createSqliteSteps } from "./sqlite-steps.js";
import { afterCommitted, createSqliteWrites } from "./sqlite-writes.js";

export interface SqlitePortOptions {
  /** A long-running bot: the WAL is checkpointed from a thread of its own, which also beats for this process. */
  longRunning?: boolean;
  /** Only reads (the command line): an existing file, opened read-only; writes fail. */
  readOnly?: boolean;
}

export type SqlitePort = StorePort<AfterCommit> & { kind: "sqlite" };

export function openSqlitePort(path: string, options: SqlitePortOptions = {}): SqlitePort {
  return sqlitePortOf(
    openSqliteStore(path, { checkpointInBackground: options.longRunning, readOnly: options.readOnly }),
  );
}

const ports = new WeakMap<SqliteStore, SqlitePort>();

/**
 * The port over a core already open, the same one for every call with that core, so that everything
 * on it shares one connection, one group commit and one request log (tests of the SQLite
 * implementation reach under the port this way). Closing the port closes the core.
 */
export function sqlitePortOf(store: SqliteStore): SqlitePort {
  let port = ports.get(store);
  if (!port) ports.set(store, (port = portOver(store)));
  return port;
}

function portOver(store: SqliteStore): SqlitePort {
  const { db } = store;
  const path = db.name;
  const book = createApprovalBook(store);
  const feedback = createFeedbackBook(store);
  const reader = createTraceReader(store);
  const gates = createSqliteGates(db, reader);
  const writes = createSqliteWrites(store, createSqliteSteps(db), book);
  const searchSessions = createSessionSearch(store);
  const foldsOf = createFoldReader(store);
  const eraser = createSqliteErase(db);
  const schedules = createSqliteSchedules(db);
  let closed = false;
  const historyVersion = (_sessionId: string) => store.historyVersion();
  const readHistory = db.transaction((sessionId: string) => {
    const epoch = store.epoch(sessionId);
    const summary = store.latestSummary(sessionId, epoch);
    return {
      epoch,
      summary,
      messages: store.messagesAfter(sessionId, epoch, summary?.lastMessageId ?? 0),
      version: historyVersion(sessionId),
    };
  });

  return {
    kind: "sqlite",
    location: path,
    // conversations
    appendMessages: async (sessionId, runId, entries) =>
      (await writes.record([{ kind: "messages", sessionId, runId, entries }])).messageIds[0] ?? [],
    sessionHistory: async (sessionId) => readHistory(sessionId),
    historyVersion: async (sessionId) => historyVersion(sessionId),
    messagesAfter: async (sessionId, epoch, afterId) => store.messagesAfter(sessionId, epoch, afterId),
    saveSummary: async (sessionId, epoch, summary) => store.saveSummary(sessionId, epoch, summary),
    resetSession: async (sessionId) => store.resetSession(sessionId),
    sessionUsage: async (sessionId) => store.sessionUsage(sessionId),
    listSessions: async () => store.listSessions(),
    sessionOwner: async (sessionId) => store.sessionOwner(sessionId),
    // facts
    addFact: async (userId, scope, content, origin) => store.addFact(userId, scope, content, origin),
    forgetFact: async (userId, factId, channel, approverOf) => store.forgetFact(userId, factId, channel, approverOf),
    searchFacts: async (userId, channel, query, limit) => store.searchFacts(userId, channel, query, limit),
    // runs
    acceptEvent: (acceptance, alsoInTransaction) => writes.acceptEvent(acceptance, alsoInTransaction),
    record: (list) => writes.record(list),
    endUnstartedRun: async (outcome) => store.endUnstartedRun(outcome),
    pausedRun: async (runId) => store.pausedRun(runId),
    interruptOrphanedRuns: async () => store.interruptOrphanedRuns(),
    heartbeat: async () => gates.heartbeat(),
    offerTools: async (offer) => gates.offerTools(offer),
    toolsOffered: async () => gates.toolsOffered(),
    // approvals
    openApprovals: async (requests, ttlSeconds, now) => book.open(requests, ttlSeconds, now),
    approval: async (id) => book.get(id),
    approvalsOfRun: async (runId) => book.ofRun(runId),
    pendingApprovalsOfSession: async (sessionId) => book.pendingOfSession(sessionId),
    attachApprovalMessage: async (id, messageRef) => book.attachMessage(id, messageRef),
    // IMMEDIATE: the click is judged and written under the write lock, so runReady is exact across processes.
    async decideApproval(request, alsoInTransaction) {
      const outcome = db.transaction(() => book.decide(request)).immediate();
      if (outcome.kind === "decided" && outcome.runReady && alsoInTransaction)
        await afterCommitted((transaction) => alsoInTransaction(transaction, outcome.approval));
      return outcome;
    },
    expireApprovals: async (sessionPrefix, now, owns) => book.expire(sessionPrefix, now, owns),
    decisionsOf: async (runId) => book.decisionsOf(runId),
    supersedeApprovals: async (sessionId, now) => book.supersede(sessionId, now),
    // gates
    claim: (...eventIds) => store.atomically(() => store.claim(...eventIds)),
    pruneClaims: async (olderThan) => store.pruneClaims(olderThan),
    reserveQuota: async (request) => gates.reserveQuota(request),
    growQuota: async (growth) => gates.growQuota(growth),
    settleQuota: async (reservationId, spent) => gates.settleQuota(reservationId, spent),
    requestCancel: async (target) => gates.requestCancel(target),
    cancelRequested: async (runId) => gates.cancelRequested(runId),
    watchCancels: async (listener) => {
      const stop = gates.watchCancels(listener);
      return async () => stop();
    },
    pruneCancelRequests: async (olderThan) => gates.pruneCancelRequests(olderThan),
    erase: (target, by, alsoInTransaction) => eraser.erase(target, by, alsoInTransaction),
    publishText: async (notice) => gates.publishText(notice),
    watchText: async (listener) => {
      const stop = gates.watchText(listener);
      return async () => stop();
    },
    // feedback
    recordFeedback: (input) => store.atomically(() => feedback.record(input)),
    explainFeedback: (runId, userId, reason) => store.atomically(() => feedback.explain(runId, userId, reason)),
    feedbackOf: async (runId) => feedback.ofRun(runId),
    ratedRuns: async (which, limit) => feedback.ratedRuns(which, limit),
    feedbackCounts: async (since) => feedback.counts(since),
    // schedules
    saveSchedule: (schedule) => store.atomically(() => schedules.saveSchedule(schedule)),
    schedules: async (sessionPrefix) => schedules.schedules(sessionPrefix),
    pauseSchedule: (id, paused) => store.atomically(() => schedules.pauseSchedule(id, paused)),
    deleteSchedule: (id) => store.atomically(() => schedules.deleteSchedule(id)),
    advanceSchedule: (id, tick) => store.atomically(() => schedules.advanceSchedule(id, tick)),
    // readings
    run: async (runId) => reader.run(runId),
    runsOfSession: async (sessionId) => reader.runsOfSession(sessionId),
    childrenOf: async (runId) => reader.childrenOf(runId),
    stagesOf: async (pipelineRunId) => reader.stagesOf(pipelineRunId),
    latestThreadReading: async (sessionId, channel) => reader.latestThreadReading(sessionId, channel),
    steps: async (runId, fromStep) => reader.steps(runId, fromStep),
    payload: async (runId, step) => reader.payload(runId, step),
    totalsByRun: async () => reader.totalsByRun(),
    totalsBySession: async () => reader.totalsBySession(),
    totalsByUser: async (userId) => reader.totalsByUser(userId),
    totalsByDay: async (userId) => reader.totalsByDay(userId),
    userUsageSince: async (userId, since) => reader.userUsageSince(userId, since),
    spentSince: async (scope, since) => reader.spentSince(scope, since),
    spendersSince: async (since) => reader.spendersSince(since),
    searchSessions: async (filters) => searchSessions(filters),
    foldsOf: async (sessionId) => foldsOf(sessionId),
    usageHistory: async (runs) => readUsageHistory(db, runs),
    runUsage: async (runId) => readRunUsage(db, runId),
    async ping() {
      if (closed) throw new Error("the store is closed");
      store.db.prepare("SELECT 1").get();
    },
    async close() {
      if (closed) return;
      closed = true;
      store.close();
    },
  };
}
