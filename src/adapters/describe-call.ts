/** A tool call as one short line for people: `get_order_status(order_id: 20240315001)`. */
export function describeCall(name: string, args: Record<string, unknown> | undefined, maxLength = 160): string {
  const parts = Object.entries(args ?? {}).map(([key, value]) => `${key}: ${shorten(typeof value === "string" ? value : JSON.stringify(value), 60)}`);
  return shorten(`${name}(${parts.join(", ")})`, maxLength);
}

function shorten(text: string, maxLength: number): string {
  const oneLine = text.replace(/\s+/g, " ");
  return oneLine.length > maxLength ? `${oneLine.slice(0, maxLength - 1)}…` : oneLine;
}
