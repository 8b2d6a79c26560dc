/**
 * `glassbox erase --session ID | --user ID | --channel ID | --workspace ID`: removes what the store
 * keeps of a conversation, a person, a channel or a workspace (see EraseTarget), with the run
 * queue's turns of what went where the queue is in the database (PostgreSQL), and prints a receipt:
 * the rows removed per table. Run it while the conversations it reaches are idle: a run still in
 * progress writes what it holds when it next commits.
 */
import { userInfo } from "node:os";
import { eraseWithTurns } from "../conversations/turns.js";
import { storePortOptionsFromEnv, type AnyStorePort } from "../store/index.js";
import type { EraseTarget, ErasureReceipt } from "../store/port-data.js";
import { queueOptionsFromEnv } from "../roles/queue-settings.js";
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
    const receipt = await eraseFrom(store, target, `cli:${whoRuns()}`);
    const rows = Object.entries(receipt.removed).filter(([, count]) => count > 0);
    const replaced = Object.entries(receipt.anonymised).filter(([, count]) => count > 0);
    if (options.json) process.stdout.write(`${JSON.stringify(receipt)}\n`);
    else if (rows.length === 0 && replaced.length === 0)
      process.stdout.write(`Nothing was kept for ${describe(target)}; nothing was removed.\n`);
    else {
      const width = Math.max(...[...rows, ...replaced].map(([table]) => table.length));
      const list = (entries: Array<[string, number]>) => {
        for (const [table, count] of entries)
          process.stdout.write(`  ${table.padEnd(width)}  ${count.toLocaleString("en-US")}\n`);
      };
      process.stdout.write(`Erased ${describe(target)}:\n`);
      list(rows);
      if (replaced.length > 0) {
        process.stdout.write(`Their id was replaced by "erased" where they decided someone else's call:\n`);
        list(replaced);
      }
      process.stdout.write("An audit row records this erasure with its counts, without the id.\n");
    }
    if (store.kind === "sqlite" && !options.json && rows.length > 0)
      process.stdout.write(
        "Turns still waiting in a running glassbox's memory are dropped when they come up (POST /api/erase removes them at once).\n",
      );
    return 0;
  } finally {
    await store.close();
  }
}

/**
 * On PostgreSQL the run queue's table is in the same database, and its turns of what went are
 * removed in the erasure's transaction; on SQLite the queue is the memory of the process that runs
 * the turns, out of this command's reach.
 */
async function eraseFrom(store: AnyStorePort, target: EraseTarget, by: string): Promise<ErasureReceipt> {
  if (store.kind === "sqlite") return store.erase(target, by);
  const { openPostgresRunQueue } = await import("../queue/postgres.js");
  const connectionString = storePortOptionsFromEnv().databaseUrl as string;
  const queue = await openPostgresRunQueue({ ...queueOptionsFromEnv(), connectionString });
  try {
    return await eraseWithTurns(store, queue, target, by);
  } finally {
    await queue.close();
  }
}

function targetOf(options: CommandInput["options"]): EraseTarget {
  const given: EraseTarget[] = [
    ...(options.session ? [{ kind: "session" as const, id: sessionKey(options.session) }] : []),
    ...(options.user ? [{ kind: "user" as const, id: options.user }] : []),
    ...(options.channel ? [{ kind: "segment" as const, id: options.channel }] : []),
    ...(options.workspace ? [{ kind: "workspace" as const, id: options.workspace }] : []),
  ];
  if (given.length !== 1)
    throw new UsageError(
      `Name one thing to erase: ${glassboxCommand()} erase --session ID, --user ID, --channel ID or --workspace ID.`,
    );
  const [target] = given as [EraseTarget];
  if ((target.kind === "segment" || target.kind === "workspace") && !/^[A-Za-z0-9_.-]{1,100}$/.test(target.id))
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
