/**
 * Schedules as tools: the model turns "every weekday at 09:00 Berlin time, summarise yesterday's
 * incidents" into a `schedule_run` call, which the person confirms on a card (it is done in their
 * name, as a channel note is), and lists, pauses or deletes schedules of the conversation's place.
 * Only a schedule's maker may pause or delete it. Each schedule runs in the place's own conversation
 * (a channel's top level, a DM, a web session): schedules.ts fires it.
 */
import { randomUUID } from "node:crypto";
import { Cron } from "croner";
import { channelOf } from "../agent/memory.js";
import type { Schedule, StorePort } from "../store/port.js";
import type { AnyTool, ToolDefinition } from "../tools/types.js";

/** Ticks closer together than this are refused: each is a model run someone pays for. */
export const MIN_SCHEDULE_GAP_MS = 5 * 60_000;
/** Schedules one place may hold. */
export const MAX_SCHEDULES_PER_PLACE = 20;

type ScheduleBook = Pick<StorePort, "saveSchedule" | "schedules" | "pauseSchedule" | "deleteSchedule">;

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

/** The conversation a place's schedules run in: a Slack channel's top level, or the conversation itself. */
function placeSessionOf(sessionId: string): string {
  const channel = channelOf(sessionId);
  return sessionId.startsWith("slack:") && channel !== sessionId ? `${channel}:main` : channel;
}

const view = (schedule: Schedule) => ({
  scheduleId: schedule.id,
  cron: schedule.cron,
  timezone: schedule.timezone,
  prompt: schedule.prompt,
  paused: schedule.paused,
  madeBy: schedule.userId,
  ...(schedule.paused ? {} : { next: nextTicks(schedule.cron, schedule.timezone, new Date(), 1)[0]?.toISOString() }),
});

export function createScheduleTools(book: ScheduleBook): AnyTool[] {
  /** The schedules of the place a run is in (a Slack channel's threads share the channel's). */
  const ofPlace = async (sessionId: string) => {
    const place = placeSessionOf(sessionId);
    return (await book.schedules(place)).filter((schedule) => schedule.sessionId === place);
  };
  const owned = async (scheduleId: string, sessionId: string, userId: string) => {
    const schedule = (await ofPlace(sessionId)).find((found) => found.id === scheduleId);
    if (!schedule) throw new Error(`There is no schedule ${scheduleId.slice(0, 40)} here; list_schedules shows them.`);
    if (schedule.userId !== userId) throw new Error(`Only ${schedule.userId}, who made it, may change this schedule.`);
    return schedule;
  };

  const scheduleRun: ToolDefinition<{ every: string; timezone?: string; prompt: string; missed?: "once" | "skip" }> = {
    name: "schedule_run",
    description:
      "Runs a request on a schedule in this place, in the user's name (they confirm it first): every day, weekday or named day at a time, every hour, every N minutes, or five cron fields.",
    parameters: {
      type: "object",
      properties: {
        every: {
          type: "string",
          maxLength: 100,
          description: "e.g. 'weekday 09:00', 'day 07:30', 'hour', '30 minutes'.",
        },
        timezone: {
          type: "string",
          maxLength: 64,
          description: "An IANA time zone, e.g. Europe/Berlin (default UTC).",
        },
        prompt: { type: "string", minLength: 3, maxLength: 2000, description: "What to do at each run." },
        missed: {
          type: "string",
          enum: ["once", "skip"],
          description: "A run missed while glassbox was down: run it once when back (default), or skip it.",
        },
      },
      required: ["every", "prompt"],
      additionalProperties: false,
    },
    dangerous: true,
    // Scheduled runs are made in the person's name, with their budget: confirming one is theirs.
    requesterConfirms: true,
    handler: async ({ every, timezone = "UTC", prompt, missed = "once" }, context) => {
      const cron = cronOf(every);
      const next = nextTicks(cron, timezone);
      const sessionId = placeSessionOf(context.sessionId);
      if ((await ofPlace(sessionId)).length >= MAX_SCHEDULES_PER_PLACE)
        throw new Error(`This place has ${MAX_SCHEDULES_PER_PLACE} schedules already; delete one first.`);
      const now = new Date().toISOString();
      const schedule: Schedule = {
        id: `sch_${randomUUID().slice(0, 8)}`,
        sessionId,
        userId: context.userId,
        cron,
        timezone,
        prompt: prompt.trim(),
        missed,
        paused: false,
        source: "chat",
        createdAt: now,
        lastTick: now,
      };
      await book.saveSchedule(schedule);
      return { ...view(schedule), nextRuns: next.map((tick) => tick.toISOString()) };
    },
  };

  const listSchedules: ToolDefinition<Record<string, never>> = {
    name: "list_schedules",
    description: "Lists the runs scheduled in this place: when, what, who made them, whether paused, the next run.",
    parameters: { type: "object", properties: {}, additionalProperties: false },
    handler: async (_args, context) => ({ schedules: (await ofPlace(context.sessionId)).map(view) }),
  };

  const pauseSchedule: ToolDefinition<{ schedule_id: string; paused: boolean }> = {
    name: "pause_schedule",
    description: "Pauses a schedule of this place (paused: true) or resumes it (false); only its maker may.",
    parameters: {
      type: "object",
      properties: { schedule_id: { type: "string", maxLength: 64 }, paused: { type: "boolean" } },
      required: ["schedule_id", "paused"],
      additionalProperties: false,
    },
    handler: async ({ schedule_id, paused }, context) => {
      const schedule = await owned(schedule_id, context.sessionId, context.userId);
      await book.pauseSchedule(schedule.id, paused);
      return { scheduleId: schedule.id, paused };
    },
  };

  const deleteSchedule: ToolDefinition<{ schedule_id: string }> = {
    name: "delete_schedule",
    description: "Deletes a schedule of this place for good; only its maker may.",
    parameters: {
      type: "object",
      properties: { schedule_id: { type: "string", maxLength: 64 } },
      required: ["schedule_id"],
      additionalProperties: false,
    },
    handler: async ({ schedule_id }, context) => {
      const schedule = await owned(schedule_id, context.sessionId, context.userId);
      await book.deleteSchedule(schedule.id);
      return { scheduleId: schedule.id, deleted: true };
    },
  };

  return [scheduleRun, listSchedules, pauseSchedule, deleteSchedule] as AnyTool[];
}
