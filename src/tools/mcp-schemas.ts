/** MCP tools' input schemas, made into schemas the tool registry's strict ajv compiles. */
import { Ajv } from "ajv";
import addFormatsModule from "ajv-formats";
import { isPlainObject } from "./args.js";
import type { JsonSchema } from "./types.js";

// ajv-formats ships CommonJS with a default export that NodeNext sees one level down.
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

export interface SchemaChecker {
  /** A copy the registry can compile, with what was dropped; or why it cannot be used. */
  normalise(schema: unknown): { schema: JsonSchema; dropped: string[] } | { error: string };
}

/** Keywords whose values are subschemas: by name, as a list, or one schema. */
const SCHEMA_MAPS = ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"];
const SCHEMA_LISTS = ["allOf", "anyOf", "oneOf", "prefixItems"];
const SCHEMA_VALUES = [
  "items",
  "additionalItems",
  "additionalProperties",
  "not",
  "if",
  "then",
  "else",
  "contains",
  "propertyNames",
  "unevaluatedItems",
  "unevaluatedProperties",
];

/**
 * MCP schemas follow any JSON Schema draft and may carry keywords and formats the registry's strict
 * ajv rejects. Dropped: "$schema" (the registry validates with its own draft), keywords ajv does not
 * know and formats it has no check for — ajv would not check any of them anyway, and the server still
 * does. Anything else that fails to compile (a bad pattern, strict-mode errors) leaves the tool out.
 */
export function createSchemaChecker(): SchemaChecker {
  // The registry's options (src/tools/registry.ts), so what compiles here registers there.
  const ajv = new Ajv({
    allErrors: true,
    verbose: true,
    useDefaults: true,
    strict: true,
    strictTypes: false,
    allowUnionTypes: true,
  });
  addFormats(ajv);
  const known = (keyword: string) => keyword === "$id" || ajv.RULES.keywords[keyword] === true;

  const clean = (schema: unknown, path: string, dropped: string[]): void => {
    if (!isPlainObject(schema)) return;
    for (const keyword of Object.keys(schema)) {
      const value = schema[keyword];
      if (keyword === "$schema" || !known(keyword)) {
        if (keyword !== "$schema") dropped.push(`${path}/${keyword}`);
        delete schema[keyword];
      } else if (keyword === "format" && typeof value === "string" && !(value in ajv.formats)) {
        dropped.push(`${path}/format "${value}"`);
        delete schema[keyword];
      } else if (SCHEMA_MAPS.includes(keyword) && isPlainObject(value)) {
        for (const [key, child] of Object.entries(value)) clean(child, `${path}/${keyword}/${key}`, dropped);
      } else if ((SCHEMA_LISTS.includes(keyword) || SCHEMA_VALUES.includes(keyword)) && Array.isArray(value)) {
        value.forEach((child, index) => clean(child, `${path}/${keyword}/${index}`, dropped));
      } else if (SCHEMA_VALUES.includes(keyword)) {
        clean(value, `${path}/${keyword}`, dropped);
      }
    }
  };

  return {
    normalise(input) {
      if (!isPlainObject(input)) return { error: "it is not an object" };
      const schema = structuredClone(input);
      schema.type ??= "object";
      if (schema.type !== "object") return { error: `its type is ${JSON.stringify(schema.type)}, not "object"` };
      const dropped: string[] = [];
      clean(schema, "#", dropped);
      try {
        ajv.compile(schema);
      } catch (error) {
        return { error: error instanceof Error ? error.message : String(error) };
      }
      return { schema, dropped };
    },
  };
}
