import type { ToolDefinition } from "../types.js";

/** What `current_time` returns. */
export interface CurrentTime {
  /** The zone's IANA name as Intl resolves it, e.g. "Asia/Shanghai". */
  timezone: string;
  /** ISO 8601 with the zone's offset, e.g. "2026-11-30T10:19:05+08:00". */
  iso: string;
  /** For people, e.g. "Monday, 30 November 2026, 10:19:05". */
  local: string;
  unixMs: number;
  /** e.g. "+08:00", "-05:00", "+00:00". */
  utcOffset: string;
}

/** The `current_time` tool; `now` is the clock, so tests can fix it. */
export function createCurrentTimeTool(now: () => Date = () => new Date()): ToolDefinition<{ timezone?: string }> {
  return {
    name: "current_time",
    description:
      "Returns the current date and time in a time zone (UTC unless one is given), with its UTC offset. " +
      "Use it whenever the answer depends on today's date or the time of day.",
    parameters: {
      type: "object",
      properties: {
        timezone: {
          type: "string",
          description: "An IANA time zone name such as Europe/Paris or Asia/Shanghai. Defaults to UTC.",
        },
      },
      additionalProperties: false,
    },
    handler: async ({ timezone }) => describeTime(now(), timezone ?? "UTC"),
  };
}

export const currentTime = createCurrentTimeTool();

/** The wall-clock time of `date` in `timeZone`; throws for a zone Intl does not know. */
export function describeTime(date: Date, timeZone: string): CurrentTime {
  const numeric = createFormat(timeZone, "en-US", { year: "numeric", month: "2-digit", day: "2-digit" });
  const words = createFormat(timeZone, "en-GB", { weekday: "long", day: "numeric", month: "long", year: "numeric" });
  const n = partsOf(numeric, date);
  const w = partsOf(words, date);

  // The offset is the zone's wall clock read as if it were UTC, minus the real instant.
  const unixMs = date.getTime();
  const wallClockMs = Date.UTC(
    Number(n.year),
    Number(n.month) - 1,
    Number(n.day),
    Number(n.hour),
    Number(n.minute),
    Number(n.second),
  );
  const offsetMinutes = Math.round((wallClockMs - Math.floor(unixMs / 1000) * 1000) / 60_000);
  const utcOffset = formatOffset(offsetMinutes);

  const time = `${n.hour}:${n.minute}:${n.second}`;
  return {
    timezone: numeric.resolvedOptions().timeZone,
    iso: `${n.year}-${n.month}-${n.day}T${time}${utcOffset}`,
    local: `${w.weekday}, ${w.day} ${w.month} ${w.year}, ${time}`,
    unixMs,
    utcOffset,
  };
}

// Building a formatter is slow (about 0.4 ms); one per zone and locale is kept.
const formats = new Map<string, Intl.DateTimeFormat>();

function createFormat(timeZone: string, locale: string, fields: Intl.DateTimeFormatOptions): Intl.DateTimeFormat {
  const key = `${timeZone}|${locale}|${JSON.stringify(fields)}`;
  let format = formats.get(key);
  if (!format) {
    try {
      const time = { hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" } as const;
      format = new Intl.DateTimeFormat(locale, { timeZone, ...fields, ...time });
    } catch {
      throw new Error(`Unknown time zone '${timeZone}'; use an IANA name such as Europe/Paris`);
    }
    if (formats.size < 1_000) formats.set(key, format);
  }
  return format;
}

function partsOf(format: Intl.DateTimeFormat, date: Date): Partial<Record<Intl.DateTimeFormatPartTypes, string>> {
  return Object.fromEntries(format.formatToParts(date).map((part) => [part.type, part.value]));
}

function formatOffset(minutes: number): string {
  const sign = minutes < 0 ? "-" : "+";
  const absolute = Math.abs(minutes);
  const pad = (value: number) => String(value).padStart(2, "0");
  return `${sign}${pad(Math.floor(absolute / 60))}:${pad(absolute % 60)}`;
}
