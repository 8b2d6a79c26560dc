/** The live view's bound: one session more than it follows is refused (a 503 the API answers before its stream opens). */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { HttpError } from "../../../../src/adapters/web/http.js";
import { followStoreEvents } from "../../../../src/adapters/web/store-events.js";
import { openStorePort } from "../../../../src/store/index.js";

const folders: string[] = [];
afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

describe("followStoreEvents", () => {
  it("refuses to follow one session more than maxSessions with a 503, and follows it once another is let go", async () => {
    const folder = mkdtempSync(join(tmpdir(), "glassbox-events-"));
    folders.push(folder);
    const store = await openStorePort({ databasePath: join(folder, "glassbox.db") });
    const events = followStoreEvents({ store, log: pino({ level: "silent" }), maxSessions: 1, everyMs: 60_000 });
    try {
      const watcher = { event: () => {}, end: () => {} };
      const first = events.hub.watchSession("web:a", undefined, watcher);
      const refused = (() => {
        try {
          events.hub.watchSession("web:b", undefined, watcher);
        } catch (error) {
          return error;
        }
      })();
      expect(refused).toBeInstanceOf(HttpError);
      expect(refused).toMatchObject({
        status: 503,
        message: "Too many sessions are followed at once here; try again in a moment.",
      });
      first.stop();
      events.hub.watchSession("web:b", undefined, watcher).stop();
    } finally {
      events.stop();
      await store.close();
    }
  });
});
