/** How many live views (event streams) one caller may hold open in this process. */
import type { IncomingMessage } from "node:http";
import type { Caller } from "./api-rules.js";
import { HttpError } from "./http.js";

/** Live views one caller may hold open at once: one caller's pages cannot take every view this process follows. */
export const MAX_STREAMS_PER_CALLER = 50;

/**
 * Open event streams per caller (a user's token, or else the address it comes from), each taken
 * before its stream opens, so the one too many is a 503 of its own; the returned function gives it back, once.
 */
export function streamsPerCaller(limit: number) {
  const open = new Map<string, number>();
  return {
    take(request: IncomingMessage, caller: Caller): () => void {
      const key = caller.userId ?? `address:${request.socket.remoteAddress ?? ""}`;
      const count = open.get(key) ?? 0;
      if (count >= limit)
        throw new HttpError(
          503,
          `This caller already follows ${limit} live views here; close some pages (or streams) and try again.`,
        );
      open.set(key, count + 1);
      let given = false;
      return () => {
        if (given) return;
        given = true;
        const left = (open.get(key) ?? 1) - 1;
        if (left > 0) open.set(key, left);
        else open.delete(key);
      };
    },
  };
}
