/**
 * The registry: what a bad definition gets at registration, subsets, closest names, and the typed
 * defineTool helper (its inference is checked by the type-check: `npm run typecheck`).
 */
import { describe, expect, it } from "vitest";
import { defineTool } from "../../../src/tools/define-tool.js";
import { createToolRegistry, ToolDefinitionError } from "../../../src/tools/registry.js";
import type { AnyTool } from "../../../src/tools/types.js";

function tool(name: string, extra: Partial<AnyTool> = {}): AnyTool {
  return {
    name,
    description: `The ${name} tool.`,
    parameters: { type: "object", properties: {} },
    handler: () => null,
    ...extra,
  };
}

/** The ToolDefinitionError that registering these tools throws. */
function registrationError(tools: unknown[]): ToolDefinitionError {
  try {
    createToolRegistry(tools as AnyTool[]);
  } catch (error) {
    expect(error).toBeInstanceOf(ToolDefinitionError);
    expect((error as ToolDefinitionError).code).toBe("invalid_tool_definition");
    return error as ToolDefinitionError;
  }
  throw new Error("registration did not fail");
}

describe("registration", () => {
  it("accepts good definitions and tells the model about them", () => {
    const registry = createToolRegistry([tool("get_order_status"), tool("cancel-order"), tool("A1")]);
    expect(registry.names()).toEqual(["get_order_status", "cancel-order", "A1"]);
    expect(registry.get("cancel-order")?.definition.name).toBe("cancel-order");
    expect(registry.get("nope")).toBeUndefined();
    expect(registry.specs()[0]).toEqual({
      type: "function",
      function: {
        name: "get_order_status",
        description: "The get_order_status tool.",
        parameters: { type: "object", properties: {} },
      },
    });
  });

  it.each([
    ["has a space", "get order"],
    ["has a dot", "orders.get"],
    ["is empty", ""],
    ["is 65 characters", "a".repeat(65)],
  ])("rejects a name that %s", (_label, name) => {
    expect(registrationError([tool(name)]).message).toContain("the name must be 1-64 letters, digits, '_' or '-'");
  });

  it("accepts a name of exactly 64 characters", () => {
    expect(createToolRegistry([tool("a".repeat(64))]).names()).toEqual(["a".repeat(64)]);
  });

  it("rejects a tool that is not an object", () => {
    expect(registrationError([null]).message).toContain("A tool must be an object");
  });

  it("rejects a duplicate name", () => {
    expect(registrationError([tool("lookup"), tool("lookup")]).message).toBe(
      "Tool 'lookup' is registered twice; tool names must be unique.",
    );
  });

  it.each([
    ["missing", undefined],
    ["blank", "  "],
  ])("rejects a %s description, naming the tool", (_label, description) => {
    const error = registrationError([tool("lookup", { description: description as string })]);
    expect(error.message).toContain("Tool 'lookup'");
    expect(error.message).toContain("a description is required");
  });

  it.each([
    ["a string schema", { type: "string" }],
    ["a schema without a type", { properties: {} }],
    ["not an object at all", "object"],
    ["an array", [{ type: "object" }]],
  ])("rejects parameters that are %s", (_label, parameters) => {
    const error = registrationError([tool("lookup", { parameters: parameters as AnyTool["parameters"] })]);
    expect(error.message).toBe(`Tool 'lookup': parameters must be a JSON Schema with type "object".`);
  });

  it("rejects an invalid schema keyword (ajv strict mode), naming the tool and the keyword", () => {
    const parameters = { type: "object", properties: { id: { type: "string", maxLenght: 3 } } };
    const error = registrationError([tool("lookup", { parameters })]);
    expect(error.message).toContain("Tool 'lookup': its parameters schema is invalid");
    expect(error.message).toContain("maxLenght");
  });

  it("rejects a schema keyword with a wrong value", () => {
    const parameters = { type: "object", properties: { id: { type: "strin" } } };
    expect(registrationError([tool("lookup", { parameters })]).message).toContain("its parameters schema is invalid");
  });

  it("rejects a handler that is not a function", () => {
    const error = registrationError([tool("lookup", { handler: "run" as unknown as AnyTool["handler"] })]);
    expect(error.message).toBe("Tool 'lookup': handler must be a function.");
  });

  it.each([0, -5, Number.NaN, Number.POSITIVE_INFINITY, "100"])("rejects timeoutMs %s", (timeoutMs) => {
    const error = registrationError([tool("lookup", { timeoutMs: timeoutMs as number })]);
    expect(error.message).toBe("Tool 'lookup': timeoutMs must be a positive number of milliseconds.");
  });

  it("a typo removes the approval gate: an unknown key is refused, with the key it resembles", () => {
    const typo = registrationError([{ ...tool("cancel_order"), dangrous: true }]);
    expect(typo.message).toBe(
      `Tool 'cancel_order': an unknown key "dangrous" (did you mean "dangerous"?); a tool has name, description, parameters, handler, resume, dangerous, approvers, requesterMayApprove, approvalsNeeded, requesterConfirms, timeoutMs, dependsOn. Nothing was loaded, so no call runs unchecked.`,
    );
    const synonym = registrationError([{ ...tool("cancel_order"), requiresApproval: true, timeout: 5 }]);
    expect(synonym.message).toContain(`unknown keys "requiresApproval" (did you mean "dangerous"?), "timeout"`);
  });

  it.each(["yes", 1, null])("rejects dangerous %s: true, false or a rule of the arguments", (dangerous) => {
    const error = registrationError([tool("cancel_order", { dangerous: dangerous as unknown as boolean })]);
    expect(error.message).toMatch(
      /^Tool 'cancel_order': dangerous must be true, false, or a function of the arguments that says whether a call needs approval; got /,
    );
  });

  it("rejects approvers that are not a list of user ids, and a requesterMayApprove that is not a boolean", () => {
    for (const approvers of ["U1", ["U1", ""], ["U 1"], [7]])
      expect(registrationError([tool("refund", { approvers: approvers as unknown as string[] })]).message).toBe(
        "Tool 'refund': approvers must be a list of at most 100 user ids (as the platform names them), Slack user groups (group:S...) or Discord roles (role:...).",
      );
    expect(registrationError([tool("refund", { requesterMayApprove: "no" as unknown as boolean })]).message).toBe(
      "Tool 'refund': requesterMayApprove must be true or false.",
    );
    for (const approvalsNeeded of [0, 1.5, 6, "2"])
      expect(registrationError([tool("refund", { approvalsNeeded: approvalsNeeded as number })]).message).toBe(
        "Tool 'refund': approvalsNeeded must be a whole number from 1 to 5 (2: two people must approve).",
      );
  });

  it("rejects a requesterConfirms that is not a boolean, or that says the requester may not decide", () => {
    expect(registrationError([tool("note", { requesterConfirms: 1 as unknown as boolean })]).message).toBe(
      "Tool 'note': requesterConfirms must be true or false.",
    );
    expect(
      registrationError([tool("note", { dangerous: true, requesterConfirms: true, requesterMayApprove: false })])
        .message,
    ).toBe(
      "Tool 'note': a call the requester confirms cannot also be one they may not decide; drop requesterMayApprove: false.",
    );
  });

  it("rejects dependsOn that is not a list of names", () => {
    const error = registrationError([tool("lookup", { dependsOn: "other" as unknown as string[] })]);
    expect(error.message).toBe("Tool 'lookup': dependsOn must be a list of tool names.");
  });

  it("rejects a dependsOn cycle, showing it", () => {
    const error = registrationError([
      tool("a", { dependsOn: ["b"] }),
      tool("b", { dependsOn: ["c"] }),
      tool("c", { dependsOn: ["a"] }),
    ]);
    expect(error.message).toBe("Tools depend on each other in a cycle: a -> b -> c -> a.");
  });

  it("rejects a tool that depends on itself", () => {
    expect(registrationError([tool("a", { dependsOn: ["a"] })]).message).toContain("cycle: a -> a");
  });

  it("allows dependsOn naming tools that are not registered, and chains without a cycle", () => {
    const registry = createToolRegistry([
      tool("a", { dependsOn: ["b", "elsewhere"] }),
      tool("b"),
      tool("c", { dependsOn: ["a", "b"] }),
    ]);
    expect(registry.names()).toEqual(["a", "b", "c"]);
  });
});

describe("subset", () => {
  const registry = createToolRegistry([tool("get_order_status"), tool("cancel_order"), tool("search_products")]);

  it("picks the named tools, in the order asked", () => {
    const subset = registry.subset(["search_products", "get_order_status"]);
    expect(subset.names()).toEqual(["search_products", "get_order_status"]);
    expect(subset.specs().map((spec) => spec.function.name)).toEqual(["search_products", "get_order_status"]);
    expect(subset.get("cancel_order")).toBeUndefined();
    // The same compiled tool, not a copy.
    expect(subset.get("get_order_status")).toBe(registry.get("get_order_status"));
  });

  it("rejects an unknown name, listing the registered ones", () => {
    expect(() => registry.subset(["get_order_status", "refund"])).toThrow(ToolDefinitionError);
    expect(() => registry.subset(["refund"])).toThrow(
      "No tool named 'refund' to choose; registered tools: get_order_status, cancel_order, search_products.",
    );
  });
});

describe("closest names", () => {
  const registry = createToolRegistry([tool("get_order_status"), tool("cancel_order"), tool("search_products")]);

  it.each(["getOrderStatus", "get_order_stat", "order_status", "GET-ORDER-STATUS", "get_ordr_status"])(
    "suggests get_order_status for %s",
    (name) => {
      expect(registry.closestNames(name)[0]).toBe("get_order_status");
    },
  );

  it("suggests nothing for an unrelated name", () => {
    expect(registry.closestNames("weather_forecast")).toEqual([]);
  });
});

describe("defineTool", () => {
  it("infers the handler's argument type from the schema and returns the definition unchanged", async () => {
    const getOrder = defineTool({
      name: "get_order_status",
      description: "Look up an order.",
      parameters: {
        type: "object",
        properties: {
          order_id: { type: "string" },
          include_items: { type: "boolean" },
          channel: { enum: ["email", "sms"] },
        },
        required: ["order_id"],
        additionalProperties: false,
      },
      handler: async (args) => {
        // Compile-time checks: these assignments only type-check if inference works.
        const orderId: string = args.order_id;
        const includeItems: boolean | undefined = args.include_items;
        const channel: "email" | "sms" | undefined = args.channel;
        // @ts-expect-error order_id is a string, not a number
        const wrong: number = args.order_id;
        // @ts-expect-error there is no such property in the schema
        void args.orderId;
        return { orderId, includeItems, channel, wrong };
      },
    });

    expect(getOrder.name).toBe("get_order_status");
    // It is an ordinary tool: a registry takes it and its handler runs.
    const registry = createToolRegistry([getOrder]);
    expect(registry.names()).toEqual(["get_order_status"]);
    const context = { signal: new AbortController().signal, sessionId: "s", userId: "u", runId: "r", toolCallId: "c" };
    expect(await getOrder.handler({ order_id: "A1", include_items: true }, context)).toEqual({
      orderId: "A1",
      includeItems: true,
      channel: undefined,
      wrong: "A1",
    });
  });
});
