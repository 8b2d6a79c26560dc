/**
 * The times of a schedule: the words a person or a settings file uses ("weekday 09:00") as a cron
 * expression, and its next ticks, checked (a valid expression and time zone, ticks far enough apart).
 */
import { Cron } from "croner";

/** Ticks closer together than this are refused: each is a model run someone pays for. */
export const MIN_SCHEDULE_GAP_MS = 5 * 60_000;
/** Schedules one place may hold. */
export const MAX_SCHEDULES_PER_PLACE = 20;

const DAYS = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"];

/**
 * A cron expression for `every`: "day 07:30", "weekday 09:00", "monday 09:00", "hour", "30 minutes",
 * or five cron fields. Throws one sentence the model can act on.
 */
export function cronOf(every: string): string {
  const words = every
    .trim()
    .toLowerCase()
    .replace(/^every\s+/, "");
  const at = /^(day|weekday|sunday|monday|tuesday|wednesday|thursday|friday|saturday)\s+(\d{1,2}):(\d{2})$/.exec(words);
  if (at) {
    const [, day = "", hours = "", minutes = ""] = at;
    if (Number(hours) > 23 || Number(minutes) > 59) throw new Error(`${hours}:${minutes} is not a time of day.`);
    const weekdays = day === "day" ? "*" : day === "weekday" ? "1-5" : String(DAYS.indexOf(day));
    return `${Number(minutes)} ${Number(hours)} * * ${weekdays}`;
  }
  if (words === "hour") return "0 * * * *";
  const minutes = /^(\d{1,4})\s+minutes?$/.exec(words);
  if (minutes) return `*/${Number(minutes[1])} * * * *`;
  if (words.split(/\s+/).length === 5) return words;
  throw new Error(
    `'${every.slice(0, 80)}' is not a schedule; say "day 07:30", "weekday 09:00", "monday 09:00", "hour", "30 minutes" or five cron fields.`,
  );
}

/** The schedule's next ticks, checked: a valid expression and time zone, ticks at least MIN_SCHEDULE_GAP_MS apart. */
export function nextTicks(cron: string, timezone: string, from = new Date(), count = 3): Date[] {
  let ticks: Date[];
  try {
    ticks = new Cron(cron, { timezone, paused: true }).nextRuns(Math.max(count, 10), from);
  } catch (error) {
    throw new Error(`'${cron}' in '${timezone}' cannot be scheduled: ${(error as Error).message}`);
  }
  for (let index = 1; index < ticks.length; index++)
    if ((ticks[index]?.getTime() ?? 0) - (ticks[index - 1]?.getTime() ?? 0) < MIN_SCHEDULE_GAP_MS)
      throw new Error("Runs on a schedule must be at least 5 minutes apart.");
  return ticks.slice(0, count);
}

/** When a kept schedule runs next, for people; null while it is paused, or where its time zone is unknown here. */
export function nextRunOf(schedule: { cron: string; timezone: string; paused: boolean }): string | null {
  if (schedule.paused) return null;
  try {
    return new Cron(schedule.cron, { timezone: schedule.timezone, paused: true }).nextRun()?.toISOString() ?? null;
  } catch {
    return null;
  }
}
