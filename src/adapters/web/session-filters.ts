/** The trace viewer's session filters, read from the query of GET /api/sessions. */
import { isRating } from "../../agent/feedback.js";
import type { SessionFilters, SessionStatusFilter } from "../../store/port-data.js";
import { HttpError } from "./http.js";

export const MAX_SEARCH_CHARS = 200;
export const DEFAULT_SESSION_LIMIT = 50;
export const MAX_SESSION_LIMIT = 200;
const ADAPTER = /^[a-z]{1,20}$/;
const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
const STATUSES: SessionStatusFilter[] = ["error", "awaiting_approval"];
const DAY = /^\d{4}-\d{2}-\d{2}$/;

/** The filters of GET /api/sessions, from its query; anything out of bounds is one sentence (400). */
export function sessionFiltersOf(params: URLSearchParams): SessionFilters {
  const text = params.get("q")?.trim() ?? "";
  if (text.length > MAX_SEARCH_CHARS)
    throw new HttpError(400, `The search is ${text.length} characters long; the limit is ${MAX_SEARCH_CHARS}.`);
  const adapter = params.get("adapter") || undefined;
  if (adapter !== undefined && !ADAPTER.test(adapter))
    throw new HttpError(400, 'Give "adapter" as the first part of a session id, such as slack, discord, web or cli.');
  const status = params.get("status") || undefined;
  if (status !== undefined && !STATUSES.includes(status as SessionStatusFilter))
    throw new HttpError(400, `Give "status" as one of ${STATUSES.join(", ")}.`);
  const tool = params.get("tool")?.trim() || undefined;
  if (tool !== undefined && !TOOL_NAME.test(tool))
    throw new HttpError(400, 'Give "tool" as a tool name: letters, digits, "_" or "-" (up to 64).');
  const rated = params.get("rated") || undefined;
  if (rated !== undefined && !isRating(rated)) throw new HttpError(400, 'Give "rated" as up or down.');
  const limitText = params.get("limit");
  const limit = limitText === null ? DEFAULT_SESSION_LIMIT : Number(limitText);
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_SESSION_LIMIT)
    throw new HttpError(400, `Give "limit" as a whole number from 1 to ${MAX_SESSION_LIMIT}.`);
  return {
    ...(text ? { text } : {}),
    ...(adapter ? { adapter } : {}),
    ...(status ? { status: status as SessionStatusFilter } : {}),
    ...(tool ? { tool } : {}),
    ...(rated ? { rated } : {}),
    ...momentOf(params.get("from"), "from", "start"),
    ...momentOf(params.get("to"), "to", "end"),
    limit,
  };
}

/** A date (a whole UTC day) or an ISO 8601 moment, as an ISO string to compare stored times with. */
function momentOf(value: string | null, name: "from" | "to", edge: "start" | "end"): Partial<SessionFilters> {
  if (!value) return {};
  const day = DAY.test(value);
  const time = Date.parse(day ? `${value}T00:00:00Z` : value);
  if (value.length > 40 || Number.isNaN(time))
    throw new HttpError(400, `Give "${name}" as a date (2024-04-10) or a moment in ISO 8601 (2024-04-10T08:00:00Z).`);
  const moment = day && edge === "end" ? time + 24 * 60 * 60 * 1000 : time;
  return { [name]: new Date(moment).toISOString() };
}
