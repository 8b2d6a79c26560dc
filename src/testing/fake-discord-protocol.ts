// The fake Discord's protocol: Discord's documented numbers (opcodes, intents, close codes, channel,
// interaction, component and message types), the shapes it keeps, its routes and answers, and reading
// a request's body (JSON, or multipart with payload_json as @discordjs/rest sends files).
import type { IncomingMessage } from "node:http";
import type { WebSocket } from "ws";

// ---- Protocol constants (Discord's documented numbers) ----------------------------------------
export const API_VERSION = "10";
export const DISCORD_EPOCH = 1_420_070_400_000n;
export const Op = {
  Dispatch: 0,
  Heartbeat: 1,
  Identify: 2,
  PresenceUpdate: 3,
  VoiceStateUpdate: 4,
  Resume: 6,
  RequestGuildMembers: 8,
  InvalidSession: 9,
  Hello: 10,
  HeartbeatAck: 11,
} as const;
export const Intent = {
  Guilds: 1 << 0,
  GuildMembers: 1 << 1,
  GuildPresences: 1 << 8,
  GuildMessages: 1 << 9,
  DirectMessages: 1 << 12,
  MessageContent: 1 << 15,
} as const;
export const PRIVILEGED_INTENTS = Intent.GuildMembers | Intent.GuildPresences | Intent.MessageContent;
export const Close = {
  UnknownOpcode: 4001,
  DecodeError: 4002,
  NotAuthenticated: 4003,
  AuthenticationFailed: 4004,
  AlreadyAuthenticated: 4005,
  InvalidSeq: 4007,
  InvalidApiVersion: 4012,
  DisallowedIntents: 4014,
  Dropped: 4000,
} as const;
export const ChannelType = {
  GuildText: 0,
  DM: 1,
  AnnouncementThread: 10,
  PublicThread: 11,
  PrivateThread: 12,
} as const;
export const isThread = (type: number) =>
  type === ChannelType.AnnouncementThread || type === ChannelType.PublicThread || type === ChannelType.PrivateThread;
export const InteractionType = { ApplicationCommand: 2, MessageComponent: 3, ModalSubmit: 5 } as const;
export const ComponentType = { ActionRow: 1, TextInput: 4, Label: 18 } as const;
export const Callback = {
  ChannelMessage: 4,
  DeferredChannelMessage: 5,
  DeferredUpdate: 6,
  UpdateMessage: 7,
  Autocomplete: 8,
  Modal: 9,
} as const;
export const MessageFlag = { Ephemeral: 1 << 6, Loading: 1 << 7 } as const;
export const MessageType = { Default: 0, Reply: 19, ChatInputCommand: 20 } as const;
// GATEWAY_MESSAGE_CONTENT_LIMITED: the app (under 100 servers) has the Message Content toggle on.
export const APP_FLAG_MESSAGE_CONTENT_LIMITED = 1 << 19;
// View channel, send messages, embed links, attach files, read history, mention, reactions,
// application commands, threads: what a normally invited bot holds.
export const MEMBER_PERMISSIONS = String(
  (1n << 10n) |
    (1n << 11n) |
    (1n << 14n) |
    (1n << 15n) |
    (1n << 16n) |
    (1n << 6n) |
    (1n << 31n) |
    (1n << 35n) |
    (1n << 38n),
);
// Discord's bucket reset is ~1 s away with plenty left; discord.js only waits when remaining hits 0.
export const RATE_LIMIT = 50;

export type Json = Record<string, unknown>;
export interface ApiUser {
  id: string;
  username: string;
  global_name: string | null;
  discriminator: string;
  avatar: null;
  bot?: boolean;
}
export interface Channel {
  id: string;
  type: number;
  name?: string;
  guildId?: string;
  parentId?: string;
  recipientId?: string;
  ownerId?: string;
  lastMessageId: string | null;
}
export interface StoredMessage {
  id: string;
  channelId: string;
  guildId?: string;
  content: string;
  components: unknown[];
  embeds: unknown[];
  attachments: unknown[];
  authorId: string;
  type: number;
  flags: number;
  ephemeral: boolean;
  timestamp: string;
  editedTimestamp: string | null;
  mentionIds: string[];
  reference?: { message_id: string; channel_id: string; guild_id?: string };
  interaction?: { id: string; type: number; userId: string; name?: string };
  webhookId?: string;
}
export interface Interaction {
  id: string;
  token: string;
  type: number;
  channelId: string;
  guildId?: string;
  userId: string;
  name?: string;
  componentMessageId?: string; // the message whose button was clicked
  callbackType?: number; // set once acknowledged: a second callback is refused, as by Discord
  originalId?: string; // what "@original" means for this interaction's webhook
  followUps: Set<string>;
  modal?: { customId: string; title: string; components: unknown[] }; // what a type 9 callback showed
}
export interface Dispatch {
  op: 0;
  t: string;
  s: number;
  d: unknown;
}
export interface Session {
  id: string;
  intents: number;
  seq: number;
  events: Dispatch[];
  conn: Conn | null;
  ended: boolean;
}
export interface Conn {
  ws: WebSocket;
  session?: Session;
}
export interface Answer {
  status: number;
  body?: unknown;
}
export interface RouteContext {
  params: string[];
  query: Record<string, string>;
  body: Json;
  files: StoredFile[];
}
export interface StoredFile {
  name: string;
  size: number;
  contentType: string;
}
export type Handler = (ctx: RouteContext) => Answer;
export interface Route {
  method: string;
  pattern: RegExp;
  auth: boolean;
  bucket: string;
  handler: Handler;
}

/** A route of the REST API: `:id` matches a snowflake, `:token` any one segment (a token, an emoji, "@original"). */
export const route = (method: string, path: string, handler: Handler, auth = true): Route => ({
  method,
  pattern: new RegExp(`^${path.replaceAll(":id", "(\\d+)").replaceAll(":token", "([^/]+)")}$`),
  auth,
  bucket: `${method} ${path}`,
  handler,
});
export const ok = (body: unknown): Answer => ({ status: 200, body });
export const noContent = (): Answer => ({ status: 204 });
export const error = (status: number, code: number, message: string, errors?: Json): Answer => ({
  status,
  body: { message, code, ...(errors ? { errors } : {}) },
});
export const unauthorized = (): Answer => error(401, 0, "401: Unauthorized");
export const unknownChannel = () => error(404, 10003, "Unknown Channel");
export const unknownMessage = () => error(404, 10008, "Unknown Message");
export const unknownWebhook = () => error(404, 10015, "Unknown Webhook");
export const formError = (field: string, code: string, message: string) =>
  error(400, 50035, "Invalid Form Body", { [field]: { _errors: [{ code, message }] } });
export const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
export const arr = (v: unknown): unknown[] | undefined => (Array.isArray(v) ? v : undefined);
export const byId = (a: { id: string }, b: { id: string }) =>
  BigInt(a.id) < BigInt(b.id) ? -1 : BigInt(a.id) > BigInt(b.id) ? 1 : 0;
export const matchesPath = (path: string, pattern: RegExp | string) =>
  typeof pattern === "string" ? path === pattern : pattern.test(path);
export function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

/** JSON, or multipart with a `payload_json` part and files (what @discordjs/rest sends with attachments). */
export async function parseBody(raw: Buffer, contentType: string): Promise<{ body: unknown; files: StoredFile[] }> {
  if (raw.length === 0) return { body: undefined, files: [] };
  if (!contentType.startsWith("multipart/form-data"))
    return { body: JSON.parse(raw.toString("utf8")) as unknown, files: [] };
  const form = await new Response(raw, { headers: { "content-type": contentType } }).formData();
  let body: unknown;
  const files: StoredFile[] = [];
  for (const [key, value] of form.entries()) {
    if (key === "payload_json" && typeof value === "string") body = JSON.parse(value) as unknown;
    else if (typeof value !== "string") files.push({ name: value.name, size: value.size, contentType: value.type });
  }
  return { body, files };
}
