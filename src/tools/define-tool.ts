import type { FromSchema, JSONSchema } from "json-schema-to-ts";
import type { ToolDefinition } from "./types.js";

/**
 * Identity at run time; at compile time it infers the handler's argument type from the schema,
 * so `handler: async ({ order_id }) => ...` knows `order_id` is a string.
 * Write the schema inline (or `as const`) so its literal types survive.
 */
// Args is a defaulted type parameter, not FromSchema<Schema> written into the parameter type:
// computed during inference, FromSchema exceeds TypeScript's instantiation depth ("excessively
// deep", TS2589) even for a one-property schema. NoInfer keeps a handler's own annotation from
// replacing the schema's type.
export function defineTool<const Schema extends JSONSchema & { type: "object" }, Args = FromSchema<Schema>>(
  tool: Omit<ToolDefinition<NoInfer<Args>>, "parameters"> & { parameters: Schema },
): ToolDefinition<Args> {
  return tool as ToolDefinition<Args>;
}
