/**
 * Names for the trace viewer's sessions and runs: a session titled by its first message and its
 * place (`#support · thread by Ana`), people by their platform display names, runs by their first
 * line. The ids stay beside the names (`startedBy`, `userId`), for the page to show on hover.
 */
import type { RunTrace } from "../../agent/trace.js";
import type { SessionListing } from "../../store/port-data.js";
import { placeNameOf, type NameBook } from "../names.js";

/** How long a title is: a line of the list. */
const TITLE_CHARS = 80;

/** The first line of `text`, cut to a list's line; null for none. */
export function titleOf(text: string | null | undefined): string | null {
  const line = text
    ?.split("\n")
    .find((one) => one.trim() !== "")
    ?.trim();
  if (!line) return null;
  return line.length > TITLE_CHARS ? `${line.slice(0, TITLE_CHARS - 1)}…` : line;
}

export interface SessionNames {
  title: string | null;
  placeName: string;
  /** The display name of who started it, where the platform gives one. */
  userName?: string;
}

export async function sessionNamesOf(
  sessionId: string,
  firstMessage: string | null,
  startedBy: string | null,
  names: NameBook | undefined,
): Promise<SessionNames> {
  const [channel, owner] = await Promise.all([
    names?.channel(sessionId),
    startedBy ? names?.person(sessionId, startedBy) : undefined,
  ]);
  return {
    title: titleOf(firstMessage),
    placeName: placeNameOf(sessionId, channel, owner),
    ...(owner ? { userName: owner } : {}),
  };
}

/** Each listed session with its title, place and the name of who started it. */
export function namedSessions<T extends SessionListing>(
  sessions: T[],
  names: NameBook | undefined,
): Promise<Array<T & SessionNames>> {
  return Promise.all(
    sessions.map(async (session) => ({
      ...session,
      ...(await sessionNamesOf(session.id, session.firstMessage, session.startedBy, names)),
    })),
  );
}

/** A run with its first line as its title and the display name of who asked. */
export async function namedRun<T extends Pick<RunTrace, "sessionId" | "userId" | "input">>(
  run: T,
  names: NameBook | undefined,
): Promise<T & { title: string | null; userName?: string }> {
  const userName = await names?.person(run.sessionId, run.userId);
  return { ...run, title: titleOf(run.input), ...(userName ? { userName } : {}) };
}
