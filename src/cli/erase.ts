/**
 * `glassbox erase --session ID | --user ID | --channel ID | --workspace ID`: removes what the store
 * keeps of a conversation, a person, a channel or a workspace (see EraseTarget), and prints a
 * receipt: the rows removed per table. Run it while the conversations it reaches are idle: a run
 * still in progress writes what it holds when it next commits.
 */
import { userInfo } from "node:os";
import type { EraseTarget } from "../store/port-data.js";
import { sessionKey, type CommandInput } from "./command.js";
import { UsageError } from "./help.js";
import { glassboxCommand } from "./invocation.js";
import { openRecords } from "./records.js";

export default async function erase({ options }: CommandInput): Promise<number> {
  const target = targetOf(options);
  const { store } = await openRecords({ write: true });
  if (!store) {
    process.stdout.write("There is no database here, so there is nothing to erase.\n");
    return 1;
  }
  try {
    const receipt = await store.erase(target, `cli:${whoRuns()}`);
    const rows = Object.entries(receipt.removed).filter(([, count]) => count > 0);
    if (options.json) process.stdout.write(`${JSON.stringify(receipt)}\n`);
    else if (rows.length === 0)
      process.stdout.write(`Nothing was kept for ${describe(target)}; nothing was removed.\n`);
    else {
      const width = Math.max(...rows.map(([table]) => table.length));
      process.stdout.write(`Erased ${describe(target)}:\n`);
      for (const [table, count] of rows)
        process.stdout.write(`  ${table.padEnd(width)}  ${count.toLocaleString("en-US")}\n`);
      process.stdout.write("An audit row records this erasure with its counts, without the id.\n");
    }
    return 0;
  } finally {
    await store.close();
  }
}

function targetOf(options: CommandInput["options"]): EraseTarget {
  const given: EraseTarget[] = [
    ...(options.session ? [{ kind: "session" as const, id: sessionKey(options.session) }] : []),
    ...(options.user ? [{ kind: "user" as const, id: options.user }] : []),
    ...(options.channel ? [{ kind: "segment" as const, id: options.channel }] : []),
    ...(options.workspace ? [{ kind: "segment" as const, id: options.workspace }] : []),
  ];
  if (given.length !== 1)
    throw new UsageError(
      `Name one thing to erase: ${glassboxCommand()} erase --session ID, --user ID, --channel ID or --workspace ID.`,
    );
  const [target] = given as [EraseTarget];
  if (target.kind === "segment" && !/^[A-Za-z0-9_.-]{1,100}$/.test(target.id))
    throw new UsageError("A channel or workspace id is letters, digits, '.', '_' or '-' (as C0123ABCD or T0123ABCD).");
  return target;
}

function describe(target: EraseTarget): string {
  if (target.kind === "session") return `conversation ${target.id}`;
  if (target.kind === "user") return `user ${target.id}`;
  return `every conversation of ${target.id}`;
}

/** The account that ran the command, for the audit row. */
function whoRuns(): string {
  try {
    return userInfo().username;
  } catch {
    return "unknown";
  }
}
