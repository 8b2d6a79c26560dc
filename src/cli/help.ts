/** What `glassbox --help` prints, and the error for a command used wrongly. Loads nothing else. */

export const HELP = `Usage:
  glassbox run "<task>" [--tools module.mjs]... [--session ID] [--max-steps N] [--approve yes|no|ask] [--json]
  glassbox chat [--tools module.mjs]... [--session ID]
  glassbox tools [--tools module.mjs]... [--json]
  glassbox sessions [--json]
  glassbox reset --session ID
  glassbox erase --session ID | --user ID | --channel ID | --workspace ID [--json]
  glassbox trace <session-or-run-id> [--json]
  glassbox pipeline <name> "<input>" [--session ID] [--approve yes|no|ask] [--json]
  glassbox usage [--json]
  glassbox replay <run-id> [--model M] [--system-prompt FILE] [--tools module.mjs]... [--json]
  glassbox eval <run-id>... | --feedback down|up|all | --cases PATH... [--model M] [--system-prompt FILE]
                [--tools module.mjs]... [--json]
  glassbox init [--platform slack|discord|web] [--slack-mode socket|http] [--public-url URL]
                [--model-url URL] [--model M] [--shape single|scale] [--dir DIR] [--force]

Each run, chat or pipeline without --session starts a new conversation; its session id is shown
on the terminal (and is sessionId in --json). Pass --session ID to continue one: a bare ID means
cli:ID, full keys such as slack:T1:C1:1718000000.000100 work too. Runs started here are recorded
as user "cli". glassbox trace <run-id> shows a run step by step.

erase removes a conversation, a person (as runs record them: U123, or T1:U123 where many Slack
workspaces installed the app), every conversation of a channel, or of a workspace (with its Slack
installation), from the database and its queued turns, and prints what it removed per table; an
audit row keeps the counts, never the id.

init asks for the platform, the model server and the shape (or takes them as flags), and writes .env
(with a new API token), Slack's app manifest (slack-manifest.yaml) and the compose profile to start;
it replaces no file without asking, or --force.

replay re-runs a recorded run from its exact recorded context on another model or prompt; its tools
are answered from the recording and never run. eval replays several (or the eval case files
--cases names, files or folders) and exits 1 when any of them now calls different tools; each row
links to the recorded run and its replay side by side in the trace viewer.

The model comes from OPENAI_BASE_URL, OPENAI_API_KEY and LLM_MODEL; conversations are kept in
GLASSBOX_DB (data/glassbox.db by default). See docs/configuration.md for the rest.`;

/** A command used wrongly: its sentence, then the usage. */
export class UsageError extends Error {
  readonly code = "usage";
}
