import type { AnyTool } from "../types.js";
import { calculator } from "./calculator.js";
import { createCurrentTimeTool } from "./current-time.js";
import { createShopTools, defaultShopDatabasePath, openShopDatabase } from "./shop.js";

export { calculator, evaluateExpression } from "./calculator.js";
export { createCurrentTimeTool, currentTime } from "./current-time.js";
export { createShopTools, defaultShopDatabasePath, openShopDatabase } from "./shop.js";

/** The tools glassbox ships with: current_time, calculator and the demo shop (opened here). */
export function createBuiltinTools(options: { shopDatabasePath?: string; now?: () => Date } = {}): AnyTool[] {
  const now = options.now ?? (() => new Date());
  const shop = openShopDatabase(options.shopDatabasePath ?? defaultShopDatabasePath());
  return [createCurrentTimeTool(now), calculator, ...createShopTools(shop, { now })];
}
