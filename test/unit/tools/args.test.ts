/**
 * Arguments as the model sends them: parsing, repair, safe coercion, defaults and validation
 * messages — driven through the executor with a real registry and a handler that echoes what it got.
 */
import { describe, expect, it } from "vitest";
import { canonicalJson, parseToolArguments } from "../../../src/tools/args.js";
import { executeToolCalls, newToolRunState, type ExecutorOptions, type RunScope } from "../../../src/tools/executor.js";
import { createToolRegistry } from "../../../src/tools/registry.js";
import type { AnyTool, ToolCall, ToolCallRecord } from "../../../src/tools/types.js";

const received: Array<Record<string, unknown>> = [];

const refundTool: AnyTool = {
  name: "request_refund",
  description: "Ask for a refund of an order.",
  parameters: {
    type: "object",
    properties: {
      order_id: { type: "string" },
      reason: { type: "string" },
      quantity: { type: "integer" },
      amount: { type: "number" },
      express: { type: "boolean" },
      channel: { enum: ["email", "sms"] },
      priority: { type: "string", default: "normal" },
    },
    required: ["order_id"],
    additionalProperties: false,
  },
  handler: (args: Record<string, unknown>) => {
    received.push(args);
    return args;
  },
};

const registry = createToolRegistry([refundTool]);
const options: ExecutorOptions = { registry };

function scope(): RunScope {
  return { runId: "run_args", sessionId: "s", userId: "u", state: newToolRunState() };
}

/** Runs one call with the arguments text exactly as given. */
async function callWith(rawArguments: string): Promise<ToolCallRecord> {
  const call: ToolCall = {
    id: "call_1",
    type: "function",
    function: { name: "request_refund", arguments: rawArguments },
  };
  const outcome = await executeToolCalls([call], options, scope());
  expect(outcome.pending).toEqual([]);
  expect(outcome.records).toHaveLength(1);
  return outcome.records[0]!;
}

function errorOf(record: ToolCallRecord): { type: string; message: string } {
  if (record.envelope.status !== "error") throw new Error(`expected an error, got ${record.content}`);
  return record.envelope.error;
}

describe("arguments: parsing and repair", () => {
  it("reads empty arguments as {} (and then reports the missing required property)", async () => {
    expect(parseToolArguments("")).toEqual({ ok: true, value: {}, repairs: [] });
    expect(parseToolArguments("   ")).toEqual({ ok: true, value: {}, repairs: [] });
    expect(parseToolArguments(undefined)).toEqual({ ok: true, value: {}, repairs: [] });

    const record = await callWith("");
    expect(errorOf(record).type).toBe("invalid_arguments");
    expect(errorOf(record).message).toContain("missing required property 'order_id'");
  });

  it("passes well-formed JSON through with no repairs", async () => {
    const record = await callWith('{"order_id": "123", "priority": "high"}');
    expect(record.envelope).toEqual({ status: "success", data: { order_id: "123", priority: "high" } });
    expect(record.repairs).toEqual([]);
    expect(record.rawArguments).toBe('{"order_id": "123", "priority": "high"}');
  });

  it.each([
    ["trailing commas", '{"order_id": "123", "reason": "broken",}', { order_id: "123", reason: "broken" }],
    ["single quotes", "{'order_id': '123', 'reason': 'broken'}", { order_id: "123", reason: "broken" }],
    ["unquoted keys", '{order_id: "123", reason: "broken"}', { order_id: "123", reason: "broken" }],
    [
      "comments",
      '{\n  // the order\n  "order_id": "123", /* why */ "reason": "broken"\n}',
      { order_id: "123", reason: "broken" },
    ],
    [
      "a ```json code fence",
      '```json\n{"order_id": "123", "reason": "broken"}\n```',
      { order_id: "123", reason: "broken" },
    ],
    ["a truncated object", '{"order_id": "123", "reason": "too', { order_id: "123", reason: "too" }],
  ])("repairs %s and records the repair", async (_label, raw, expected) => {
    received.length = 0;
    const record = await callWith(raw);
    expect(record.envelope).toEqual({ status: "success", data: { ...expected, priority: "normal" } });
    expect(received).toEqual([{ ...expected, priority: "normal" }]);
    expect(record.rawArguments).toBe(raw);
    expect(record.repairs).toContain("repaired malformed JSON");
  });

  it.each([
    ["on the same line", 'Sure! Here are the arguments: {"order_id": "123"} hope that helps'],
    [
      "on lines of their own",
      'Here are the arguments:\n{"order_id": "123", "reason": "late"}\nLet me know if you need more.',
    ],
    ["before the object only", 'Arguments:\n{"order_id": "123", "reason": "late"}'],
    ["after the object only", '{"order_id": "123", "reason": "late"}\nThat is all.'],
  ])("cuts chatter around the object %s", async (_label, raw) => {
    const record = await callWith(raw);
    expect(record.envelope.status).toBe("success");
    expect(record.arguments).toMatchObject({ order_id: "123" });
    expect(record.repairs.some((repair) => repair.includes("extracted the JSON object from surrounding text"))).toBe(
      true,
    );
  });

  it("decodes double-encoded JSON (an object inside a JSON string)", async () => {
    const raw = JSON.stringify(JSON.stringify({ order_id: "123", quantity: 2 }));
    const record = await callWith(raw);
    expect(record.envelope).toEqual({ status: "success", data: { order_id: "123", quantity: 2, priority: "normal" } });
    expect(record.repairs).toContain("decoded arguments that were JSON inside a JSON string");
  });

  it.each([
    ["an array", "[1, 2, 3]", "an array"],
    ["a number", "42", "a number"],
    ["a string", '"order 123"', "a string"],
    ["a bare word", "refund", "a string"],
  ])("rejects %s as invalid_arguments, saying what it got", async (_label, raw, got) => {
    received.length = 0;
    const record = await callWith(raw);
    const error = errorOf(record);
    expect(error.type).toBe("invalid_arguments");
    expect(error.message).toContain(`must be a JSON object, got ${got}`);
    expect(error.message).toContain("Send the arguments as one JSON object");
    expect(record.arguments).toBeUndefined();
    expect(received).toEqual([]);
  });

  it("keeps the repairs on a record that fails after repair", async () => {
    const record = await callWith("refund");
    expect(errorOf(record).type).toBe("invalid_arguments");
    expect(record.repairs).toContain("repaired malformed JSON");
  });

  it("writes equal arguments as equal canonical text whatever the key order", () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { f: 1, e: 2 }], c: 3 } })).toBe(
      canonicalJson({ a: { c: 3, d: [1, { e: 2, f: 1 }] }, b: 1 }),
    );
    expect(canonicalJson({ a: [2, 1] })).not.toBe(canonicalJson({ a: [1, 2] }));
  });
});

describe("arguments: safe coercion and defaults", () => {
  it('coerces "3" to 3 for an integer, "true" to true, 42 to "42" for a string, and records each', async () => {
    received.length = 0;
    const record = await callWith('{"order_id": 42, "quantity": "3", "express": "true", "amount": "12.5"}');
    expect(record.envelope).toEqual({
      status: "success",
      data: { order_id: "42", quantity: 3, express: true, amount: 12.5, priority: "normal" },
    });
    expect(received).toEqual([{ order_id: "42", quantity: 3, express: true, amount: 12.5, priority: "normal" }]);
    expect(record.repairs).toEqual(
      expect.arrayContaining([
        'coerced order_id from 42 to "42"',
        'coerced quantity from "3" to 3',
        'coerced express from "true" to true',
        'coerced amount from "12.5" to 12.5',
      ]),
    );
    expect(record.rawArguments).toBe('{"order_id": 42, "quantity": "3", "express": "true", "amount": "12.5"}');
  });

  it("fills defaults and records them", async () => {
    const record = await callWith('{"order_id": "123"}');
    expect(record.arguments).toEqual({ order_id: "123", priority: "normal" });
    expect(record.repairs).toEqual(['filled default priority = "normal"']);
  });

  it("does not fill a default over a value the model sent", async () => {
    const record = await callWith('{"order_id": "123", "priority": "high"}');
    expect(record.arguments).toEqual({ order_id: "123", priority: "high" });
    expect(record.repairs).toEqual([]);
  });

  it.each([
    [
      "abc for an integer",
      '{"order_id": "1", "quantity": "abc"}',
      "property 'quantity' must be integer, got string \"abc\"",
    ],
    [
      "3.5 for an integer",
      '{"order_id": "1", "quantity": "3.5"}',
      "property 'quantity' must be integer, got string \"3.5\"",
    ],
    [
      "an integer beyond 2^53",
      '{"order_id": "1", "quantity": "12345678901234567890"}',
      "property 'quantity' must be integer",
    ],
    [
      "a number JSON cannot carry",
      '{"order_id": "1", "amount": "1e999"}',
      "property 'amount' must be number, got string \"1e999\"",
    ],
    [
      "yes for a boolean",
      '{"order_id": "1", "express": "yes"}',
      "property 'express' must be boolean, got string \"yes\"",
    ],
    ["null for a string", '{"order_id": null}', "property 'order_id' must be string, got null"],
    ["an object for a string", '{"order_id": {"id": 1}}', "property 'order_id' must be string, got object"],
  ])("does not coerce %s", async (_label, raw, expected) => {
    received.length = 0;
    const record = await callWith(raw);
    const error = errorOf(record);
    expect(error.type).toBe("invalid_arguments");
    expect(error.message).toContain(expected);
    expect(received).toEqual([]);
  });
});

describe("arguments: validation errors in words a model can act on", () => {
  const shape = 'Expected arguments: {"order_id": string (required), "reason": string, "quantity": integer';

  it("names a missing required property and shows the expected shape", async () => {
    const error = errorOf(await callWith('{"reason": "late"}'));
    expect(error.type).toBe("invalid_arguments");
    expect(error.message).toContain("missing required property 'order_id'");
    expect(error.message).toContain(shape);
  });

  it("names a wrong type with what was sent", async () => {
    const error = errorOf(await callWith('{"order_id": "1", "quantity": [1]}'));
    expect(error.message).toContain("property 'quantity' must be integer, got array");
    expect(error.message).toContain(shape);
  });

  it("lists the allowed values of an enum, in the error and in the shape", async () => {
    const error = errorOf(await callWith('{"order_id": "1", "channel": "pigeon"}'));
    expect(error.message).toContain('property \'channel\' must be one of "email", "sms"');
    expect(error.message).toContain('"channel": "email" | "sms"');
  });

  it("names an unexpected property", async () => {
    const error = errorOf(await callWith('{"order_id": "1", "orderId": "1"}'));
    expect(error.message).toContain("unexpected property 'orderId'");
    expect(error.message).toContain(shape);
  });

  it("reports every problem at once", async () => {
    const error = errorOf(await callWith('{"quantity": "many", "extra": true}'));
    expect(error.message).toContain("missing required property 'order_id'");
    expect(error.message).toContain("property 'quantity' must be integer");
    expect(error.message).toContain("unexpected property 'extra'");
  });

  it("never mentions undefined values", async () => {
    for (const raw of [
      '{"order_id": null}',
      '{"order_id": "1", "quantity": "abc"}',
      '{"order_id": "1", "express": 3}',
    ]) {
      expect(errorOf(await callWith(raw)).message).not.toContain("undefined");
    }
  });
});
