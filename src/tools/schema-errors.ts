/**
 * A tool's parameters schema that ajv refuses, in words a person can act on: the parameter, the
 * keyword, what it holds and what JSON Schema allows there. ajv's own text ("data/properties/n/type
 * must be equal to one of the allowed values, data/properties/n/type must be array, ... must match
 * a schema in anyOf") names no parameter by name and says three things at once.
 */
import type { Ajv, ErrorObject } from "ajv";
import { isPlainObject } from "./args.js";
import { closestNames } from "./closest-names.js";

// Keywords the meta-schema knows that are not validation rules (ajv.RULES lists only those).
const ANNOTATIONS = [
  "title",
  "description",
  "default",
  "examples",
  "readOnly",
  "writeOnly",
  "deprecated",
  "$schema",
  "$id",
  "$defs",
  "definitions",
  "contentMediaType",
  "contentEncoding",
];
// Keywords whose next segment names a place inside the schema rather than ending the path.
const NAMED_CHILDREN = new Set(["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"]);
const INDEXED_CHILDREN = new Set(["anyOf", "oneOf", "allOf"]);
const SINGLE_CHILDREN = new Set([
  "additionalProperties",
  "additionalItems",
  "contains",
  "not",
  "if",
  "then",
  "else",
  "propertyNames",
]);

/** What is wrong with `schema` as a JSON Schema, or undefined when the meta-schema accepts it. */
export function describeSchemaProblem(ajv: Ajv, schema: Record<string, unknown>): string | undefined {
  let valid: boolean;
  try {
    valid = ajv.validateSchema(schema) === true;
  } catch (error) {
    return (error as Error).message; // an unknown $schema: ajv's sentence names it
  }
  const error = valid ? undefined : mostTelling(ajv.errors ?? []);
  return error && describeMetaError(error);
}

/** What ajv's compile threw once the meta-schema was content: strict mode, an unknown format, a $ref to nothing. */
export function describeCompileError(ajv: Ajv, schema: Record<string, unknown>, error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const keyword = /unknown keyword: "(.+?)"/.exec(message)?.[1];
  if (keyword !== undefined) {
    const known = [...Object.keys(ajv.RULES.all), ...ANNOTATIONS];
    const [closest] = closestNames(keyword, known);
    const { parameter } = locate(pathOfKey(schema, keyword) ?? [keyword]);
    const advice = closest ? `did you mean "${closest}"?` : "remove it or correct its spelling";
    return `${parameter === undefined ? "it" : `parameter '${parameter}'`} uses "${keyword}", which is not a JSON Schema keyword; ${advice}`;
  }
  const format = /unknown format "(.+?)" ignored in schema at path "#(.*)"/.exec(message);
  if (format?.[1] !== undefined) {
    const known = Object.keys(ajv.formats);
    const [closest] = closestNames(format[1], known);
    const place = locate([...pointerSegments(format[2] ?? ""), "format"]);
    return `${subjectOf(place)} is "${format[1]}", which is not a known format; ${closest ? `did you mean "${closest}"?` : `use one of ${known.join(", ")}, or leave it out`}`;
  }
  const missingRef = (error as { missingRef?: unknown }).missingRef;
  if (typeof missingRef === "string")
    return `a "$ref" points at ${missingRef}, which the schema does not define; point it at an entry of the schema's "$defs"`;
  return message;
}

/** Of ajv's errors about one mistake, the one about the innermost place, and there the one that lists what is allowed. */
function mostTelling(errors: ErrorObject[]): ErrorObject | undefined {
  const rank = (error: ErrorObject) =>
    error.keyword === "enum" ? 0 : error.keyword === "type" ? 1 : INDEXED_CHILDREN.has(error.keyword) ? 3 : 2;
  return [...errors].sort(
    (a, b) => pointerSegments(b.instancePath).length - pointerSegments(a.instancePath).length || rank(a) - rank(b),
  )[0];
}

function describeMetaError(error: ErrorObject): string {
  const place = locate(pointerSegments(error.instancePath));
  const value = shortJson(error.data);
  const params = error.params as Record<string, unknown>;
  const listed = place.index !== undefined ? ` lists ${value}` : ` is ${value}`;
  if (error.keyword === "enum") {
    const allowed = (params.allowedValues as unknown[]).map((allowedValue) => JSON.stringify(allowedValue)).join(", ");
    const orList = place.keyword === "type" && place.index === undefined ? " (or a list of them)" : "";
    return `${subjectOf(place)}${listed}; it must be one of ${allowed}${orList}`;
  }
  if (error.keyword === "type") return `${subjectOf(place)}${listed}; it must be ${describeTypes(params.type)}`;
  return `${subjectOf(place)}${listed}; it ${error.message ?? "is not allowed there"}`;
}

interface Place {
  /** The parameter, as a reader names it: "city", "address.street", "tags[]"; undefined at the top. */
  parameter?: string;
  keyword: string;
  /** An entry of the keyword's list ("type": ["string", "nul"] -> "1"). */
  index?: string;
}

/** A path into the schema (["properties", "n", "type"]) as a parameter and a keyword. */
function locate(segments: string[]): Place {
  const names: string[] = [];
  let i = 0;
  while (i < segments.length - 1) {
    const segment = segments[i] as string;
    const next = segments[i + 1] as string;
    if (NAMED_CHILDREN.has(segment)) {
      names.push(segment === "properties" ? next : `${segment}.${next}`);
      i += 2;
    } else if (segment === "items" || segment === "prefixItems") {
      const tuple = /^\d+$/.test(next) && i + 2 < segments.length;
      appendToLast(names, tuple ? `[${next}]` : "[]");
      i += tuple ? 2 : 1;
    } else if (INDEXED_CHILDREN.has(segment) && i + 2 < segments.length) {
      i += 2; // a branch of anyOf/oneOf/allOf describes the same parameter
    } else if (SINGLE_CHILDREN.has(segment)) {
      appendToLast(names, segment === "additionalProperties" ? ".*" : "");
      i += 1;
    } else break;
  }
  const [keyword = "schema", ...index] = segments.slice(i);
  return {
    parameter: names.length ? names.join(".") : undefined,
    keyword,
    ...(index.length ? { index: index.join("/") } : {}),
  };
}

function appendToLast(names: string[], suffix: string): void {
  if (names.length === 0) names.push(`parameters${suffix}`);
  else names[names.length - 1] += suffix;
}

function subjectOf(place: Place): string {
  return place.parameter === undefined
    ? `its "${place.keyword}"`
    : `the "${place.keyword}" of parameter '${place.parameter}'`;
}

function describeTypes(type: unknown): string {
  const words: Record<string, string> = {
    array: "a list (JSON array)",
    object: "an object",
    string: "a string",
    boolean: "a boolean (true or false)",
    number: "a number",
    integer: "a whole number",
    null: "null",
  };
  const named = ([] as unknown[]).concat(type).map((name) => words[String(name)] ?? String(name));
  return named.length > 1 ? `${named.slice(0, -1).join(", ")} or ${named.at(-1)}` : (named[0] ?? "valid");
}

/** The path to the first place (depth first) where `key` is a key of a schema object. */
function pathOfKey(node: unknown, key: string, path: string[] = [], depth = 0): string[] | undefined {
  if (depth > 32 || typeof node !== "object" || node === null) return undefined;
  if (isPlainObject(node) && Object.hasOwn(node, key)) return [...path, key];
  for (const [child, value] of Object.entries(node)) {
    const found = pathOfKey(value, key, [...path, child], depth + 1);
    if (found) return found;
  }
  return undefined;
}

function pointerSegments(pointer: string): string[] {
  return pointer
    .split("/")
    .slice(1)
    .map((part) => part.replace(/~1/g, "/").replace(/~0/g, "~"));
}

function shortJson(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 60)}…` : text;
}
