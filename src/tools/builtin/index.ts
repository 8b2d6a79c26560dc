import type { AnyTool } from "../types.js";
import { calculator } from "./calculator.js";
import { createCurrentTimeTool } from "./current-time.js";
import { createShopTools, defaultShopDatabasePath, openShopDatabase } from "./shop.js";

export { calculator, evaluateExpression } from "./calculator.js";
export { createCurrentTimeTool, currentTime } from "./current-time.js";
export { createShopTools, defaultShopDatabasePath, openShopDatabase } from "./shop.js";

/** The tools glassbox ships with for every deployment: current_time and calculator (memory's tools need a store; see createMemoryTools). */
export function createBuiltinTools(
  options: { now?: () => Date; include?: ReadonlyArray<"current_time" | "calculator"> } = {},
): AnyTool[] {
  const now = options.now ?? (() => new Date());
  const include = options.include ?? ["current_time", "calculator"];
  return [
    ...(include.includes("current_time") ? [createCurrentTimeTool(now)] : []),
    ...(include.includes("calculator") ? [calculator] : []),
  ];
}

/** The demo shop (`npm run demo`, GLASSBOX_DEMO=true): get_order_status and the dangerous cancel_order and send_message over its SQLite file, opened (and seeded) on the first call. */
export function createDemoShopTools(options: { shopDatabasePath?: string; now?: () => Date } = {}): AnyTool[] {
  const path = options.shopDatabasePath ?? defaultShopDatabasePath();
  return createShopTools(() => openShopDatabase(path), { now: options.now ?? (() => new Date()) });
}
