/**
 * Runs on a schedule: every process that runs turns looks at the stored schedules every `everyMs`
 * and fires the ticks that came due, each as a message of the schedule's person in its session,
 * through the run queue as ingress accepts a person's message (acceptInboundText). A tick fires once
 * however many processes see it: its acceptance claims `schedule:<id>:<tick>` (a second claim is a
 * duplicate that writes nothing), and the schedule's last tick then moves past it. A process that
 * dies in between leaves the last tick behind; the next look claims again, finds it taken, and moves it.
 *
 * A tick missed while nothing ran fires once when the schedule is next seen (`missed: "once"`), or
 * is passed over when it is older than two looks (`missed: "skip"`); only the latest missed tick
 * counts, so a schedule asleep for a week fires once, not seven times.
 *
 * Schedules written in the channel settings file are brought into the store first, whenever the file
 * changed (settings-schedules.ts).
 */
import { Cron } from "croner";
import type { Logger } from "../logger.js";
import type { Schedule, StorePort } from "../store/port.js";
import { acceptInboundText, type IngressQueue, type IngressStore } from "./turns.js";
import type { TokenCounter } from "../agent/tokens.js";
import type { LiveChannelSettings } from "./channel-settings.js";
import { syncPlannedSchedules } from "./settings-schedules.js";

export const DEFAULT_SCHEDULE_LOOK_MS = 15_000;

export interface ScheduleTickerOptions<Transaction> {
  store: IngressStore<Transaction> &
    Pick<StorePort<Transaction>, "schedules" | "advanceSchedule" | "saveSchedule" | "deleteSchedule">;
  queue: IngressQueue<Transaction>;
  counter: Pick<TokenCounter, "message">;
  log: Logger;
  /** The channel settings, whose `schedules` are kept in the store. */
  channels?: Pick<LiveChannelSettings, "current">;
  everyMs?: number;
  now?: () => Date;
}

/** What one look did with each schedule it found due. */
export type TickOutcome = "fired" | "taken" | "passed";

/** The latest tick of `schedule` at or before `now`; undefined for a schedule that never ticked since its last. */
export function dueTick(schedule: Pick<Schedule, "cron" | "timezone" | "lastTick">, now: Date): Date | undefined {
  const [latest] = new Cron(schedule.cron, { timezone: schedule.timezone, paused: true }).previousRuns(1, now);
  return latest && latest.getTime() > Date.parse(schedule.lastTick) ? latest : undefined;
}

export function startScheduleTicker<Transaction>(options: ScheduleTickerOptions<Transaction>) {
  const everyMs = options.everyMs ?? DEFAULT_SCHEDULE_LOOK_MS;
  const now = options.now ?? (() => new Date());
  const { store, queue, counter, log } = options;

  /** Fires (or passes over) the tick of `schedule` that came due, if any. */
  async function tickOf(schedule: Schedule, at: Date): Promise<TickOutcome | undefined> {
    const due = dueTick(schedule, at);
    if (!due) return undefined;
    const tick = due.toISOString();
    if (schedule.missed === "skip" && at.getTime() - due.getTime() > 2 * everyMs) {
      await store.advanceSchedule(schedule.id, tick);
      return "passed";
    }
    const { outcome } = await acceptInboundText(store, queue, counter, {
      eventIds: [`schedule:${schedule.id}:${tick}`],
      sessionId: schedule.sessionId,
      userId: schedule.userId,
      input: schedule.prompt,
      scheduleId: schedule.id,
    });
    await store.advanceSchedule(schedule.id, tick);
    return outcome.kind === "accepted" ? "fired" : "taken";
  }

  let synced: string | undefined;
  /** The settings file's schedules into the store, when the file changed since the last look. */
  async function syncPlanned(at: Date): Promise<void> {
    const settings = options.channels?.current();
    if (!settings || settings.source.version === synced) return;
    const { added, removed } = await syncPlannedSchedules(store, settings.schedules, at);
    if (added + removed > 0) log.info({ added, removed, file: settings.source.path }, "schedules: settings file read");
    synced = settings.source.version;
  }

  /** One look at every schedule; what it did with those that were due, by id. */
  async function look(): Promise<Record<string, TickOutcome>> {
    const at = now();
    await syncPlanned(at);
    const done: Record<string, TickOutcome> = {};
    for (const schedule of await store.schedules()) {
      if (schedule.paused) continue;
      try {
        const outcome = await tickOf(schedule, at);
        if (outcome) done[schedule.id] = outcome;
      } catch (error) {
        log.warn({ schedule: schedule.id, error: (error as Error).message }, "schedules: a tick could not be fired");
      }
    }
    return done;
  }

  let looking: Promise<unknown> = Promise.resolve();
  const timer = setInterval(() => {
    looking = looking
      .then(look)
      .catch((error: unknown) =>
        log.warn({ error: (error as Error).message }, "schedules: reading the schedules failed"),
      );
  }, everyMs);
  timer.unref();
  return {
    look,
    async stop() {
      clearInterval(timer);
      await looking;
    },
  };
}
