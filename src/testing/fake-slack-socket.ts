// Socket Mode for the fake Slack: apps.connections.open hands out a single-use ws:// URL on the
// fake's own HTTP server; a client that connects with it gets `hello`, then envelopes
// (events_api, interactive) that it acks with their `{envelope_id}`, and `disconnect` on demand.
import { randomUUID } from "node:crypto";
import type { Server } from "node:http";
import { WebSocketServer, type WebSocket } from "ws";

type Args = Record<string, unknown>;
type Reply = Record<string, unknown>;

export interface SocketSendResult {
  acked: boolean;
  envelopeId: string;
  payload?: unknown /* the ack's payload, if any */;
}

export interface FakeSocketMode {
  /** apps.connections.open, which the fake answers only for the app token. */
  openConnection(): Reply;
  /** Sends an envelope on connection #`connection` and resolves when it is acked, or unacked after the ack timeout. */
  sendEnvelope(
    type: "events_api" | "interactive",
    payload: Args,
    connection: number,
    extra?: Args,
  ): Promise<SocketSendResult>;
  connections(): number;
  waitForSocket(count: number, timeoutMs: number): Promise<void>;
  disconnect(connection: number, reason: string): void;
  /** Cuts connection #`connection` without a word, as a lost network does. */
  drop(connection: number): void;
  /** Ends pending acks unacked and every connection. */
  close(): Promise<void>;
}

export function createFakeSocketMode(
  server: Server,
  origin: () => string,
  appId: string,
  ackTimeoutMs: number,
): FakeSocketMode {
  const tickets = new Set<string>(); // apps.connections.open URLs are single use, as in Slack
  const sockets: WebSocket[] = []; // open connections that got `hello`, oldest first
  const socketWaiters = new Set<() => void>();
  const pendingAcks = new Map<string, (acked: boolean, payload?: unknown) => void>(); // by envelope_id
  const wss = new WebSocketServer({ noServer: true });

  server.on("upgrade", (req, socket, head) => {
    const url = new URL(req.url ?? "/", origin());
    const ticket = url.searchParams.get("ticket") ?? "";
    if (url.pathname !== "/link/" || !tickets.delete(ticket)) {
      socket.end("HTTP/1.1 401 Unauthorized\r\nConnection: close\r\n\r\n");
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      ws.on("message", (data) => {
        let message: { envelope_id?: string; payload?: unknown };
        try {
          message = JSON.parse(String(data)) as typeof message;
        } catch {
          return;
        }
        const id = message.envelope_id;
        if (id) pendingAcks.get(id)?.(true, message.payload);
      });
      ws.on("close", () => {
        const index = sockets.indexOf(ws);
        if (index >= 0) sockets.splice(index, 1);
      });
      sockets.push(ws);
      ws.send(
        JSON.stringify({
          type: "hello",
          num_connections: sockets.length,
          connection_info: { app_id: appId },
          debug_info: { host: "applink-fake", build_number: 1, approximate_connection_time: 18060 },
        }),
      );
      for (const notify of [...socketWaiters]) notify();
    });
  });

  return {
    openConnection() {
      const ticket = randomUUID();
      tickets.add(ticket);
      return { ok: true, url: `${origin().replace("http", "ws")}/link/?ticket=${ticket}&app_id=${appId}` };
    },
    sendEnvelope(type, payload, connection, extra = {}) {
      const ws = sockets[connection];
      if (!ws)
        return Promise.reject(
          new Error(`fake-slack: no open socket connection #${connection} (open: ${sockets.length})`),
        );
      const envelopeId = randomUUID();
      return new Promise((resolve) => {
        const timer = setTimeout(() => finish(false), ackTimeoutMs);
        function finish(acked: boolean, ackPayload?: unknown) {
          clearTimeout(timer);
          pendingAcks.delete(envelopeId);
          resolve({ acked, envelopeId, ...(ackPayload !== undefined ? { payload: ackPayload } : {}) });
        }
        pendingAcks.set(envelopeId, finish);
        ws.send(JSON.stringify({ envelope_id: envelopeId, type, payload, accepts_response_payload: false, ...extra }));
      });
    },
    connections: () => sockets.length,
    waitForSocket(count, timeoutMs) {
      if (sockets.length >= count) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const notify = () => {
          if (sockets.length >= count) {
            finish();
            resolve();
          }
        };
        const timer = setTimeout(() => {
          finish();
          reject(new Error(`fake-slack: ${sockets.length}/${count} sockets after ${timeoutMs} ms`));
        }, timeoutMs);
        const finish = () => {
          clearTimeout(timer);
          socketWaiters.delete(notify);
        };
        socketWaiters.add(notify);
      });
    },
    disconnect(connection, reason) {
      sockets[connection]?.send(JSON.stringify({ type: "disconnect", reason, debug_info: { host: "applink-fake" } }));
    },
    drop(connection) {
      sockets[connection]?.terminate();
    },
    async close() {
      for (const finishAck of [...pendingAcks.values()]) finishAck(false);
      for (const ws of [...sockets]) ws.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}
