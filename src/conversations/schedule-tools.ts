/**
 * Schedules as tools: the model turns "every weekday at 09:00 Berlin time, summarise yesterday's
 * incidents" into a `schedule_run` call, which the person confirms on a card (it is done in their
 * name, as a channel note is), and lists, pauses or deletes schedules of the conversation's place.
 * Only a schedule's maker may pause or delete it. Each schedule runs in the place's own conversation
 * (a channel's top level, a DM, a web session): schedules.ts fires it.
 */
import { randomUUID } from "node:crypto";
import { channelOf } from "../agent/memory.js";
import type { Schedule, StorePort } from "../store/port.js";
import type { AnyTool, ToolDefinition } from "../tools/types.js";
import { cronOf, MAX_SCHEDULES_PER_PLACE, nextRunOf, nextTicks } from "./schedule-times.js";
import { SETTINGS_SOURCE } from "./settings-schedules.js";

/** The conversation a place's schedules run in: a Slack channel's top level, or the conversation itself. */
function placeSessionOf(sessionId: string): string {
  const channel = channelOf(sessionId);
  return sessionId.startsWith("slack:") && channel !== sessionId ? `${channel}:main` : channel;
}

type ScheduleBook = Pick<StorePort, "saveSchedule" | "schedules" | "pauseSchedule" | "deleteSchedule">;

const view = (schedule: Schedule) => ({
  scheduleId: schedule.id,
  ...(schedule.name ? { name: schedule.name, madeIn: "the channel settings file" } : {}),
  cron: schedule.cron,
  timezone: schedule.timezone,
  prompt: schedule.prompt,
  paused: schedule.paused,
  madeBy: schedule.userId,
  ...(schedule.paused ? {} : { next: nextRunOf(schedule) ?? undefined }),
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
      if (schedule.source === SETTINGS_SOURCE)
        throw new Error(
          "This schedule is written in the channel settings file: whoever runs glassbox takes it out there; pause_schedule pauses it.",
        );
      await book.deleteSchedule(schedule.id);
      return { scheduleId: schedule.id, deleted: true };
    },
  };

  return [scheduleRun, listSchedules, pauseSchedule, deleteSchedule] as AnyTool[];
}
