/**
 * What every deployment runs on: the store and the run queue that carries turns from the platforms'
 * inbound handlers to the conversations. SQLite goes with the queue in this process (one process
 * runs everything); PostgreSQL with its table of turns (any number of ingress and worker processes).
 * The pipeline above them is the same either way.
 */
import { configurationError } from "../agent/errors.js";
import type { Logger } from "../logger.js";
import { createInProcessRunQueue } from "../queue/in-process.js";
import type { RunQueue } from "../queue/types.js";
import { openStorePort, type StorePortOptions } from "../store/index.js";
import type { StorePort } from "../store/port.js";
import type { RoleQueueOptions } from "./queue-settings.js";

/** A process's part: receive (ingress), run turns (worker), or both (all). */
export type Role = "ingress" | "worker" | "all";

/** The store and the queue of one process; the queue's transactions are the store's. */
export interface Deployment<Transaction = unknown> {
  store: StorePort<Transaction>;
  queue: RunQueue<Transaction>;
  /** Closes the queue, then the store. */
  close(): Promise<void>;
}

export interface DeploymentOptions {
  /** Where the store is (storePortOptionsFromEnv). */
  store: StorePortOptions;
  /** PostgreSQL only: the run queue's own settings (its schema, timings). */
  queue?: RoleQueueOptions;
  role: Role;
  log: Logger;
  /** A store already open (a test's, a library user's): used as it is and left open by close(). */
  given?: StorePort;
}

/**
 * Opens the store and its queue for `role`. Ingress and workers in processes of their own need
 * PostgreSQL, which carries the turns between them: asked on SQLite, the role is refused in one sentence.
 */
export async function openDeployment(options: DeploymentOptions): Promise<Deployment> {
  const { role, log } = options;
  const url = options.given ? options.given.kind === "postgres" : Boolean(options.store.databaseUrl);
  if (!url && role === "ingress") {
    throw configurationError(
      "GLASSBOX_ROLE=ingress needs GLASSBOX_DATABASE_URL (PostgreSQL), which carries the work to the worker processes; unset GLASSBOX_ROLE to run everything in one process.",
    );
  }
  if (!url && role === "worker") {
    throw configurationError(
      "GLASSBOX_ROLE=worker needs GLASSBOX_DATABASE_URL (PostgreSQL), where ingress processes leave the turns; unset GLASSBOX_ROLE to run everything in one process.",
    );
  }
  const store = options.given ?? (await openStorePort({ ...options.store, longRunning: true }));
  const closeStore = options.given ? async () => {} : () => store.close();
  try {
    const queue =
      store.kind === "postgres"
        ? await openPostgresQueue(options, log)
        : (createInProcessRunQueue() as RunQueue<unknown>);
    return {
      store,
      queue,
      async close() {
        await queue.close();
        await closeStore();
      },
    };
  } catch (error) {
    await closeStore();
    throw error;
  }
}

async function openPostgresQueue(options: DeploymentOptions, log: Logger): Promise<RunQueue<unknown>> {
  const { openPostgresRunQueue } = await import("../queue/postgres.js"); // SQLite never loads pg
  const connectionString = options.store.databaseUrl;
  if (!connectionString) throw configurationError("the PostgreSQL run queue needs GLASSBOX_DATABASE_URL.");
  return (await openPostgresRunQueue({ ...options.queue, connectionString, logger: log })) as RunQueue<unknown>;
}
