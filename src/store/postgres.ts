/**
 * The store port on PostgreSQL, for several processes sharing one database: a pool of connections,
 * migrations at open (safe when processes start together), each coarse operation one transaction,
 * row locks and ON CONFLICT where exactly once matters (claims, decisions, quota), LISTEN/NOTIFY for
 * cancel requests, and, for a long-running process, a heartbeat so others can tell when it is gone.
 */
import { createHash } from "node:crypto";
import pg from "pg";
import { HEARTBEAT_EVERY_MS } from "./instances.js";
import type { StorePort } from "./port.js";
import { createPostgresApprovals } from "./postgres-approvals.js";
import {
  createPool,
  describeOpenFailure,
  locationOf,
  type PostgresConnection,
  type PostgresTransaction,
} from "./postgres-client.js";
import { createPostgresErase } from "./postgres-erase.js";
import { createPostgresFacts } from "./postgres-facts.js";
import { createPostgresFeedback } from "./postgres-feedback.js";
import { createPostgresSchedules } from "./postgres-schedules.js";
import { createPostgresGates } from "./postgres-gates.js";
import { createHistoryVersions, createPostgresConversations } from "./postgres-messages.js";
import { createPostgresRuns, keepInstanceRow } from "./postgres-runs.js";
import { migratePostgres } from "./postgres-schema.js";
import { createPostgresSessions } from "./postgres-sessions.js";
import { createPostgresSteps } from "./postgres-steps.js";
import { createPostgresTraces } from "./postgres-traces.js";
import { createPostgresWrites } from "./postgres-writes.js";

export interface PostgresPortOptions extends PostgresConnection {
  /** A long-running process (a bot, a worker): it beats every HEARTBEAT_EVERY_MS while the handle is open. */
  longRunning?: boolean;
}

/** Its transactions are `pg` clients inside BEGIN: the run queue adds its turn on the same client. */
export type PostgresPort = StorePort<PostgresTransaction> & { kind: "postgres" };

/** A channel notices are announced on ("cancel", "text"): one per schema, so deployments sharing a database do not hear each other. */
function channelOf(kind: string, schema: string | undefined): string {
  if (!schema) return `glassbox_${kind}`;
  const name = `glassbox_${kind}_${schema}`;
  return name.length <= 63
    ? name
    : `glassbox_${kind}_${createHash("sha256").update(schema).digest("hex").slice(0, 32)}`;
}

/** Opens the database and brings its schema up to date; one sentence (a configuration error) when it cannot. */
export async function openPostgresPort(options: PostgresPortOptions): Promise<PostgresPort> {
  const location = locationOf(options.url);
  const pool = createPool(options);
  try {
    await migratePostgres(pool, options.schema);
  } catch (error) {
    await pool.end().catch(() => {});
    throw describeOpenFailure(error, location);
  }
  const versions = createHistoryVersions();
  const conversations = createPostgresConversations(pool, versions);
  const facts = createPostgresFacts(pool);
  const feedback = createPostgresFeedback(pool);
  const runs = createPostgresRuns(pool);
  const approvals = createPostgresApprovals(pool);
  const traces = createPostgresTraces(pool);
  const sessions = createPostgresSessions(pool);
  const schedules = createPostgresSchedules(pool);
  const writes = createPostgresWrites(pool, createPostgresSteps(), versions);
  const listen = async () => {
    const client = new pg.Client({
      connectionString: options.url,
      application_name: "glassbox-cancels",
      connectionTimeoutMillis: 10_000,
    });
    await client.connect();
    return client;
  };
  const gates = createPostgresGates(pool, listen, {
    cancel: channelOf("cancel", options.schema),
    text: channelOf("text", options.schema),
  });
  let beating: NodeJS.Timeout | undefined;
  let stopKeeping = () => {};
  let closed = false;
  if (options.longRunning) {
    await runs.heartbeat();
    stopKeeping = keepInstanceRow();
    // A missed beat is harmless (the next one comes); six missed in a row mark this process gone.
    beating = setInterval(() => void runs.heartbeat().catch(() => {}), HEARTBEAT_EVERY_MS).unref();
  }

  return {
    kind: "postgres",
    location,
    ...conversations,
    ...facts,
    ...feedback,
    acceptEvent: writes.acceptEvent,
    record: writes.record,
    endUnstartedRun: runs.endUnstartedRun,
    pausedRun: runs.pausedRun,
    interruptOrphanedRuns: runs.interruptOrphanedRuns,
    heartbeat: runs.heartbeat,
    offerTools: runs.offerTools,
    toolsOffered: runs.toolsOffered,
    ...approvals,
    claim: (...eventIds) => gates.claim(eventIds),
    pruneClaims: gates.pruneClaims,
    reserveQuota: gates.reserveQuota,
    growQuota: gates.growQuota,
    settleQuota: gates.settleQuota,
    requestCancel: gates.requestCancel,
    cancelRequested: gates.cancelRequested,
    watchCancels: gates.watchCancels,
    pruneCancelRequests: gates.pruneCancelRequests,
    erase: createPostgresErase(pool).erase,
    publishText: gates.publishText,
    watchText: gates.watchText,
    ...traces,
    ...sessions,
    ...schedules,
    async ping() {
      await pool.query("SELECT 1");
    },
    async close() {
      if (closed) return;
      closed = true;
      clearInterval(beating);
      stopKeeping();
      await gates.close();
      await pool.end();
    },
  };
}
