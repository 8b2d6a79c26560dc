/**
 * Runs on a schedule, in the SQLite file: a row per schedule, whose last_tick only moves forward
 * (advanceSchedule), which is what keeps a tick from firing twice when several processes share the file.
 */
import type { Database } from "better-sqlite3";
import type { Schedule } from "./port-data.js";

interface Row extends Omit<Schedule, "paused" | "name"> {
  paused: number;
  name: string | null;
}

const COLUMNS = `id, session_id AS sessionId, user_id AS userId, cron, timezone, prompt, missed, paused, source,
  created_at AS createdAt, last_tick AS lastTick, name`;

export function createSqliteSchedules(db: Database) {
  const statements = {
    save: db.prepare(
      `INSERT INTO schedules (id, session_id, user_id, cron, timezone, prompt, missed, paused, source, created_at, last_tick, name)
       VALUES (@id, @sessionId, @userId, @cron, @timezone, @prompt, @missed, @paused, @source, @createdAt, @lastTick, @name)
       ON CONFLICT (id) DO UPDATE SET session_id = excluded.session_id, user_id = excluded.user_id, cron = excluded.cron,
         timezone = excluded.timezone, prompt = excluded.prompt, missed = excluded.missed, paused = excluded.paused,
         source = excluded.source, name = excluded.name, last_tick = max(schedules.last_tick, excluded.last_tick)`,
    ),
    all: db.prepare(`SELECT ${COLUMNS} FROM schedules ORDER BY created_at, id`),
    // Keys are ASCII: none under the prefix sorts past U+FFFF after it.
    under: db.prepare(
      `SELECT ${COLUMNS} FROM schedules WHERE session_id >= ? AND session_id < ? ORDER BY created_at, id`,
    ),
    pause: db.prepare("UPDATE schedules SET paused = ? WHERE id = ?"),
    delete: db.prepare("DELETE FROM schedules WHERE id = ?"),
    advance: db.prepare("UPDATE schedules SET last_tick = ? WHERE id = ? AND last_tick < ?"),
  };
  const scheduleOf = ({ name, ...row }: Row): Schedule => ({
    ...row,
    paused: row.paused === 1,
    ...(name === null ? {} : { name }),
  });
  return {
    saveSchedule(schedule: Schedule): void {
      statements.save.run({ ...schedule, paused: schedule.paused ? 1 : 0, name: schedule.name ?? null });
    },
    schedules(sessionPrefix?: string): Schedule[] {
      const rows =
        sessionPrefix === undefined
          ? statements.all.all()
          : statements.under.all(sessionPrefix, `${sessionPrefix}\uffff`);
      return (rows as Row[]).map(scheduleOf);
    },
    pauseSchedule: (id: string, paused: boolean): boolean => statements.pause.run(paused ? 1 : 0, id).changes > 0,
    deleteSchedule: (id: string): boolean => statements.delete.run(id).changes > 0,
    advanceSchedule: (id: string, tick: string): boolean => statements.advance.run(tick, id, tick).changes > 0,
  };
}
