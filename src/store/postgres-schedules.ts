/** Runs on a schedule, on PostgreSQL: the rules of sqlite-schedules.ts. */
import type pg from "pg";
import type { Schedule } from "./port-data.js";

const COLUMNS = `id, session_id AS "sessionId", user_id AS "userId", cron, timezone, prompt, missed, paused, source,
  created_at AS "createdAt", last_tick AS "lastTick", name`;

export function createPostgresSchedules(pool: pg.Pool) {
  return {
    async saveSchedule(schedule: Schedule): Promise<void> {
      await pool.query(
        `INSERT INTO schedules (id, session_id, user_id, cron, timezone, prompt, missed, paused, source, created_at, last_tick, name)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
         ON CONFLICT (id) DO UPDATE SET session_id = excluded.session_id, user_id = excluded.user_id, cron = excluded.cron,
           timezone = excluded.timezone, prompt = excluded.prompt, missed = excluded.missed, paused = excluded.paused,
           source = excluded.source, name = excluded.name, last_tick = greatest(schedules.last_tick, excluded.last_tick)`,
        [
          schedule.id,
          schedule.sessionId,
          schedule.userId,
          schedule.cron,
          schedule.timezone,
          schedule.prompt,
          schedule.missed,
          schedule.paused,
          schedule.source,
          schedule.createdAt,
          schedule.lastTick,
          schedule.name ?? null,
        ],
      );
    },
    async schedules(sessionPrefix?: string): Promise<Schedule[]> {
      const { rows } = await pool.query<Omit<Schedule, "name"> & { name: string | null }>(
        `SELECT ${COLUMNS} FROM schedules WHERE $1::text IS NULL OR starts_with(session_id, $1)
         ORDER BY created_at, id COLLATE "C"`,
        [sessionPrefix ?? null],
      );
      return rows.map(({ name, ...row }) => ({ ...row, ...(name === null ? {} : { name }) }));
    },
    async pauseSchedule(id: string, paused: boolean): Promise<boolean> {
      return ((await pool.query("UPDATE schedules SET paused = $2 WHERE id = $1", [id, paused])).rowCount ?? 0) > 0;
    },
    async deleteSchedule(id: string): Promise<boolean> {
      return ((await pool.query("DELETE FROM schedules WHERE id = $1", [id])).rowCount ?? 0) > 0;
    },
    async advanceSchedule(id: string, tick: string): Promise<boolean> {
      const { rowCount } = await pool.query("UPDATE schedules SET last_tick = $2 WHERE id = $1 AND last_tick < $2", [
        id,
        tick,
      ]);
      return (rowCount ?? 0) > 0;
    },
  };
}
