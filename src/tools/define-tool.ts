import type { FromSchema, JSONSchema } from "json-schema-to-ts";
import type { ToolDefinition } from "./types.js";

/**
 * Identity at run time; at compile time it infers the handler's argument type from the schema,
 * so `handler: async ({ order_id }) => ...` knows `order_id` is a string.
 * Write the schema inline (or `as const`) so its literal types survive.
 */
export function defineTool<const Schema extends JSONSchema & { type: "object" }>(
  tool: Omit<ToolDefinition<FromSchema<Schema>>, "parameters"> & { parameters: Schema },
): ToolDefinition<FromSchema<Schema>> {
  return tool as ToolDefinition<FromSchema<Schema>>;
}
