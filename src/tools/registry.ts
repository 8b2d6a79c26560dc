/**
 * The registry: tools by name, each schema compiled once. A bad definition fails here, at
 * registration, with a message naming the tool — never later, in the middle of a run.
 */
import { approverMistake } from "./approver-entries.js";
import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import addFormatsModule from "ajv-formats";
import { isPlainObject } from "./args.js";
import { closestNames } from "./closest-names.js";
import { describeCompileError, describeSchemaProblem } from "./schema-errors.js";
import type { AnyTool, ToolSpec } from "./types.js";

// ajv-formats ships CommonJS with a default export that NodeNext sees one level down.
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

export type ValidatedArguments =
  | { ok: true; value: Record<string, unknown>; repairs: string[] }
  | { ok: false; message: string };

export interface RegisteredTool {
  definition: AnyTool;
  /** Validates (and safely coerces, and fills defaults into) a copy of the arguments. */
  validate(args: Record<string, unknown>): ValidatedArguments;
}

export interface ToolRegistry {
  get(name: string): RegisteredTool | undefined;
  list(): RegisteredTool[];
  names(): string[];
  /** The tools as the model is told about them. */
  specs(): ToolSpec[];
  /** A registry holding only the named tools (for one agent). Unknown names are an error. */
  subset(names: string[]): ToolRegistry;
  /** The registered names closest to an unknown one, best first. */
  closestNames(name: string): string[];
}

export class ToolDefinitionError extends Error {
  readonly code = "invalid_tool_definition";
  constructor(
    message: string,
    /** The tool the definition is of, when one is named: where it came from can then be added. */
    readonly toolName?: string,
  ) {
    super(message);
  }
}

export function createToolRegistry(tools: AnyTool[]): ToolRegistry {
  const byName = new Map<string, RegisteredTool>();
  for (const tool of tools) {
    checkDefinition(tool);
    if (byName.has(tool.name))
      throw new ToolDefinitionError(`Tool '${tool.name}' is registered twice; tool names must be unique.`);
    byName.set(tool.name, { definition: tool, validate: compileValidator(tool) });
  }
  checkDependencies([...byName.values()].map((tool) => tool.definition));
  return registryOver(byName);
}

// One ajv for the process: checking a schema against JSON Schema's meta-schema first compiles the
// meta-schema, most of what building a registry costs, so it is compiled once, not per registry.
let sharedAjv: Ajv | undefined;
function ajvOnce(): Ajv {
  if (!sharedAjv) {
    // verbose puts the offending value on each error, so a message can say what the model sent.
    sharedAjv = new Ajv({
      allErrors: true,
      verbose: true,
      useDefaults: true,
      strict: true,
      strictTypes: false,
      allowUnionTypes: true,
    });
    addFormats(sharedAjv);
  }
  return sharedAjv;
}

// Each schema is compiled once per process, whatever registries share its tool (the tool
// selection's, a specialist's subset).
const validators = new WeakMap<Record<string, unknown>, ValidateFunction>();

function registryOver(byName: Map<string, RegisteredTool>): ToolRegistry {
  const specs = [...byName.values()].map(({ definition }) => ({
    type: "function" as const,
    function: { name: definition.name, description: definition.description, parameters: definition.parameters },
  }));
  return {
    get: (name) => byName.get(name),
    list: () => [...byName.values()],
    names: () => [...byName.keys()],
    specs: () => specs,
    subset(names) {
      const chosen = new Map<string, RegisteredTool>();
      for (const name of names) {
        const tool = byName.get(name);
        if (!tool)
          throw new ToolDefinitionError(
            `No tool named '${name}' to choose; registered tools: ${[...byName.keys()].join(", ")}.`,
          );
        chosen.set(name, tool);
      }
      return registryOver(chosen);
    },
    closestNames: (name) => closestNames(name, [...byName.keys()]),
  };
}

function checkDefinition(tool: AnyTool): void {
  if (!isPlainObject(tool))
    throw new ToolDefinitionError(
      `A tool must be an object with name, description, parameters and handler; got ${typeof tool}.`,
    );
  const fail = (problem: string) =>
    new ToolDefinitionError(
      `Tool '${String(tool.name)}': ${problem}`,
      typeof tool.name === "string" ? tool.name : undefined,
    );
  if (typeof tool.name !== "string" || !TOOL_NAME.test(tool.name))
    throw fail("the name must be 1-64 letters, digits, '_' or '-'.");
  if (typeof tool.description !== "string" || tool.description.trim() === "")
    throw fail("a description is required, so the model knows when to call it.");
  if (!isPlainObject(tool.parameters) || tool.parameters.type !== "object")
    throw fail('parameters must be a JSON Schema with type "object".');
  const unknown = Object.keys(tool).filter((key) => !DEFINITION_KEYS.includes(key));
  if (unknown.length > 0) throw fail(unknownKeys(unknown));
  if (typeof tool.handler !== "function") throw fail("handler must be a function.");
  if (tool.dangerous !== undefined && typeof tool.dangerous !== "boolean" && typeof tool.dangerous !== "function")
    throw fail(
      `dangerous must be true, false, or a function of the arguments that says whether a call needs approval; got ${JSON.stringify(tool.dangerous)?.slice(0, 40) ?? typeof tool.dangerous}.`,
    );
  if (
    tool.approvers !== undefined &&
    !(
      Array.isArray(tool.approvers) &&
      tool.approvers.length <= MAX_TOOL_APPROVERS &&
      tool.approvers.every((id) => typeof id === "string" && /^\S{1,200}$/.test(id))
    )
  )
    throw fail(
      `approvers must be a list of at most ${MAX_TOOL_APPROVERS} user ids (as the platform names them), Slack user groups (group:S...) or Discord roles (role:...).`,
    );
  const mistaken = tool.approvers?.find((entry) => approverMistake(entry) !== undefined);
  if (mistaken !== undefined) throw fail(`approvers names ${mistaken}, ${approverMistake(mistaken)}`);
  if (tool.requesterMayApprove !== undefined && typeof tool.requesterMayApprove !== "boolean")
    throw fail("requesterMayApprove must be true or false.");
  if (tool.approvalsNeeded !== undefined && !isApprovalsNeeded(tool.approvalsNeeded))
    throw fail(
      `approvalsNeeded must be a whole number from 1 to ${MAX_APPROVALS_NEEDED} (2: two people must approve).`,
    );
  if (tool.requesterConfirms !== undefined && typeof tool.requesterConfirms !== "boolean")
    throw fail("requesterConfirms must be true or false.");
  if (tool.requesterConfirms === true && tool.requesterMayApprove === false)
    throw fail(
      "a call the requester confirms cannot also be one they may not decide; drop requesterMayApprove: false.",
    );
  if (tool.timeoutMs !== undefined && !(Number.isFinite(tool.timeoutMs) && tool.timeoutMs > 0))
    throw fail("timeoutMs must be a positive number of milliseconds.");
  if (
    tool.dependsOn !== undefined &&
    !(Array.isArray(tool.dependsOn) && tool.dependsOn.every((name) => typeof name === "string"))
  ) {
    throw fail("dependsOn must be a list of tool names.");
  }
}

const MAX_TOOL_APPROVERS = 100;
export const MAX_APPROVALS_NEEDED = 5;

/** Whether `value` is a number of approvals a call may need. */
export const isApprovalsNeeded = (value: unknown): value is number =>
  Number.isInteger(value) && (value as number) >= 1 && (value as number) <= MAX_APPROVALS_NEEDED;

/** What a tool definition may hold; anything else is a typo that could remove a gate (`dangrous: true`). */
const DEFINITION_KEYS = [
  "name",
  "description",
  "parameters",
  "handler",
  "resume",
  "dangerous",
  "approvers",
  "requesterMayApprove",
  "approvalsNeeded",
  "requesterConfirms",
  "timeoutMs",
  "dependsOn",
];
/** Words people use for an approval gate, each meaning `dangerous`. */
const MEANS_DANGEROUS = /^(requires?|needs?)_?approval$|^approval_?required$|^confirm(ation)?$|^destructive$/i;

function unknownKeys(keys: string[]): string {
  const named = keys.map((key) => {
    const meant = MEANS_DANGEROUS.test(key) ? "dangerous" : closestNames(key, DEFINITION_KEYS)[0];
    return meant ? `"${key}" (did you mean "${meant}"?)` : `"${key}"`;
  });
  const what = keys.length === 1 ? "an unknown key" : "unknown keys";
  return `${what} ${named.join(", ")}; a tool has ${DEFINITION_KEYS.join(", ")}. Nothing was loaded, so no call runs unchecked.`;
}

/** dependsOn may name tools that are not registered (they simply never appear), but never a cycle. */
function checkDependencies(tools: AnyTool[]): void {
  const dependsOn = new Map(tools.map((tool) => [tool.name, tool.dependsOn ?? []]));
  const visiting = new Set<string>();
  const done = new Set<string>();
  const visit = (name: string, path: string[]): void => {
    if (done.has(name)) return;
    if (visiting.has(name))
      throw new ToolDefinitionError(`Tools depend on each other in a cycle: ${[...path, name].join(" -> ")}.`);
    visiting.add(name);
    for (const next of dependsOn.get(name) ?? []) visit(next, [...path, name]);
    visiting.delete(name);
    done.add(name);
  };
  for (const tool of tools) visit(tool.name, []);
}

function compileValidator(tool: AnyTool): RegisteredTool["validate"] {
  const check = validators.get(tool.parameters) ?? compileSchema(tool);
  validators.set(tool.parameters, check);
  return (args) => {
    const value = structuredClone(args);
    const repairs: string[] = [];
    // Validate, coerce what can be coerced safely, and validate again; a coercion can reveal more.
    for (let attempt = 0; attempt < 3; attempt++) {
      const before = new Set(Object.keys(value));
      const valid = check(value);
      for (const key of Object.keys(value))
        if (!before.has(key)) repairs.push(`filled default ${key} = ${JSON.stringify(value[key])}`);
      if (valid) return { ok: true, value, repairs };
      const errors = check.errors ?? [];
      const coerced = [
        ...errors.map((error) => coerceAt(value, error)),
        ...calibrateEnums(value, errors, tool.parameters),
      ].filter((note) => note !== undefined);
      if (coerced.length === 0) break;
      repairs.push(...coerced);
    }
    return { ok: false, message: describeErrors(check.errors ?? [], tool) };
  };
}

/**
 * A tool's schema compiled (ajv checks it against the meta-schema as it compiles); a problem is put
 * in words only when there is one. The compiled function is kept in `validators`, not in ajv: a
 * registry built again from new objects (a replay) must not grow ajv's cache, nor find an $id taken.
 */
function compileSchema(tool: AnyTool): ValidateFunction {
  const ajv = ajvOnce();
  try {
    return ajv.compile(tool.parameters);
  } catch (error) {
    const problem = describeSchemaProblem(ajv, tool.parameters) ?? describeCompileError(ajv, tool.parameters, error);
    throw new ToolDefinitionError(
      `Tool '${tool.name}': its parameters schema is invalid: ${problem}${/[.?]$/.test(problem) ? "" : "."}`,
      tool.name,
    );
  } finally {
    ajv.removeSchema(tool.parameters);
  }
}

/** Only coercions that cannot change meaning: "3" -> 3, "true" -> true, 42 -> "42". */
function coerceAt(root: Record<string, unknown>, error: ErrorObject): string | undefined {
  if (error.keyword !== "type" || error.instancePath === "") return undefined;
  const place = placeOf(root, error.instancePath);
  if (!place) return undefined;
  const current = place.container[place.key];
  const wanted = ([] as string[]).concat(error.params.type as string | string[]);
  const next = coerceValue(current, wanted);
  if (next === undefined) return undefined;
  place.container[place.key] = next;
  return `coerced ${pointerName(error.instancePath)} from ${JSON.stringify(current)} to ${JSON.stringify(next)}`;
}

/** The object or array holding the value at a JSON pointer, and its key there. */
function placeOf(
  root: Record<string, unknown>,
  instancePath: string,
): { container: Record<string, unknown>; key: string } | undefined {
  const path = pointerParts(instancePath);
  const key = path.pop();
  if (key === undefined) return undefined;
  let parent: unknown = root;
  for (const part of path)
    parent = typeof parent === "object" && parent !== null ? (parent as Record<string, unknown>)[part] : undefined;
  return typeof parent === "object" && parent !== null
    ? { container: parent as Record<string, unknown>, key }
    : undefined;
}

const pointerParts = (pointer: string) =>
  pointer
    .split("/")
    .slice(1)
    .map((part) => part.replace(/~1/g, "/").replace(/~0/g, "~"));

/**
 * A string an enum (or const) refuses that matches exactly one allowed value once case and
 * separators are ignored ("SMS" for "sms", "in progress" for "in_progress") becomes that value.
 * The allowed values are every one the schema has for that place (through anyOf, oneOf, allOf and
 * local $refs), so a value another branch takes as it is stays, and two that read the same
 * ("in-progress" and "in_progress") are ambiguous: either way ajv's error lists them for the model.
 */
function calibrateEnums(
  root: Record<string, unknown>,
  errors: ErrorObject[],
  schema: Record<string, unknown>,
): string[] {
  const places = new Set(
    errors.filter((error) => error.keyword === "enum" || error.keyword === "const").map((error) => error.instancePath),
  );
  const notes: string[] = [];
  for (const instancePath of places) {
    const place = placeOf(root, instancePath);
    const current = place?.container[place.key];
    if (!place || typeof current !== "string") continue;
    const allowed = new Set<string>();
    collectAllowedStrings(schema, schema, pointerParts(instancePath), allowed, 0);
    if (allowed.has(current)) continue;
    const wanted = calibrationKey(current);
    const matches = [...allowed].filter((value) => calibrationKey(value) === wanted);
    if (matches.length !== 1) continue;
    place.container[place.key] = matches[0];
    notes.push(
      `calibrated ${pointerName(instancePath)} from ${JSON.stringify(current)} to ${JSON.stringify(matches[0])}, the allowed value it matches`,
    );
  }
  return notes;
}

/**
 * A word as calibration compares it: camelCase split, lower case, and any run of spaces, "_", "-"
 * or "." next to a letter read as one space. Between digits they stay ("1.5" is not "1-5"), and so
 * does a leading minus ("-1" is not "1").
 */
function calibrationKey(text: string): string {
  return text
    .trim()
    .replace(/(\p{Ll}|\p{N})(\p{Lu})/gu, "$1 $2")
    .replace(/(\p{Lu})(\p{Lu}\p{Ll})/gu, "$1 $2")
    .replace(/(?<=\p{L})[\s_.-]+|[\s_.-]+(?=\p{L})/gu, " ")
    .toLowerCase();
}

/** Adds the strings that `enum` and `const` allow at `path` below `node`, in every branch and local $ref. */
function collectAllowedStrings(
  root: Record<string, unknown>,
  node: unknown,
  path: string[],
  found: Set<string>,
  depth: number,
): void {
  if (!isPlainObject(node) || depth > 32) return;
  const next = (child: unknown, rest: string[]) => collectAllowedStrings(root, child, rest, found, depth + 1);
  for (const keyword of ["anyOf", "oneOf", "allOf"])
    if (Array.isArray(node[keyword])) for (const branch of node[keyword]) next(branch, path);
  for (const keyword of ["then", "else"]) next(node[keyword], path);
  if (typeof node.$ref === "string" && node.$ref.startsWith("#")) next(resolvePointer(root, node.$ref.slice(1)), path);
  const [part, ...rest] = path;
  if (part === undefined) {
    if (Array.isArray(node.enum)) for (const value of node.enum) if (typeof value === "string") found.add(value);
    if (typeof node.const === "string") found.add(node.const);
    return;
  }
  // An object's property: by name, by pattern, else additionalProperties.
  const properties = isPlainObject(node.properties) ? node.properties : {};
  const patterns = Object.entries(isPlainObject(node.patternProperties) ? node.patternProperties : {}).filter(
    ([pattern]) => new RegExp(pattern, "u").test(part),
  );
  if (Object.hasOwn(properties, part)) next(properties[part], rest);
  for (const [, child] of patterns) next(child, rest);
  if (!Object.hasOwn(properties, part) && patterns.length === 0) next(node.additionalProperties, rest);
  // An array's item: items for all, or a tuple (draft-07 items array, then additionalItems).
  if (/^\d+$/.test(part)) {
    if (!Array.isArray(node.items)) next(node.items, rest);
    else next(Number(part) < node.items.length ? node.items[Number(part)] : node.additionalItems, rest);
  }
}

function resolvePointer(root: unknown, pointer: string): unknown {
  let node = root;
  for (const part of pointerParts(pointer))
    node =
      isPlainObject(node) || Array.isArray(node)
        ? (node as Record<string, unknown>)[decodeURIComponent(part)]
        : undefined;
  return node;
}

function coerceValue(value: unknown, wanted: string[]): unknown {
  if (typeof value === "string") {
    const text = value.trim();
    if ((wanted.includes("number") || wanted.includes("integer")) && /^-?\d+(\.\d+)?([eE][+-]?\d+)?$/.test(text)) {
      const number = Number(text);
      // "1e999" would become Infinity and a long integer would lose digits: both change the value.
      if (wanted.includes("number") ? Number.isFinite(number) : Number.isSafeInteger(number)) return number;
    }
    if (wanted.includes("boolean") && (text === "true" || text === "false")) return text === "true";
  }
  if (
    wanted.includes("string") &&
    ((typeof value === "number" && Number.isSafeInteger(value)) || typeof value === "boolean")
  ) {
    return String(value);
  }
  return undefined;
}

/** Schema errors in words a model can act on, with the expected shape as a reminder. */
function describeErrors(errors: ErrorObject[], tool: AnyTool): string {
  const problems = [...new Set(errors.map(describeError))];
  return `${problems.join("; ")}. Expected arguments: ${describeShape(tool.parameters)}`;
}

function describeError(error: ErrorObject): string {
  const at = error.instancePath ? `property '${pointerName(error.instancePath)}'` : "arguments";
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case "required": {
      const inside = error.instancePath ? ` in '${pointerName(error.instancePath)}'` : "";
      return `missing required property '${String(params.missingProperty)}'${inside}`;
    }
    case "additionalProperties":
      return `unexpected property '${String(params.additionalProperty)}'${error.instancePath ? ` in '${pointerName(error.instancePath)}'` : ""}`;
    case "type":
      return `${at} must be ${String(params.type)}, got ${typeName(error.data)}`;
    case "enum":
      return `${at} must be one of ${(params.allowedValues as unknown[]).map((value) => JSON.stringify(value)).join(", ")}`;
    case "const":
      return `${at} must be ${JSON.stringify(params.allowedValue)}`;
    default:
      return `${at} ${error.message ?? "is invalid"}`;
  }
}

function describeShape(schema: Record<string, unknown>): string {
  const properties = isPlainObject(schema.properties) ? schema.properties : {};
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  const fields = Object.entries(properties).map(([name, property]) => {
    return `"${name}": ${describeType(property)}${required.has(name) ? " (required)" : ""}`;
  });
  return `{${fields.join(", ")}}`;
}

/** `string`, `string | null`, or the allowed values of an enum: `"email" | "sms"`. */
function describeType(property: unknown): string {
  if (!isPlainObject(property)) return "any";
  if (Array.isArray(property.enum)) return property.enum.map((value) => JSON.stringify(value)).join(" | ");
  if (Array.isArray(property.type)) return property.type.join(" | ");
  return property.type !== undefined ? String(property.type) : "any";
}

function pointerName(instancePath: string): string {
  return instancePath.slice(1).replace(/\//g, ".");
}

function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "string")
    return `string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
  return typeof value === "object" ? "object" : `${typeof value} ${JSON.stringify(value)}`;
}
