/**
 * `glassbox init`: asks (or takes flags for) the chat platform, the model server and the deployment
 * shape, then writes `.env` (secrets glassbox makes itself, such as the API token, filled in; those a
 * person brings, such as Slack's tokens, left for them to paste), for Slack the app's manifest with
 * the right URLs and scopes, and says which compose profile to start. It never replaces a file
 * without asking (on a terminal) or --force.
 */
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import type { CommandInput } from "./command.js";
import { UsageError } from "./help.js";

const CHOICES = {
  platform: ["slack", "discord", "web"],
  "slack-mode": ["socket", "http"],
  shape: ["single", "scale"],
} as const;

interface Answers {
  platform: (typeof CHOICES.platform)[number];
  slackMode: (typeof CHOICES)["slack-mode"][number];
  publicUrl?: string;
  modelUrl: string;
  model: string;
  shape: (typeof CHOICES.shape)[number];
}

const MANIFEST_TEMPLATE = new URL("../../slack-app-manifest.yaml", import.meta.url);

export default async function init({ options }: CommandInput): Promise<number> {
  const folder = resolve(options.dir ?? ".");
  const terminal = Boolean(process.stdin.isTTY && process.stdout.isTTY);
  const lines = terminal ? createInterface({ input: process.stdin, output: process.stdout }) : undefined;
  const typed = lines?.[Symbol.asyncIterator]();
  /** A flag's value, else the person's answer on a terminal, else the default. */
  const ask = async (question: string, flag: string | undefined, fallback: string): Promise<string> => {
    if (flag !== undefined || !typed) return flag ?? fallback;
    process.stdout.write(`${question} [${fallback}] `);
    const next = await typed.next();
    return (next.done ? "" : (next.value as string)).trim() || fallback;
  };
  try {
    const platform = oneOf(
      "platform",
      await ask("Chat platform: slack, discord or web (the page only)?", options.platform, "slack"),
    );
    const slackMode =
      platform === "slack"
        ? oneOf("slack-mode", await ask("Slack: socket (no public URL) or http?", options["slack-mode"], "socket"))
        : "socket";
    const publicUrl =
      platform === "slack" && slackMode === "http"
        ? urlOf(await ask("The public https:// address Slack will call?", options["public-url"], ""), "--public-url")
        : undefined;
    const modelUrl = urlOf(
      await ask("Model server (any OpenAI-compatible URL)?", options["model-url"], "https://api.openai.com/v1"),
      "--model-url",
    );
    const model = await ask("Model name?", options.model, "gpt-4o-mini");
    const shape = oneOf(
      "shape",
      await ask("Shape: single (SQLite) or scale (PostgreSQL, ingress, workers)?", options.shape, "single"),
    );
    const answers: Answers = { platform, slackMode, publicUrl, modelUrl, model, shape };

    const files: Array<[string, string]> = [[".env", envFile(answers)]];
    if (platform === "slack") files.push(["slack-manifest.yaml", manifestFor(answers)]);
    for (const [name, text] of files) {
      const path = join(folder, name);
      if (existsSync(path) && !options.force) {
        const answer = typed ? await ask(`${name} exists; replace it? (y/N)`, undefined, "n") : "n";
        if (!/^y(es)?$/i.test(answer)) {
          if (!typed)
            throw new UsageError(`${path} exists already; move it away, or run glassbox init --force to replace it.`);
          process.stdout.write(`kept ${name} as it was\n`);
          continue;
        }
      }
      writeFileSync(path, text, { mode: name === ".env" ? 0o600 : 0o644 });
      process.stdout.write(`wrote ${path}\n`);
    }
    process.stdout.write(`${nextSteps(answers)}\n`);
    return 0;
  } finally {
    lines?.close();
  }
}

function oneOf<K extends keyof typeof CHOICES>(flag: K, value: string): (typeof CHOICES)[K][number] {
  const choices: readonly string[] = CHOICES[flag];
  if (!choices.includes(value)) throw new UsageError(`--${flag} takes ${choices.join(", ")}; '${value}' is not one.`);
  return value as (typeof CHOICES)[K][number];
}

function urlOf(value: string, flag: string): string {
  if (!URL.canParse(value) || !/^https?:$/.test(new URL(value).protocol))
    throw new UsageError(`${flag} takes an http:// or https:// address; '${value.slice(0, 100)}' is not one.`);
  return value.replace(/\/+$/, "");
}

const secret = (bytes: number) => randomBytes(bytes).toString("hex");

/** .env: what was chosen, what glassbox made, and empty lines for the secrets a person pastes. */
function envFile(answers: Answers): string {
  const lines = [
    "# Written by glassbox init; docs/configuration.md explains every setting glassbox reads.",
    "",
    "# ---- Model",
    `OPENAI_BASE_URL=${answers.modelUrl}`,
    `LLM_MODEL=${answers.model}`,
    "# The server's key (local servers usually need none):",
    "OPENAI_API_KEY=",
  ];
  if (answers.platform === "slack") {
    lines.push("", "# ---- Slack: create the app from slack-manifest.yaml, install it, then paste its tokens");
    lines.push("SLACK_BOT_TOKEN=");
    if (answers.slackMode === "socket") lines.push("SLACK_APP_TOKEN=");
    else lines.push("SLACK_SIGNING_SECRET=");
  }
  if (answers.platform === "discord")
    lines.push("", "# ---- Discord: the bot's token (docs/discord.md)", "DISCORD_TOKEN=");
  lines.push(
    "",
    "# ---- Web page and HTTP API: a container listens on every address, so the API needs this token",
    `GLASSBOX_API_TOKEN=${secret(32)}`,
    "",
    "# ---- Docker Compose: the profile `docker compose up` starts",
    `COMPOSE_PROFILES=${answers.shape}`,
  );
  if (answers.shape === "scale") lines.push(`POSTGRES_PASSWORD=${secret(24)}`);
  if (answers.slackMode === "http")
    lines.push("# Slack calls port 3000: publish it on every address", "PUBLISH_SLACK=0.0.0.0:3000");
  return `${lines.join("\n")}\n`;
}

/** The Slack app's manifest: the project's, with HTTP mode's request URLs when it is chosen. */
function manifestFor(answers: Answers): string {
  const template = readFileSync(MANIFEST_TEMPLATE, "utf8");
  if (answers.slackMode === "socket") return template;
  const events = `${answers.publicUrl}/slack/events`;
  return template
    .replace("  event_subscriptions:\n", `  event_subscriptions:\n    request_url: ${events}\n`)
    .replace(
      "    is_enabled: true # Approve / Deny buttons\n",
      `    is_enabled: true # Approve / Deny buttons\n    request_url: ${events}\n`,
    )
    .replace(/ {2}# Socket Mode needs no public URL\.[^\n]*\n[^\n]*\n/, "")
    .replace("  socket_mode_enabled: true", "  socket_mode_enabled: false");
}

function nextSteps(answers: Answers): string {
  const steps = ["Next:"];
  steps.push(
    `- paste the secrets left empty in .env${answers.platform === "slack" ? " (Slack's come once the app is installed)" : ""}`,
  );
  if (answers.platform === "slack")
    steps.push(
      "- at https://api.slack.com/apps: Create New App -> From a manifest, paste slack-manifest.yaml, install it",
    );
  steps.push(`- docker compose up -d --build   (the ${answers.shape} profile, from COMPOSE_PROFILES in .env)`);
  steps.push("- docker compose ps shows it healthy; docs/deploying.md has the rest");
  return steps.join("\n");
}
