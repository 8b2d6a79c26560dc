/**
 * Schedules written in the channel settings file (`schedules:`), kept in the store beside those made
 * in chat so that one ticker fires both. A planned schedule's id comes from what the file says of it:
 * the same entry is the same schedule in every process and across restarts (its last tick kept),
 * an edited entry is a new schedule, and an entry taken out of the file is deleted from the store.
 */
import { createHash } from "node:crypto";
import type { Schedule, StorePort } from "../store/port.js";
import type { PlannedSchedule } from "./settings-schedule-entries.js";

/** The `source` of a schedule the settings file made. */
export const SETTINGS_SOURCE = "settings";

/** The conversation a planned schedule runs in: a Slack channel's top level, a Discord channel. */
export function plannedSessionOf(plan: Pick<PlannedSchedule, "platform" | "workspace" | "channel">): string {
  return plan.platform === "slack"
    ? `slack:${plan.workspace}:${plan.channel}:main`
    : `discord:${plan.workspace}:${plan.channel}`;
}

/** The schedule `plan` is, as the store keeps it; new ones start at `now` (no tick before it fires). */
export function scheduleOfPlan(plan: PlannedSchedule, now: Date): Schedule {
  const content = [plan.name, plan.platform, plan.workspace, plan.channel, plan.cron, plan.timezone, plan.prompt];
  const id = createHash("sha256")
    .update(JSON.stringify([...content, plan.as, plan.missed]))
    .digest("hex")
    .slice(0, 12);
  return {
    id: `cfg_${id}`,
    name: plan.name,
    sessionId: plannedSessionOf(plan),
    userId: plan.as,
    cron: plan.cron,
    timezone: plan.timezone,
    prompt: plan.prompt,
    missed: plan.missed,
    paused: false,
    source: SETTINGS_SOURCE,
    createdAt: now.toISOString(),
    lastTick: now.toISOString(),
  };
}

/**
 * Makes the store's planned schedules those of `plans`: new entries added, entries gone deleted.
 * Those already kept stay as they are (their last tick, and a pause made on the web page).
 */
export async function syncPlannedSchedules(
  store: Pick<StorePort, "schedules" | "saveSchedule" | "deleteSchedule">,
  plans: readonly PlannedSchedule[],
  now: Date,
): Promise<{ added: number; removed: number }> {
  const wanted = plans.map((plan) => scheduleOfPlan(plan, now));
  const kept = (await store.schedules()).filter((schedule) => schedule.source === SETTINGS_SOURCE);
  const keptIds = new Set(kept.map((schedule) => schedule.id));
  const wantedIds = new Set(wanted.map((schedule) => schedule.id));
  const gone = kept.filter((schedule) => !wantedIds.has(schedule.id));
  const added = wanted.filter((schedule) => !keptIds.has(schedule.id));
  for (const schedule of gone) await store.deleteSchedule(schedule.id);
  for (const schedule of added) await store.saveSchedule(schedule);
  return { added: added.length, removed: gone.length };
}
