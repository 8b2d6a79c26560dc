/** What every command module gets, and the small rules commands share. */
import { randomUUID } from "node:crypto";
import type { ApproveMode } from "../adapters/terminal.js";
import { UsageError } from "./help.js";

export interface CommandInput {
  positionals: string[];
  options: {
    tools: string[];
    session?: string;
    /** erase: a person, a channel or a workspace, as the store keeps their ids. */
    user?: string;
    channel?: string;
    workspace?: string;
    "max-steps"?: string;
    approve: string;
    json: boolean;
    /** replay and eval: the model to replay on, and a system prompt file. */
    model?: string;
    "system-prompt"?: string;
    /** eval: the rated runs to take (down, up or all). */
    feedback?: string;
    /** eval: eval case files or folders of them. */
    cases: string[];
    /** init: where to write, and the answers given as flags. */
    dir?: string;
    platform?: string;
    "slack-mode"?: string;
    "public-url"?: string;
    "model-url"?: string;
    shape?: string;
    force: boolean;
  };
}

/** A command module's default export; resolves to the exit code. */
export type Command = (input: CommandInput) => Promise<number>;

/** Full session keys (slack:..., discord:...) pass through; a bare ID is a command-line session. */
export function sessionKey(id: string): string {
  return id.includes(":") ? id : `cli:${id}`;
}

/** The session of --session, or a new one: each run without it is a conversation of its own. */
export function sessionOf(options: CommandInput["options"]): string {
  return sessionKey(options.session ?? randomUUID());
}

export function approveModeOf(value: string): ApproveMode {
  if (value !== "yes" && value !== "no" && value !== "ask") throw new UsageError("--approve takes yes, no or ask.");
  return value;
}
