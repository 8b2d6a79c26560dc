/**
 * The HTTP API's rules that every process serving it shares (the web server, the ingress role):
 * who a request comes from (credentials compared in constant time), which session and user it
 * names, how long its input may be, and a refused decision in one sentence.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type { DecisionOutcome } from "../../agent/approvals.js";
import { configurationError } from "../../agent/errors.js";
import { decidersOf } from "../../store/approval-rules.js";
import type { DecisionRequest, EraseTarget } from "../../store/port-data.js";
import { HttpError } from "./http.js";

const SESSION_ID = /^[A-Za-z0-9_.-]{1,100}$/;
export const MAX_INPUT_CHARS = 20_000;

/** A message's text, trimmed, within MAX_INPUT_CHARS; a longer one is refused in one sentence that says what to do. */
export function inputOf(value: unknown): string {
  const input = typeof value === "string" ? value.trim() : "";
  if (input.length > MAX_INPUT_CHARS) {
    throw new HttpError(
      400,
      `The message is ${input.length.toLocaleString("en-US")} characters long, over the limit of ${MAX_INPUT_CHARS.toLocaleString("en-US")}; shorten it, or send it in parts.`,
    );
  }
  return input;
}

/** Who calls, as its credential says. */
export interface Caller {
  /** Set for a user's token (GLASSBOX_API_USERS): the one user it acts as, whose sessions alone it reads. */
  userId?: string;
}

export interface Credential {
  /** SHA-256 of the token: digests of equal length, compared in constant time. */
  digest: Buffer;
  /** The user a user's token acts as; undefined for the service token. */
  userId?: string;
}

const digestOf = (text: string) => createHash("sha256").update(text).digest();

/** The service token and the users' tokens, each checked once at start. */
export function credentialsOf(apiToken: string | undefined, apiUsers: Record<string, string>): Credential[] {
  const service = apiToken?.trim();
  const credentials: Credential[] = service ? [{ digest: digestOf(service) }] : [];
  for (const [token, user] of Object.entries(apiUsers)) {
    const userId = webUserKey(user);
    if (!userId)
      throw configurationError(
        `GLASSBOX_API_USERS gives a token the user '${user}'; a user id is letters, digits, "-", "_" or "." (up to 100), optionally prefixed with "web:".`,
      );
    // web:api is who the service token acts as when a request names no user: no user's token may be it.
    if (userId === SERVICE_USER)
      throw configurationError(
        `GLASSBOX_API_USERS gives a token the user '${user}', which is reserved for the service token (GLASSBOX_API_TOKEN); give that user another id.`,
      );
    if (token.trim() === service)
      throw configurationError(
        `GLASSBOX_API_USERS gives ${userId} the same token as GLASSBOX_API_TOKEN; give each user a token of their own.`,
      );
    credentials.push({ digest: digestOf(token.trim()), userId });
  }
  return credentials;
}

/**
 * The credential whose token the request bears: from the Authorization header, or for event
 * streams (EventSource cannot send headers) from ?token=. Every credential is compared, so the time
 * taken says nothing about which one (if any) matched.
 */
export function matchingCredential(
  request: IncomingMessage,
  url: URL,
  credentials: Credential[],
): Credential | undefined {
  const header = request.headers.authorization;
  const given = header?.startsWith("Bearer ")
    ? header.slice("Bearer ".length).trim()
    : url.pathname.endsWith("/events")
      ? url.searchParams.get("token")
      : null;
  if (!given) return undefined;
  const digest = digestOf(given);
  let matched: Credential | undefined;
  for (const credential of credentials) if (timingSafeEqual(digest, credential.digest)) matched = credential;
  return matched;
}

/** A web session key: `web:<id>`, given whole or as the bare id. */
export function webSession(value: unknown): string {
  const id = typeof value === "string" ? value.replace(/^web:/, "") : "";
  if (!SESSION_ID.test(id))
    throw new HttpError(
      400,
      'Give "session" as an id of letters, digits, "-", "_" or "." (up to 100), optionally prefixed with "web:".',
    );
  return `web:${id}`;
}

/** Web users are `web:<id>`, so no web caller can pass for a Slack or Discord user; undefined for an id that is not one. */
export function webUserKey(value: unknown): string | undefined {
  const id = typeof value === "string" ? value.replace(/^web:/, "") : "";
  return SESSION_ID.test(id) ? `web:${id}` : undefined;
}

/** Who the service token acts as when a request names no user. */
const SERVICE_USER = "web:api";

function webUser(value: unknown): string {
  if (value === undefined) return SERVICE_USER;
  const key = webUserKey(value);
  if (!key)
    throw new HttpError(
      400,
      'Give "userId" as an id of letters, digits, "-", "_" or "." (up to 100), optionally prefixed with "web:".',
    );
  return key;
}

/** The user a request acts as: a user's token only as its own user (a body naming another is refused). */
export function actingUser(caller: Caller, value: unknown): string {
  if (caller.userId === undefined) return webUser(value);
  if (value !== undefined && webUser(value) !== caller.userId)
    throw new HttpError(403, `This token acts as ${caller.userId}; it cannot act as ${webUser(value)}.`);
  return caller.userId;
}

export function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new HttpError(400, "The path is not validly percent-encoded.");
  }
}

export function refusalOf(
  outcome: Exclude<DecisionOutcome, { kind: "decided" | "counted" }>,
  approvalId: string,
  deployment: Pick<DecisionRequest, "approvers" | "requesterMayApprove">,
): HttpError {
  switch (outcome.kind) {
    case "not_allowed": {
      if (outcome.reason === "approved_already")
        return new HttpError(409, "You approved this already; it needs another person's approval.", {
          outcome: "approved_already",
        });
      const { approvers, requester } = decidersOf(outcome.approval, deployment);
      const asker = outcome.approval.requester;
      const others = approvers.filter((approver) => approver !== asker);
      const who = requester
        ? `${asker}, who asked for this run,${others.length > 0 ? " or an approver" : ""}`
        : others.length > 0
          ? `an approver other than ${asker}, who asked for this run,`
          : `someone other than ${asker}, who asked for this run (and nobody is set to),`;
      return new HttpError(403, `Only ${who} can decide this approval.`, { outcome: outcome.kind });
    }
    case "already_decided":
      return new HttpError(
        409,
        `This approval was already ${outcome.approval.status} by ${outcome.approval.decidedBy ?? "someone"}.`,
        { outcome: outcome.kind },
      );
    case "expired":
      return new HttpError(409, "This approval expired before anyone decided; ask again if it is still needed.", {
        outcome: outcome.kind,
      });
    case "stale":
      return new HttpError(409, "This approval is no longer waiting for a decision: the conversation moved on.", {
        outcome: outcome.kind,
      });
    case "unknown":
      return new HttpError(404, `There is no web approval ${approvalId}.`);
  }
}

/** What POST /api/erase names: exactly one of session (a full key), user, channel or workspace. */
export function eraseTargetOf(body: Record<string, unknown>): EraseTarget {
  const named = (["session", "user", "channel", "workspace"] as const).filter((key) => body[key] !== undefined);
  const [key] = named;
  const id = key === undefined ? undefined : body[key];
  if (named.length !== 1 || typeof id !== "string" || !/^[\w.:@-]{1,200}$/.test(id))
    throw new HttpError(
      400,
      'Name one thing to erase: "session" (a full key such as slack:T1:C1:1718000000.000100), "user", "channel" or "workspace", as text.',
    );
  if (key === "session") return { kind: "session", id };
  if (key === "user") return { kind: "user", id };
  if (!/^[\w.-]{1,100}$/.test(id)) throw new HttpError(400, `A ${key} id is letters, digits, ".", "_" or "-".`);
  return { kind: key === "workspace" ? "workspace" : "segment", id };
}
