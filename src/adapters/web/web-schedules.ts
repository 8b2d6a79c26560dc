/**
 * Schedules on the web: GET /api/schedules lists them with their next run, POST /api/schedules/<id>
 * pauses or resumes one ({"paused": true|false}) and DELETE /api/schedules/<id> deletes one. The
 * service token sees and changes every schedule; a person's token only those made in their name. A
 * schedule the settings file makes is paused here but deleted in the file (it would come back).
 */
import { nextRunOf } from "../../conversations/schedule-times.js";
import { SETTINGS_SOURCE } from "../../conversations/settings-schedules.js";
import type { Schedule, StorePort } from "../../store/port.js";
import type { Caller } from "./api-rules.js";
import { HttpError, readJsonObject, sendJson } from "./http.js";
import type { Route } from "./web-api.js";

type ScheduleBook = Pick<StorePort, "schedules" | "pauseSchedule" | "deleteSchedule">;

/** A schedule as the API shows it: when it runs next (none while paused). */
export function scheduleView(schedule: Schedule) {
  return { ...schedule, next: nextRunOf(schedule) };
}

export function scheduleRoutes(store: ScheduleBook): Route[] {
  const mine = (caller: Caller, schedule: Schedule) => caller.userId === undefined || schedule.userId === caller.userId;
  /** The schedule, when the caller may change it; otherwise a 404 that does not say which. */
  const changeable = async (caller: Caller, id: string) => {
    const schedule = (await store.schedules()).find((found) => found.id === id);
    if (!schedule || !mine(caller, schedule)) throw new HttpError(404, `There is no schedule ${id.slice(0, 64)}.`);
    return schedule;
  };
  return [
    [
      "GET",
      /^\/api\/schedules$/,
      async (_request, response, _params, _url, caller) => {
        const schedules = (await store.schedules()).filter((schedule) => mine(caller, schedule));
        sendJson(response, 200, { schedules: schedules.map(scheduleView) });
      },
    ],
    [
      "POST",
      /^\/api\/schedules\/([^/]+)$/,
      async (request, response, [id = ""], _url, caller) => {
        const { paused } = await readJsonObject(request);
        if (typeof paused !== "boolean")
          throw new HttpError(400, 'Send {"paused": true} to pause it, or false to resume it.');
        const schedule = await changeable(caller, id);
        await store.pauseSchedule(schedule.id, paused);
        sendJson(response, 200, scheduleView({ ...schedule, paused }));
      },
    ],
    [
      "DELETE",
      /^\/api\/schedules\/([^/]+)$/,
      async (_request, response, [id = ""], _url, caller) => {
        const schedule = await changeable(caller, id);
        if (schedule.source === SETTINGS_SOURCE)
          throw new HttpError(
            409,
            `The schedule ${schedule.name ?? schedule.id} is written in the channel settings file; take it out there, or pause it here.`,
          );
        await store.deleteSchedule(schedule.id);
        sendJson(response, 200, { id: schedule.id, deleted: true });
      },
    ],
  ];
}
