/**
 * A step's model-layer notes as both stores keep them, in one JSON array: each note as a string,
 * then each exchange (what was sent and what came back for a repair or refusal) as an object. A
 * step written before exchanges were kept holds strings alone.
 */
import type { ModelExchange } from "../agent/types.js";

export function modelNotesJson(step: { modelNotes: string[]; modelExchanges?: ModelExchange[] }): string {
  return JSON.stringify([...step.modelNotes, ...(step.modelExchanges ?? [])]);
}

export function modelNotesOf(entries: unknown): { modelNotes: string[]; modelExchanges?: ModelExchange[] } {
  const list = Array.isArray(entries) ? (entries as unknown[]) : [];
  const modelNotes = list.filter((entry): entry is string => typeof entry === "string");
  const modelExchanges = list.filter(
    (entry): entry is ModelExchange =>
      typeof entry === "object" && entry !== null && typeof (entry as ModelExchange).note === "string",
  );
  return modelExchanges.length > 0 ? { modelNotes, modelExchanges } : { modelNotes };
}
