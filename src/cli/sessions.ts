/** `glassbox sessions`: every conversation, newest first, as a table. */
import { formatNumber, formatTable } from "../adapters/terminal/table.js";
import { styleFor } from "../adapters/terminal/style.js";
import type { SessionInfo } from "../agent/contracts.js";
import type { CommandInput } from "./command.js";
import { nothingRecorded, openRecords } from "./records.js";

export default async function sessions({ options }: CommandInput): Promise<number> {
  const records = await openRecords();
  const { store } = records;
  let listed: SessionInfo[] = [];
  try {
    listed = (await store?.listSessions()) ?? [];
  } finally {
    await store?.close();
  }
  if (options.json) process.stdout.write(`${JSON.stringify(listed, null, 2)}\n`);
  else if (listed.length === 0)
    process.stdout.write(
      `${store ? `There are no conversations in ${records.where} yet (${records.setting}).` : nothingRecorded(records)}\n`,
    );
  else process.stdout.write(`${formatSessions(listed, styleFor(process.stdout))}\n`);
  return 0;
}

function formatSessions(listed: SessionInfo[], style = styleFor(process.stdout)): string {
  const rows = listed.map((session) => [
    session.id,
    formatNumber(session.messageCount),
    formatNumber(session.tokens),
    formatNumber(session.runCount),
    session.startedBy ?? "",
    formatMoment(session.lastActivity),
  ]);
  const columns = [
    { header: "SESSION" },
    { header: "MESSAGES", align: "right" as const },
    { header: "TOKENS", align: "right" as const },
    { header: "RUNS", align: "right" as const },
    { header: "STARTED BY" },
    { header: "LAST ACTIVITY (UTC)" },
  ];
  return formatTable(columns, rows, { style });
}

/** An ISO time as "2026-12-01 14:33" (UTC): to the minute is what a list needs. */
function formatMoment(iso: string): string {
  const match = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})/.exec(iso);
  return match ? `${match[1]} ${match[2]}` : iso;
}
