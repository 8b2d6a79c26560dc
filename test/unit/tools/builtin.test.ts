import { mkdtempSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { calculator, evaluateExpression } from "../../../src/tools/builtin/calculator.js";
import { createCurrentTimeTool } from "../../../src/tools/builtin/current-time.js";
import { createBuiltinTools, createDemoShopTools } from "../../../src/tools/builtin/index.js";
import { createShopTools, openShopDatabase } from "../../../src/tools/builtin/shop.js";
import { executeToolCalls, newToolRunState } from "../../../src/tools/executor.js";
import { createToolRegistry } from "../../../src/tools/registry.js";
import type { AnyTool, ToolContext, ToolDefinition } from "../../../src/tools/types.js";

const context = (): ToolContext => ({
  signal: new AbortController().signal,
  sessionId: "s",
  userId: "u",
  runId: "r",
  toolCallId: "c",
});

function tool(tools: AnyTool[], name: string): AnyTool {
  const found = tools.find((candidate) => candidate.name === name);
  if (found === undefined) throw new Error(`no tool ${name}`);
  return found;
}

describe("calculator", () => {
  it.each([
    ["1 + 2 * 3", 7],
    ["(1 + 2) * 3", 9],
    ["10 - 4 - 3", 3],
    ["100 / 10 / 5", 2],
    ["7 % 4 * 2", 6],
    ["2 ^ 3 ^ 2", 512],
    ["2 ** 3 ** 2", 512],
    ["(2 ^ 3) ^ 2", 64],
    ["-2 ^ 2", -4],
    ["2 ^ -1", 0.5],
    ["--3", 3],
    ["-(4 - 6) * +2", 4],
    ["3 * -2", -6],
    ["1.5e3 + .5", 1500.5],
    ["2E-2", 0.02],
    ["0.1 + 0.2", 0.3],
    ["  12   *\t2 ", 24],
  ])("%s = %d", (expression, expected) => {
    expect(evaluateExpression(expression)).toBe(expected);
  });

  it("knows its functions and constants, case-insensitively", () => {
    expect(evaluateExpression("sqrt(16) + abs(-3)")).toBe(7);
    expect(evaluateExpression("round(2.5) + floor(2.7) + ceil(2.1)")).toBe(8);
    expect(evaluateExpression("round(3.14159, 2)")).toBe(3.14);
    expect(evaluateExpression("min(4, 2, 8) + max(1, 9, 3, 7)")).toBe(11);
    expect(evaluateExpression("max(5)")).toBe(5);
    expect(evaluateExpression("log(1000)")).toBe(3);
    expect(evaluateExpression("ln(e)")).toBe(1);
    expect(evaluateExpression("exp(0)")).toBe(1);
    expect(evaluateExpression("cos(0) + sin(0) + tan(0)")).toBe(1);
    expect(evaluateExpression("sin(pi / 2)")).toBe(1);
    expect(evaluateExpression("PI")).toBe(Number(Math.PI.toPrecision(15)));
    expect(evaluateExpression("SQRT(9) * E")).toBe(Number((3 * Math.E).toPrecision(15)));
    expect(evaluateExpression("max(1, min(2, 3) * 4, sqrt(sqrt(16)))")).toBe(8);
  });

  it.each([
    ["(1 + 2))", "Unexpected token ')' at position 7"],
    ["1 +", "Unexpected end of expression"],
    ["(1 + 2", "Unexpected end of expression"],
    ["2 3", "Unexpected token '3' at position 2"],
    ["1 $ 2", "Unexpected character '$' at position 2"],
    ["foo(1)", "Unknown function 'foo'"],
    ["x + 1", "Unknown name 'x' at position 0"],
    ["1 / 0", "Division by zero"],
    ["5 % (2 - 2)", "Division by zero"],
    ["10 ^ 400", "is not a finite number"],
    ["sqrt(-1)", "is not a finite number"],
    ["ln(0)", "is not a finite number"],
    ["sqrt 4", "Function 'sqrt' needs its arguments in parentheses"],
    ["sqrt(1, 2)", "Function 'sqrt' takes 1 argument(s), got 2"],
    ["max()", "Function 'max' takes at least 1 argument(s), got 0"],
    ["   ", "Expression is empty"],
  ])("rejects %j with %j", (expression, message) => {
    expect(() => evaluateExpression(expression)).toThrow(message);
  });

  it("rejects an expression longer than 500 characters", () => {
    expect(evaluateExpression(`${"1+".repeat(249)}1`)).toBe(250); // 499 characters
    expect(() => evaluateExpression(`${"1+".repeat(300)}1`)).toThrow(
      "Expression is too long (601 characters; the limit is 500)",
    );
  });

  it("allows 100 levels of parentheses and rejects 101", () => {
    const nested = (depth: number) => `${"(".repeat(depth)}1${")".repeat(depth)}`;
    expect(evaluateExpression(nested(100))).toBe(1);
    expect(() => evaluateExpression(nested(101))).toThrow("nested too deeply");
    expect(evaluateExpression(`abs(${nested(99)})`)).toBe(1);
    expect(() => evaluateExpression(`abs(${nested(100)})`)).toThrow("nested too deeply");
  });

  it.each([
    ["constructor", "Unknown name 'constructor'"],
    ["__proto__", "Unknown name '__proto__'"],
    ["toString", "Unknown name 'toString'"],
    ["constructor('return 1')()", "Unknown function 'constructor'"],
    ["hasOwnProperty(1)", "Unknown function 'hasOwnProperty'"],
    ["process.exit(1)", "Unknown name 'process'"],
    ["globalThis", "Unknown name 'globalThis'"],
    ["Math.PI", "Unknown name 'Math'"],
    ["require('fs')", "Unknown function 'require'"],
    ["eval(1)", "Unknown function 'eval'"],
    ["[1]", "Unexpected character '['"],
    ["a = 1", "Unknown name 'a'"],
  ])("treats %j as unknown, never as code", (expression, message) => {
    expect(() => evaluateExpression(expression)).toThrow(message);
  });

  it("is a tool returning the expression and its result", async () => {
    expect(calculator.name).toBe("calculator");
    await expect(calculator.handler({ expression: "2 * (3 + 4)" }, context())).resolves.toEqual({
      expression: "2 * (3 + 4)",
      result: 14,
    });
    await expect(calculator.handler({ expression: "1/0" }, context())).rejects.toThrow("Division by zero");
  });

  // Bug: Infinity went on as a number and JSON turned it into null, a "result" the model reported.
  describe("rejects non-finite numbers with an error the model can act on", () => {
    async function runCalculator(expression: string) {
      const registry = createToolRegistry([calculator]);
      const scope = { runId: "r", sessionId: "s", userId: "u", state: newToolRunState() };
      const call = {
        id: "call_1",
        type: "function" as const,
        function: { name: "calculator", arguments: JSON.stringify({ expression }) },
      };
      const { records } = await executeToolCalls([call], { registry }, scope);
      const record = records[0];
      if (record === undefined) throw new Error("no record");
      return record;
    }

    it.each([
      ["1e999", "The number '1e999' at position 0"],
      ["1e309 - 1e309", "The number '1e309' at position 0"],
      ["5 % 1e999", "The number '1e999' at position 4"],
      ["min(2, -1e999)", "The number '1e999' at position 8"],
      ["10^400", "The result of '^'"],
      ["9^9^9", "The result of '^'"],
      ["1e308 * 10 / 10", "The result of '*'"],
      ["1e308 + 1e308 - 1e308", "The result of '+'"],
      ["exp(710)", "The result of 'exp'"],
      ["ln(0)", "The result of 'ln'"],
    ])("%j is too large to represent", async (expression, subject) => {
      const record = await runCalculator(expression);
      expect(record.envelope).toEqual({
        status: "error",
        error: {
          type: "execution_error",
          message: expect.stringContaining(
            `${subject} is not a finite number: it is too large to represent (beyond ±1.8e308)`,
          ),
        },
      });
      expect(record.content).not.toContain("null");
    });

    it.each([
      ["sqrt(-1)", "sqrt"],
      ["ln(-2)", "ln"],
      ["log(-0.5) + 1", "log"],
    ])("%j is not a real number", async (expression, name) => {
      const record = await runCalculator(expression);
      expect(record.envelope).toEqual({
        status: "error",
        error: {
          type: "execution_error",
          message: expect.stringContaining(
            `The result of '${name}' is not a finite number: it is undefined in real numbers (NaN)`,
          ),
        },
      });
    });

    it("still rejects 0/0 as a division by zero", async () => {
      expect((await runCalculator("0/0")).envelope).toEqual({
        status: "error",
        error: { type: "execution_error", message: "Division by zero" },
      });
    });

    it("keeps results that fit: the largest double, tiny numbers, and round with many digits", async () => {
      const dataOf = async (expression: string) => {
        const { envelope } = await runCalculator(expression);
        if (envelope.status !== "success") throw new Error(`${expression}: ${envelope.error.message}`);
        return (envelope.data as { result: number }).result;
      };
      expect(await dataOf("1.7976931348623157e308")).toBe(Number.MAX_VALUE);
      expect(await dataOf("2^1023 * 1.5")).toBe(Number((2 ** 1023 * 1.5).toPrecision(15)));
      expect(await dataOf("1e-999")).toBe(0);
      expect(await dataOf("round(1e300, 10)")).toBe(1e300);
      expect(await dataOf("round(1.5, 400)")).toBe(1.5);
      expect(await dataOf("round(1234, -400)")).toBe(0);
      expect(await dataOf("round(1234.5678, -2) + round(2.345, 2)")).toBe(1202.35);
    });
  });
});

describe("current_time", () => {
  const fixed = (iso: string) => createCurrentTimeTool(() => new Date(iso));

  it("defaults to UTC", async () => {
    const result = await fixed("2026-11-30T02:19:05.000Z").handler({}, context());
    expect(result).toEqual({
      timezone: "UTC",
      iso: "2026-11-30T02:19:05+00:00",
      local: "Monday, 30 November 2026, 02:19:05",
      unixMs: Date.parse("2026-11-30T02:19:05.000Z"),
      utcOffset: "+00:00",
    });
  });

  it("gives Asia/Shanghai's wall clock and +08:00", async () => {
    const result = await fixed("2026-11-30T02:19:05.678Z").handler({ timezone: "Asia/Shanghai" }, context());
    expect(result).toEqual({
      timezone: "Asia/Shanghai",
      iso: "2026-11-30T10:19:05+08:00",
      local: "Monday, 30 November 2026, 10:19:05",
      unixMs: Date.parse("2026-11-30T02:19:05.678Z"),
      utcOffset: "+08:00",
    });
  });

  it("crosses the date line and handles midnight and half-hour offsets", async () => {
    const clock = fixed("2026-01-15T23:30:00Z");
    const auckland = (await clock.handler({ timezone: "Pacific/Auckland" }, context())) as {
      iso: string;
      local: string;
    };
    expect(auckland.iso).toBe("2026-01-16T12:30:00+13:00");
    expect(auckland.local).toBe("Friday, 16 January 2026, 12:30:00");
    const kolkata = (await clock.handler({ timezone: "Asia/Kolkata" }, context())) as { iso: string };
    expect(kolkata.iso).toBe("2026-01-16T05:00:00+05:30");
    const stJohns = (await clock.handler({ timezone: "America/St_Johns" }, context())) as { iso: string };
    expect(stJohns.iso).toBe("2026-01-15T20:00:00-03:30");
    const midnight = (await fixed("2026-01-15T05:00:00Z").handler({ timezone: "America/New_York" }, context())) as {
      iso: string;
    };
    expect(midnight.iso).toBe("2026-01-15T00:00:00-05:00");
  });

  it("follows daylight saving time in America/New_York", async () => {
    const january = (await fixed("2026-01-15T12:00:00Z").handler({ timezone: "America/New_York" }, context())) as {
      iso: string;
      utcOffset: string;
    };
    const july = (await fixed("2026-07-15T12:00:00Z").handler({ timezone: "America/New_York" }, context())) as {
      iso: string;
      utcOffset: string;
    };
    expect(january.utcOffset).toBe("-05:00");
    expect(july.utcOffset).toBe("-04:00");
    expect(january.iso).toBe("2026-01-15T07:00:00-05:00");
    expect(july.iso).toBe("2026-07-15T08:00:00-04:00");
    expect(Date.parse(july.iso)).toBe(Date.parse("2026-07-15T12:00:00Z"));
  });

  it("rejects a zone that does not exist", async () => {
    await expect(fixed("2026-01-01T00:00:00Z").handler({ timezone: "Mars/Olympus" }, context())).rejects.toThrow(
      "Unknown time zone 'Mars/Olympus'; use an IANA name such as Europe/Paris",
    );
  });
});

describe("shop", () => {
  let directory: string;
  const open: Database.Database[] = [];
  const openDatabase = (path = join(directory, "nested", "shop.db")) => {
    const db = openShopDatabase(path);
    open.push(db);
    return db;
  };
  const count = (db: Database.Database, table: string) =>
    (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;

  beforeEach(() => {
    directory = mkdtempSync(join(tmpdir(), "glassbox-shop-"));
  });
  afterEach(() => {
    for (const db of open.splice(0)) db.close();
    rmSync(directory, { recursive: true, force: true });
  });

  it("creates the file and seeds it on first open, and only then", () => {
    const path = join(directory, "nested", "shop.db");
    const db = openDatabase(path);
    expect(existsSync(path)).toBe(true);
    expect(db.pragma("journal_mode", { simple: true })).toBe("wal");
    expect(count(db, "customers")).toBe(5);
    expect(count(db, "orders")).toBe(12);
    expect(count(db, "messages")).toBe(0);
    const statuses = db.prepare("SELECT DISTINCT status FROM orders ORDER BY status").pluck().all();
    expect(statuses).toEqual(["cancelled", "delivered", "paid", "pending", "shipped"]);
    db.close();
    open.pop();

    const again = openDatabase(path);
    expect(count(again, "customers")).toBe(5);
    expect(count(again, "orders")).toBe(12);
  });

  it("seeds totals that match the items", () => {
    const db = openDatabase();
    const orders = db.prepare("SELECT items, total_cents FROM orders").all() as {
      items: string;
      total_cents: number;
    }[];
    for (const order of orders) {
      const items = JSON.parse(order.items) as { quantity: number; unit_price_cents: number }[];
      expect(items.reduce((sum, item) => sum + item.quantity * item.unit_price_cents, 0)).toBe(order.total_cents);
    }
  });

  it("reports an order's status", async () => {
    const tools = createShopTools(openDatabase());
    const result = await tool(tools, "get_order_status").handler({ order_id: "20240315001" }, context());
    expect(result).toMatchObject({
      orderId: "20240315001",
      customerId: "U001",
      status: "delivered",
      canBeCancelled: false,
      total: "$104.98",
      trackingNumber: "1Z999AA10123456784",
      createdAt: "2024-03-15T09:12:00.000Z",
      items: [
        { name: "Mechanical keyboard", quantity: 1, unitPrice: "$89.99" },
        { name: "Desk mouse pad", quantity: 1, unitPrice: "$14.99" },
      ],
    });
    await expect(
      tool(tools, "get_order_status").handler({ order_id: " #20240410003" }, context()),
    ).resolves.toMatchObject({
      status: "paid",
      canBeCancelled: true,
    });
  });

  it("says what an order id looks like when it is unknown", async () => {
    const tools = createShopTools(openDatabase());
    await expect(tool(tools, "get_order_status").handler({ order_id: "X1" }, context())).rejects.toThrow(
      "No order with id 'X1'. Order ids look like 20240315001.",
    );
  });

  it("cancels a paid order, and the cancellation survives reopening", async () => {
    const path = join(directory, "shop.db");
    const db = openDatabase(path);
    const tools = createShopTools(db, { now: () => new Date("2026-02-03T04:05:06.000Z") });
    const cancel = tool(tools, "cancel_order");
    expect(cancel.dangerous).toBe(true);
    const result = await cancel.handler({ order_id: "20240410003", reason: "Found it cheaper" }, context());
    expect(result).toMatchObject({
      orderId: "20240410003",
      status: "cancelled",
      cancelReason: "Found it cheaper",
      updatedAt: "2026-02-03T04:05:06.000Z",
      canBeCancelled: false,
    });
    db.close();
    open.pop();

    const reopened = createShopTools(openDatabase(path));
    await expect(
      tool(reopened, "get_order_status").handler({ order_id: "20240410003" }, context()),
    ).resolves.toMatchObject({
      status: "cancelled",
      cancelReason: "Found it cheaper",
      updatedAt: "2026-02-03T04:05:06.000Z",
    });
  });

  it("cancels a pending order", async () => {
    const tools = createShopTools(openDatabase());
    await expect(
      tool(tools, "cancel_order").handler({ order_id: "20240418004", reason: "Changed my mind" }, context()),
    ).resolves.toMatchObject({ status: "cancelled" });
  });

  it.each([
    ["20240402002", "has already shipped (tracking 1Z999AA10123456791), so it can no longer be cancelled"],
    ["20240315001", "was already delivered, so it cannot be cancelled"],
    ["20240420005", "is already cancelled (reason: Customer ordered the wrong model)"],
    ["29990101001", "No order with id '29990101001'"],
  ])("refuses to cancel %s and says why", async (orderId, message) => {
    const db = openDatabase();
    const before = db.prepare("SELECT * FROM orders WHERE id = ?").get(orderId);
    const tools = createShopTools(db);
    await expect(
      tool(tools, "cancel_order").handler({ order_id: orderId, reason: "Too slow" }, context()),
    ).rejects.toThrow(message);
    expect(db.prepare("SELECT * FROM orders WHERE id = ?").get(orderId)).toEqual(before);
  });

  it("sends a message into the outbox", async () => {
    const db = openDatabase();
    const tools = createShopTools(db, { now: () => new Date("2026-05-06T07:08:09.000Z") });
    const send = tool(tools, "send_message");
    expect(send.dangerous).toBe(true);
    const result = await send.handler({ user_id: "U002", content: "Your headphones are on their way." }, context());
    expect(result).toEqual({ messageId: 1, userId: "U002", sentAt: "2026-05-06T07:08:09.000Z" });
    expect(db.prepare("SELECT id, user_id, content, sent_at FROM messages").all()).toEqual([
      { id: 1, user_id: "U002", content: "Your headphones are on their way.", sent_at: "2026-05-06T07:08:09.000Z" },
    ]);
  });

  it("refuses to message an unknown customer or with an empty or oversized message", async () => {
    const db = openDatabase();
    const send = tool(createShopTools(db), "send_message");
    await expect(send.handler({ user_id: "U999", content: "Hello" }, context())).rejects.toThrow(
      "No customer with id 'U999'. Customer ids look like U001.",
    );
    await expect(send.handler({ user_id: "U001", content: "   " }, context())).rejects.toThrow("The message is empty.");
    await expect(send.handler({ user_id: "U001", content: "x".repeat(2001) }, context())).rejects.toThrow(
      "the limit is 2000",
    );
    expect(count(db, "messages")).toBe(0);
  });

  it("describes its arguments with strict JSON Schemas", () => {
    const tools = createShopTools(openDatabase());
    for (const shopTool of tools) {
      expect(shopTool.parameters).toMatchObject({ type: "object", additionalProperties: false });
    }
    expect(tool(tools, "send_message").parameters).toMatchObject({
      required: ["user_id", "content"],
      properties: { content: { type: "string", minLength: 1, maxLength: 2000 } },
    });
    expect(tool(tools, "cancel_order").parameters).toMatchObject({ required: ["order_id", "reason"] });
    expect(tool(tools, "get_order_status").dangerous).toBeUndefined();
  });
});

describe("createBuiltinTools", () => {
  it("returns current_time and calculator, and opens no shop database", async () => {
    const tools = createBuiltinTools({ now: () => new Date("2026-11-30T02:19:05Z") });
    expect(tools.map((candidate) => candidate.name)).toEqual(["current_time", "calculator"]);
    await expect(tool(tools, "current_time").handler({ timezone: "Asia/Shanghai" }, context())).resolves.toMatchObject({
      iso: "2026-11-30T10:19:05+08:00",
    });
    expect(createBuiltinTools({ include: ["calculator"] }).map((candidate) => candidate.name)).toEqual(["calculator"]);
  });

  it("keeps the demo shop apart: createDemoShopTools opens and seeds its database on the first call, not when the tools are listed", async () => {
    const directory = mkdtempSync(join(tmpdir(), "glassbox-builtin-"));
    try {
      const tools = createDemoShopTools({ shopDatabasePath: join(directory, "shop.db") });
      expect(tools.map((candidate) => candidate.name)).toEqual(["get_order_status", "cancel_order", "send_message"]);
      expect(existsSync(join(directory, "shop.db"))).toBe(false);
      const lookup = tools[0] as ToolDefinition<{ order_id: string }>;
      expect(await lookup.handler({ order_id: "20240315001" }, context())).toMatchObject({ orderId: "20240315001" });
      expect(existsSync(join(directory, "shop.db"))).toBe(true);
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });
});
