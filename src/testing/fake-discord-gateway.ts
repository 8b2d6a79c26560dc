// The fake Discord's gateway: WebSocket connections at /gateway and /resume-gateway, HELLO (op 10),
// heartbeats (op 1 → op 11), IDENTIFY (op 2) answered with READY and a GUILD_CREATE per guild,
// RESUME (op 6) replaying what a dropped client missed with the original sequence numbers, and the
// dispatches every other part of the fake sends to the sessions (messages as each session may read them).
import { randomBytes } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { WebSocketServer } from "ws";
import {
  API_VERSION,
  ChannelType,
  Close,
  Intent,
  Op,
  PRIVILEGED_INTENTS,
  str,
  type Conn,
  type Dispatch,
  type Json,
  type Session,
  type StoredMessage,
} from "./fake-discord-protocol.js";
import type { Waiters } from "./fake-discord-server.js";
import type { DiscordState } from "./fake-discord-state.js";

export interface GatewayPayloadRecord {
  op: number;
  d: unknown;
  at: number;
}

export interface GatewayOptions {
  heartbeatInterval: number; // what HELLO announces
  missingIntents: boolean; // close with 4014 when IDENTIFY asks for a privileged intent
  waiters: Waiters; // checked after each payload and IDENTIFY is recorded
}

export interface FakeGateway {
  url(): string; // ws://127.0.0.1:PORT/gateway, what GET /gateway/bot answers
  payloads: GatewayPayloadRecord[]; // everything clients sent (heartbeats included)
  urls: string[]; // the URL (path and query) of every connection, in order
  identifies: Array<{ intents: number }>; // every IDENTIFY's intents, in order
  connections(): number; // open sockets
  /** Closes every socket with `code`; `resumable: false` also ends the sessions (see FakeDiscord.dropConnection). */
  dropConnection(options?: { resumable?: boolean; code?: number }): void;
  dispatch(session: Session, t: string, d: unknown): void;
  /** Every live session (identified, not ended; its socket may be down) that holds one of `intents`. */
  liveSessions(intents?: number): Session[];
  /** MESSAGE_CREATE/UPDATE to every session that gets the message's events (none for an ephemeral one). */
  broadcastMessage(t: "MESSAGE_CREATE" | "MESSAGE_UPDATE", m: StoredMessage): void;
  /** The HTTP server's "upgrade" listener. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  close(): Promise<void>; // terminates every socket
}

export function createGateway(state: DiscordState, options: GatewayOptions): FakeGateway {
  const { botUserId, applicationId, token, user } = state;
  const payloads: GatewayPayloadRecord[] = [];
  const urls: string[] = [];
  const identifies: Array<{ intents: number }> = [];
  const sessions = new Map<string, Session>();
  const conns = new Set<Conn>();
  const wss = new WebSocketServer({ noServer: true });

  const send = (conn: Conn, payload: unknown) => {
    if (conn.ws.readyState === conn.ws.OPEN) conn.ws.send(JSON.stringify(payload));
  };

  function dispatch(session: Session, t: string, d: unknown): void {
    const payload: Dispatch = { op: Op.Dispatch, t, s: ++session.seq, d };
    session.events.push(payload); // kept for a RESUME, which replays from the client's last seq
    if (session.conn) send(session.conn, payload);
  }

  const liveSessions = (intents = 0) =>
    [...sessions.values()].filter((s) => !s.ended && (intents === 0 || (s.intents & intents) !== 0));

  /** MESSAGE_CREATE/UPDATE data for one session: a client without Message Content sees empty content,
   * embeds, attachments and components, except in DMs, when the bot is mentioned, or in its own messages. */
  function gatewayMessage(m: StoredMessage, session: Session): Json {
    const channel = state.channels.get(m.channelId);
    const data: Json = {
      ...state.messageJson(m),
      ...(m.guildId ? { guild_id: m.guildId } : {}),
      channel_type: channel?.type ?? ChannelType.GuildText,
      ...(m.guildId && !m.webhookId ? { member: state.memberJson(m.authorId, m.guildId, false) } : {}),
    };
    const readable =
      (session.intents & Intent.MessageContent) !== 0 ||
      !m.guildId ||
      m.authorId === botUserId ||
      m.mentionIds.includes(botUserId);
    return readable ? data : { ...data, content: "", embeds: [], attachments: [], components: [] };
  }

  function broadcastMessage(t: "MESSAGE_CREATE" | "MESSAGE_UPDATE", m: StoredMessage): void {
    if (m.ephemeral) return; // only the clicking user sees it; the gateway never sends it
    for (const session of liveSessions(m.guildId ? Intent.GuildMessages : Intent.DirectMessages))
      dispatch(session, t, gatewayMessage(m, session));
  }

  function identify(conn: Conn, d: Json): void {
    if (conn.session) return conn.ws.close(Close.AlreadyAuthenticated, "Already authenticated.");
    if (d.token !== token) return conn.ws.close(Close.AuthenticationFailed, "Authentication failed.");
    const intents = typeof d.intents === "number" ? d.intents : 0;
    identifies.push({ intents });
    options.waiters.check();
    if (options.missingIntents && (intents & PRIVILEGED_INTENTS) !== 0)
      return conn.ws.close(Close.DisallowedIntents, "Disallowed intent(s).");
    const session: Session = { id: randomBytes(16).toString("hex"), intents, seq: 0, events: [], conn, ended: false };
    sessions.set(session.id, session);
    conn.session = session;
    const shard = Array.isArray(d.shard) ? d.shard : [0, 1];
    dispatch(session, "READY", {
      v: Number(API_VERSION),
      user: { ...user(botUserId), verified: true, mfa_enabled: false, flags: 0, email: null },
      guilds: [...state.guilds.keys()].map((id) => ({ id, unavailable: true })),
      session_id: session.id,
      session_type: "normal",
      resume_gateway_url: `${state.origin.replace("http", "ws")}/resume-gateway`,
      shard,
      application: { id: applicationId, flags: state.appFlags },
      private_channels: [],
      relationships: [],
      presences: [],
      geo_ordered_rtc_regions: ["fake"],
      guild_join_requests: [],
      user_settings: {},
    });
    // discord.js holds back 'clientReady' until every guild in READY has had its GUILD_CREATE (or
    // waitGuildTimeout, 15 s, passes), so they follow at once. Without the Guilds intent Discord
    // sends none, and discord.js does not wait for them. Note that discord.js's login() resolves on
    // READY, so 'clientReady' comes before or after it: listen for it before calling login().
    if (intents & Intent.Guilds)
      for (const id of state.guilds.keys()) dispatch(session, "GUILD_CREATE", state.guildCreateJson(id));
  }

  function resume(conn: Conn, d: Json): void {
    if (d.token !== token) return conn.ws.close(Close.AuthenticationFailed, "Authentication failed.");
    const session = sessions.get(str(d.session_id) ?? "");
    const seq = typeof d.seq === "number" ? d.seq : 0;
    // An unknown or ended session cannot resume: op 9 with d=false tells the client to identify anew.
    if (!session || session.ended) return send(conn, { op: Op.InvalidSession, d: false, s: null, t: null });
    if (seq > session.seq) return conn.ws.close(Close.InvalidSeq, "Invalid seq.");
    if (session.conn && session.conn !== conn) session.conn.ws.close(Close.Dropped, "Session resumed elsewhere.");
    session.conn = conn;
    conn.session = session;
    for (const event of session.events) if (event.s > seq) send(conn, event); // with their original numbers
    dispatch(session, "RESUMED", {});
  }

  function onGatewayMessage(conn: Conn, data: string): void {
    let payload: { op?: unknown; d?: unknown };
    try {
      payload = JSON.parse(data) as typeof payload;
    } catch {
      return conn.ws.close(Close.DecodeError, "Error while decoding payload.");
    }
    const op = typeof payload.op === "number" ? payload.op : -1;
    payloads.push({ op, d: payload.d, at: Date.now() });
    options.waiters.check();
    const d = (payload.d ?? {}) as Json;
    switch (op) {
      case Op.Heartbeat:
        return send(conn, { op: Op.HeartbeatAck, d: null, s: null, t: null });
      case Op.Identify:
        return identify(conn, d);
      case Op.Resume:
        return resume(conn, d);
      case Op.PresenceUpdate:
      case Op.VoiceStateUpdate:
      case Op.RequestGuildMembers:
        if (!conn.session) conn.ws.close(Close.NotAuthenticated, "Not authenticated.");
        return; // accepted and ignored
      default:
        return conn.ws.close(conn.session ? Close.UnknownOpcode : Close.NotAuthenticated, "Unknown opcode.");
    }
  }

  function handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const url = new URL(req.url ?? "/", state.origin);
    if (url.pathname !== "/gateway" && url.pathname !== "/resume-gateway") {
      socket.end("HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n");
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      const conn: Conn = { ws };
      conns.add(conn);
      urls.push(req.url ?? "");
      ws.on("message", (data: Buffer, isBinary: boolean) => {
        if (isBinary) return ws.close(Close.DecodeError, "Binary (ETF) payloads are not supported by the fake.");
        onGatewayMessage(conn, data.toString("utf8"));
      });
      ws.on("close", (code: number) => {
        conns.delete(conn);
        const session = conn.session;
        if (session?.conn !== conn) return;
        session.conn = null;
        // A client that closes with 1000/1001 ends its session (Discord's rule); other codes, such
        // as discord.js's 4200 "resuming", keep it resumable.
        if (code === 1000 || code === 1001) session.ended = true;
      });
      if (url.searchParams.get("v") !== API_VERSION) return ws.close(Close.InvalidApiVersion, "Invalid API version.");
      send(conn, {
        op: Op.Hello,
        d: { heartbeat_interval: options.heartbeatInterval, _trace: ["fake-discord"] },
        s: null,
        t: null,
      });
    });
  }

  return {
    url: () => `${state.origin.replace("http", "ws")}/gateway`,
    payloads,
    urls,
    identifies,
    dispatch,
    liveSessions,
    broadcastMessage,
    handleUpgrade,
    connections: () => [...conns].filter((c) => c.ws.readyState === c.ws.OPEN).length,
    dropConnection({ resumable = true, code = Close.Dropped } = {}) {
      for (const conn of [...conns]) {
        if (conn.session?.conn === conn) {
          conn.session.conn = null; // from now on its events are kept for the RESUME
          if (!resumable) conn.session.ended = true;
        }
        conn.ws.close(code, "fake-discord: connection dropped");
      }
    },
    async close() {
      for (const conn of conns) conn.ws.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}
