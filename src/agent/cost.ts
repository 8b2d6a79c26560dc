/**
 * What tokens cost, per model: US dollars per million input, cached input and output tokens. An
 * unknown model has no price (null), never a made-up zero. GLASSBOX_PRICES (JSON) adds or overrides
 * entries, e.g. {"my-model": {"input": 0.5, "output": 1.5}}.
 */
export interface Price {
  input: number;
  output: number;
  cachedInput?: number;
}

// Published list prices (per million tokens) of common models; a prefix match covers dated versions.
const PRICES: Record<string, Price> = {
  "gpt-4o-mini": { input: 0.15, cachedInput: 0.075, output: 0.6 },
  "gpt-4o": { input: 2.5, cachedInput: 1.25, output: 10 },
  "gpt-4.1-nano": { input: 0.1, cachedInput: 0.025, output: 0.4 },
  "gpt-4.1-mini": { input: 0.4, cachedInput: 0.1, output: 1.6 },
  "gpt-4.1": { input: 2, cachedInput: 0.5, output: 8 },
  "gpt-5-nano": { input: 0.05, cachedInput: 0.005, output: 0.4 },
  "gpt-5-mini": { input: 0.25, cachedInput: 0.025, output: 2 },
  "gpt-5": { input: 1.25, cachedInput: 0.125, output: 10 },
  "o4-mini": { input: 1.1, cachedInput: 0.275, output: 4.4 },
  "o3-mini": { input: 1.1, cachedInput: 0.55, output: 4.4 },
  o3: { input: 2, cachedInput: 0.5, output: 8 },
};

export function priceOf(model: string, overrides: Record<string, Price> = {}): Price | null {
  const table = { ...PRICES, ...overrides };
  const name = model.replace(/^.*\//, "");
  if (table[name]) return table[name];
  // The longest known name that the model's name starts with ("gpt-4o-2024-08-06" is "gpt-4o").
  const match = Object.keys(table)
    .filter((known) => name.startsWith(`${known}-`))
    .sort((a, b) => b.length - a.length)[0];
  return match ? (table[match] ?? null) : null;
}

/** Dollars for a number of tokens, or null when the model has no known price. */
export function costOf(
  price: Price | null,
  tokens: { promptTokens: number; completionTokens: number; cachedTokens?: number },
): number | null {
  if (!price) return null;
  const cached = tokens.cachedTokens ?? 0;
  const fresh = tokens.promptTokens - cached;
  return (
    (fresh * price.input + cached * (price.cachedInput ?? price.input) + tokens.completionTokens * price.output) /
    1_000_000
  );
}

export function parsePrices(json: string | undefined): Record<string, Price> {
  if (!json?.trim()) return {};
  const parsed = JSON.parse(json) as Record<string, Price>;
  for (const [model, price] of Object.entries(parsed)) {
    if (typeof price?.input !== "number" || typeof price?.output !== "number") {
      throw new Error(
        `GLASSBOX_PRICES: the price of '${model}' needs numbers "input" and "output" (dollars per million tokens).`,
      );
    }
  }
  return parsed;
}
