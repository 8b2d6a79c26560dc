/**
 * Who runs a run: a process instance, an id made once per process and recorded with its host, pid
 * and start (the instances table). Not "host:pid" alone: a bot that runs as PID 1 in a container
 * and is restarted after a kill has the host and pid of the process it replaced, and would take
 * that process's runs for its own.
 */
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type Database from "better-sqlite3";

/** How often a bot's checkpoint thread records that its instance is alive. */
export const HEARTBEAT_EVERY_MS = 30_000;
/** An instance that has not beaten for this long is gone, wherever it ran (six beats missed). */
export const STALE_AFTER_MS = 180_000;

const ENVIRONMENT_KEY = "GLASSBOX_INSTANCE";

/**
 * This process's instance, the same in all its threads. A module-level value alone would be one
 * per thread (a worker thread evaluates its modules anew), so the first thread to load this module
 * keeps the id in process.env, which each worker thread gets a copy of when it is created (main.ts
 * loads the store before it starts any). The pid goes with the id: a child process inherits the
 * environment too, and must not take its parent's id for its own.
 */
export const INSTANCE = {
  id: processInstanceId(),
  host: hostname(),
  pid: process.pid,
  startedAt: new Date(Date.now() - process.uptime() * 1000).toISOString(),
};

function processInstanceId(): string {
  const [pid, id] = (process.env[ENVIRONMENT_KEY] ?? "").split("/");
  if (pid === String(process.pid) && id) return id;
  const made = randomUUID();
  process.env[ENVIRONMENT_KEY] = `${process.pid}/${made}`;
  return made;
}

/** Records this instance, once; run inside the transaction that first names it as a run's owner. */
export function instanceRegistration(db: Database.Database): () => void {
  const register = db.prepare("INSERT OR IGNORE INTO instances (id, host, pid, started_at) VALUES (?, ?, ?, ?)");
  return () => void register.run(INSTANCE.id, INSTANCE.host, INSTANCE.pid, INSTANCE.startedAt);
}

/**
 * Whether the owner of a run (an instance id; "host:pid" from before instances; null from before
 * owners) may still be running it. An owner is gone when its heartbeat is stale; when it ran on
 * this host and its pid no longer exists; or when it ran on this host under this process's pid,
 * which is this process now. Another host's processes cannot be looked at, so without a stale
 * heartbeat they count as alive.
 */
export function ownerChecker(db: Database.Database, now = Date.now()): (owner: string | null) => boolean {
  const instanceOf = db.prepare("SELECT host, pid, heartbeat_at AS heartbeatAt FROM instances WHERE id = ?");
  return (owner) =>
    ownerAlive(owner, owner === null ? undefined : (instanceOf.get(owner) as InstanceRecord | undefined), now);
}

/** What the store knows of a process instance. */
export interface InstanceRecord {
  host: string;
  pid: number;
  heartbeatAt: string | null;
}

/** The rules of ownerChecker on data, for stores that read instances their own way (PostgreSQL). */
export function ownerAlive(owner: string | null, instance: InstanceRecord | undefined, now = Date.now()): boolean {
  if (owner === null) return false;
  if (owner === INSTANCE.id) return true;
  if (!instance) return legacyOwnerAlive(owner);
  if (instance.heartbeatAt !== null && now - Date.parse(instance.heartbeatAt) > STALE_AFTER_MS) return false;
  return processMayBeAlive(instance.host, instance.pid);
}

/** "host:pid", as owners were written before instances; anything else no instance vouches for. */
function legacyOwnerAlive(owner: string): boolean {
  const separator = owner.lastIndexOf(":");
  const pid = Number(owner.slice(separator + 1));
  if (separator < 0 || !Number.isInteger(pid)) return false;
  return processMayBeAlive(owner.slice(0, separator), pid);
}

function processMayBeAlive(host: string, pid: number): boolean {
  if (host !== hostname()) return true;
  // Same host, same pid, another instance: this process has taken the pid over (a restarted
  // container's PID 1), so the owner is gone.
  if (pid === process.pid) return false;
  try {
    process.kill(pid, 0); // signal 0: only asks whether it exists
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"; // exists, owned by another user
  }
}
