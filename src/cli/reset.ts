/** `glassbox reset --session ID`: the conversation starts afresh; its history is kept, not shown to the model. */
import { sessionKey, type CommandInput } from "./command.js";
import { UsageError } from "./help.js";
import { glassboxCommand, pasteable } from "./invocation.js";
import { openRecords } from "./records.js";

export default async function reset({ options }: CommandInput): Promise<number> {
  if (!options.session) throw new UsageError(`Name the session to reset: ${glassboxCommand()} reset --session ID`);
  const sessionId = sessionKey(options.session);
  // Without a database there is no session to reset, and none is made to say so.
  const { store } = await openRecords({ write: true });
  let found = false;
  try {
    found = (await store?.resetSession(sessionId)) ?? false;
  } finally {
    await store?.close();
  }
  process.stdout.write(
    found
      ? `Session ${sessionId} starts afresh; its earlier messages are kept but no longer shown to the model.\n`
      : `There is no session ${sessionId}; see ${pasteable("sessions")}.\n`,
  );
  return found ? 0 : 1;
}
