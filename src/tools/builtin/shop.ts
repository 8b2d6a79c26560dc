import { mkdirSync, readFileSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";
import { switchToWal } from "../../sqlite-wal.js";
import type { AnyTool, ToolDefinition } from "../types.js";

/**
 * A demo shop over a real SQLite file: look up an order, cancel it, message a customer.
 * The schema and the demo rows live in data/shop-seed.sql.
 */

// Source (src/tools/builtin) and build (dist/tools/builtin) are both three levels below the root.
const SEED_FILE = new URL("../../../data/shop-seed.sql", import.meta.url);
const MAX_MESSAGE_LENGTH = 2000;
const CANCELLABLE = ["pending", "paid"];

/** Where the shop lives unless told otherwise: `GLASSBOX_SHOP_DB`, else data/shop.db. */
export function defaultShopDatabasePath(): string {
  return process.env.GLASSBOX_SHOP_DB ?? "data/shop.db";
}

/** Opens (creating and seeding on first use) the shop database at `path`. */
export function openShopDatabase(path: string): Database.Database {
  if (path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
  const db = new Database(path);
  db.pragma("busy_timeout = 5000"); // first: switching to WAL may wait for another process
  // Two workers or processes opening a new file at once: one may find it busy, and tries again.
  switchToWal(db);
  db.pragma("foreign_keys = ON");
  // IMMEDIATE takes the write lock first, so two processes opening a new file seed it once.
  db.transaction(() => {
    const hasSchema = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'orders'").get();
    if (hasSchema === undefined) db.exec(readFileSync(SEED_FILE, "utf8"));
  }).immediate();
  return db;
}

interface OrderRow {
  id: string;
  customer_id: string;
  status: string;
  items: string;
  total_cents: number;
  created_at: string;
  tracking_number: string | null;
  cancel_reason: string | null;
  updated_at: string;
}

interface OrderItem {
  sku: string;
  name: string;
  quantity: number;
  unit_price_cents: number;
}

function shopStatements(db: Database.Database) {
  return {
    selectOrder: db.prepare<[string], OrderRow>("SELECT * FROM orders WHERE id = ?"),
    cancelOrder: db.prepare<[string, string, string], OrderRow>(
      `UPDATE orders SET status = 'cancelled', cancel_reason = ?, updated_at = ?
       WHERE id = ? AND status IN ('pending', 'paid') RETURNING *`,
    ),
    selectCustomer: db.prepare<[string], { id: string }>("SELECT id FROM customers WHERE id = ?"),
    insertMessage: db.prepare<[string, string, string]>(
      "INSERT INTO messages (user_id, content, sent_at) VALUES (?, ?, ?)",
    ),
  };
}

/**
 * The shop's tools over `db`, or over the database `db()` opens on the first call (so listing the
 * tools, as `glassbox tools` does, creates no file); `now` is the clock used for updated_at and sent_at.
 */
export function createShopTools(
  db: Database.Database | (() => Database.Database),
  options: { now?: () => Date } = {},
): AnyTool[] {
  const now = options.now ?? (() => new Date());
  let statements: ReturnType<typeof shopStatements> | undefined;
  const sql = () => (statements ??= shopStatements(typeof db === "function" ? db() : db));

  function findOrder(orderId: string): OrderRow {
    const order = sql().selectOrder.get(normaliseOrderId(orderId));
    if (order === undefined) throw new Error(`No order with id '${orderId}'. Order ids look like 20240315001.`);
    return order;
  }

  const orderIdSchema = { type: "string", description: "The order id, e.g. 20240315001", minLength: 1, maxLength: 32 };

  const getOrderStatus: ToolDefinition<{ order_id: string }> = {
    name: "get_order_status",
    description:
      "Looks up an order: its status (pending, paid, shipped, delivered or cancelled), items, total, " +
      "tracking number and dates, and whether it can still be cancelled.",
    parameters: {
      type: "object",
      properties: { order_id: orderIdSchema },
      required: ["order_id"],
      additionalProperties: false,
    },
    handler: async ({ order_id }) => describeOrder(findOrder(order_id)),
  };

  const cancel: ToolDefinition<{ order_id: string; reason: string }> = {
    name: "cancel_order",
    description:
      "Cancels an order that has not shipped yet (status pending or paid) and records why. " +
      "Shipped, delivered and already cancelled orders cannot be cancelled. Needs a person's approval.",
    parameters: {
      type: "object",
      properties: {
        order_id: orderIdSchema,
        reason: {
          type: "string",
          description: "Why the order is cancelled, in the customer's words",
          minLength: 1,
          maxLength: 500,
        },
      },
      required: ["order_id", "reason"],
      additionalProperties: false,
    },
    dangerous: true,
    handler: async ({ order_id, reason }) => {
      if (reason.trim() === "") throw new Error("A reason is required to cancel an order.");
      // One conditional UPDATE, so a concurrent change can never be overwritten.
      const cancelled = sql().cancelOrder.get(reason.trim(), now().toISOString(), normaliseOrderId(order_id));
      if (cancelled !== undefined) return describeOrder(cancelled);
      throw new Error(explainWhyNotCancellable(findOrder(order_id)));
    },
  };

  const sendMessage: ToolDefinition<{ user_id: string; content: string }> = {
    name: "send_message",
    description: "Sends a message to a customer of the shop (it goes to the shop's outbox). Needs a person's approval.",
    parameters: {
      type: "object",
      properties: {
        user_id: { type: "string", description: "The customer id, e.g. U001", minLength: 1, maxLength: 32 },
        content: { type: "string", description: "The message text", minLength: 1, maxLength: MAX_MESSAGE_LENGTH },
      },
      required: ["user_id", "content"],
      additionalProperties: false,
    },
    dangerous: true,
    handler: async ({ user_id, content }) => {
      const userId = user_id.trim();
      if (sql().selectCustomer.get(userId) === undefined) {
        throw new Error(`No customer with id '${user_id}'. Customer ids look like U001.`);
      }
      if (content.trim() === "") throw new Error("The message is empty.");
      if (content.length > MAX_MESSAGE_LENGTH) {
        throw new Error(`The message is ${content.length} characters long; the limit is ${MAX_MESSAGE_LENGTH}.`);
      }
      const sentAt = now().toISOString();
      const { lastInsertRowid } = sql().insertMessage.run(userId, content, sentAt);
      return { messageId: Number(lastInsertRowid), userId, sentAt };
    },
  };

  return [getOrderStatus, cancel, sendMessage];
}

/** Accepts " #20240315001 " as well as "20240315001". */
function normaliseOrderId(orderId: string): string {
  return orderId.trim().replace(/^#/, "");
}

function describeOrder(order: OrderRow) {
  const items = JSON.parse(order.items) as OrderItem[];
  return {
    orderId: order.id,
    customerId: order.customer_id,
    status: order.status,
    canBeCancelled: CANCELLABLE.includes(order.status),
    items: items.map((item) => ({
      name: item.name,
      quantity: item.quantity,
      unitPrice: formatMoney(item.unit_price_cents),
    })),
    total: formatMoney(order.total_cents),
    trackingNumber: order.tracking_number,
    cancelReason: order.cancel_reason,
    createdAt: order.created_at,
    updatedAt: order.updated_at,
  };
}

function explainWhyNotCancellable(order: OrderRow): string {
  switch (order.status) {
    case "shipped":
      return `Order ${order.id} has already shipped (tracking ${order.tracking_number ?? "unknown"}), so it can no longer be cancelled; the customer can return it once it arrives.`;
    case "delivered":
      return `Order ${order.id} was already delivered, so it cannot be cancelled; the customer can request a return instead.`;
    case "cancelled":
      return `Order ${order.id} is already cancelled (reason: ${order.cancel_reason ?? "none recorded"}).`;
    default:
      return `Order ${order.id} has status '${order.status}' and cannot be cancelled; only pending or paid orders can.`;
  }
}

const money = new Intl.NumberFormat("en-US", { style: "currency", currency: "USD" });
function formatMoney(cents: number): string {
  return money.format(cents / 100);
}
