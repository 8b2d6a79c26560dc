/** Columns lined up for a terminal, and the numbers and counts that go in them. */
import { PLAIN, visibleLength, type Style } from "./style.js";

export interface Column {
  header: string;
  /** Numbers read best lined up on the right. */
  align?: "left" | "right";
}

/**
 * A header and rows, each column as wide as its widest cell, two spaces apart; `indent` before
 * every line, and a `rule` under the header if asked. Cells may carry styles: widths count what shows.
 */
export function formatTable(
  columns: Column[],
  rows: string[][],
  options: { indent?: string; style?: Style; rule?: boolean } = {},
): string {
  const { indent = "", style = PLAIN, rule = false } = options;
  const widths = columns.map((column, index) =>
    Math.max(visibleLength(column.header), ...rows.map((row) => visibleLength(row[index] ?? ""))),
  );
  const line = (cells: string[]) =>
    indent +
    columns
      .map((column, index) => {
        const cell = cells[index] ?? "";
        const padding = " ".repeat((widths[index] ?? 0) - visibleLength(cell));
        return column.align === "right" ? padding + cell : cell + padding;
      })
      .join("  ")
      .trimEnd();
  const header = style.bold(line(columns.map((column) => column.header)));
  const under = rule ? [style.dim(indent + widths.map((width) => "─".repeat(width)).join("  "))] : [];
  return [header, ...under, ...rows.map(line)].join("\n");
}

/** 1234567 -> "1,234,567". */
export const formatNumber = (value: number) => value.toLocaleString("en-US");

/** "1 run", "2 runs", "1,000 tokens"; `plural` for words that do not just add an s. */
export function count(value: number, singular: string, plural = `${singular}s`): string {
  return `${formatNumber(value)} ${value === 1 ? singular : plural}`;
}
