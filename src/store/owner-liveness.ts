/**
 * Whether the process that owns a run may still be running it, from what the store knows of its
 * instance (the rules of src/agent/store-owners.ts, on data instead of a SQLite connection): gone
 * when its heartbeat is stale; when it ran on this host and its pid no longer exists; or when it ran
 * on this host under this process's pid, which is this process now. Another host's processes cannot
 * be looked at, so without a stale heartbeat they count as alive.
 */
import { hostname } from "node:os";
import { INSTANCE, STALE_AFTER_MS } from "../agent/store-owners.js";

export interface InstanceRecord {
  host: string;
  pid: number;
  heartbeatAt: string | null;
}

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
  // Same host, same pid, another instance: this process has taken the pid over.
  if (pid === process.pid) return false;
  try {
    process.kill(pid, 0); // signal 0: only asks whether it exists
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"; // exists, owned by another user
  }
}
