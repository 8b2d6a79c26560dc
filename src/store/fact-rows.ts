/** A facts row as both stores read it, and a note's origin as both keep it (JSON text). */
import type { Fact, FactOrigin } from "../agent/contracts.js";

export interface FactRow extends Omit<Fact, "origin"> {
  origin: string | null;
}

export const factOf = ({ origin, ...fact }: FactRow): Fact =>
  origin ? { ...fact, origin: JSON.parse(origin) as FactOrigin } : fact;

export const originColumn = (origin: FactOrigin | undefined): string | null =>
  origin ? JSON.stringify({ runId: origin.runId, readContent: origin.readContent }) : null;
