/**
 * What workers can do, as ingress processes show it: each worker records its tools' names and the
 * requests they suggest (StorePort.offerTools) with its instance; ingress, which loads no tools,
 * reads those of the live workers together (toolsOffered) for the pages and for an empty mention.
 */
import { ownerAlive, type InstanceRecord } from "./instances.js";
import type { WorkerOffer } from "./port-data.js";

/** Most suggestions kept from all the workers together (a page shows a few). */
const MAX_HINTS = 8;

/** Several workers' offers as one: every tool once, by name; the suggestions in order, each once. */
export function mergeOffers(offers: WorkerOffer[]): WorkerOffer {
  const tools = [...new Set(offers.flatMap((offer) => offer.tools))].sort();
  const hints = [...new Set(offers.flatMap((offer) => offer.hints))].slice(0, MAX_HINTS);
  return { tools, hints };
}

/** The offers of the instances still alive (the owners' rule), as one; each store reads the rows its own way. */
export function liveOffer(
  instances: ReadonlyArray<InstanceRecord & { id: string; offer: unknown }>,
  now = Date.now(),
): WorkerOffer {
  return mergeOffers(
    instances.filter((instance) => ownerAlive(instance.id, instance, now)).map((instance) => offerOf(instance.offer)),
  );
}

/** An offer as stored (JSON text on SQLite, jsonb on PostgreSQL); anything not shaped like one offers nothing. */
export function offerOf(stored: unknown): WorkerOffer {
  const value = typeof stored === "string" ? safeParse(stored) : stored;
  const strings = (list: unknown) =>
    Array.isArray(list) ? list.filter((item): item is string => typeof item === "string") : [];
  const record = typeof value === "object" && value !== null ? (value as Record<string, unknown>) : {};
  return { tools: strings(record.tools), hints: strings(record.hints) };
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
