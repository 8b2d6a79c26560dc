/**
 * The run queue's settings from the environment, for the roles: GLASSBOX_QUEUE_TIMINGS is JSON of
 * the liveness timings (heartbeatMs, deadAfterMs, sweepMs, pollIntervalMs), meant for
 * tests and benchmarks that need a takeover in a second rather than the 21 s of the defaults.
 */
import { configurationError } from "../agent/errors.js";
import type { PostgresQueueOptions } from "../queue/postgres.js";
import { DEFAULT_LIVENESS, type LivenessTimings } from "../queue/worker-liveness.js";

export type RoleQueueOptions = Omit<PostgresQueueOptions, "connectionString" | "logger">;

export function queueOptionsFromEnv(env: Record<string, string | undefined> = process.env): RoleQueueOptions {
  const text = env.GLASSBOX_QUEUE_TIMINGS?.trim();
  if (!text) return {};
  const names = Object.keys(DEFAULT_LIVENESS) as Array<keyof LivenessTimings>;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  const entries = parsed && typeof parsed === "object" && !Array.isArray(parsed) ? Object.entries(parsed) : undefined;
  const valid = entries?.every(
    ([name, value]) =>
      (names as string[]).includes(name) && typeof value === "number" && Number.isFinite(value) && value > 0,
  );
  if (!entries || !valid)
    throw configurationError(
      `GLASSBOX_QUEUE_TIMINGS must be a JSON object of milliseconds with some of ${names.join(", ")}; leave it unset for the defaults.`,
    );
  return { timings: Object.fromEntries(entries) as Partial<LivenessTimings> };
}
