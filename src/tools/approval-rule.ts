/**
 * Whether a call waits for a person: a tool's `dangerous` is true (every call), false or absent
 * (none), or a rule of the arguments ("refunds over $100"). A rule that throws, or answers anything
 * but false, asks: a gate fails closed.
 */
import type { AnyTool } from "./types.js";

export function callNeedsApproval(tool: Pick<AnyTool, "dangerous">, args: Record<string, unknown>): boolean {
  const { dangerous } = tool;
  if (typeof dangerous !== "function") return dangerous === true;
  try {
    return dangerous(args) !== false;
  } catch {
    return true;
  }
}

/** Whether some call of the tool may wait for a person: "always", "by arguments" (a rule) or "never". */
export function approvalOf(tool: Pick<AnyTool, "dangerous">): "always" | "by arguments" | "never" {
  if (typeof tool.dangerous === "function") return "by arguments";
  return tool.dangerous === true ? "always" : "never";
}
