/**
 * Splits a long answer into messages of at most `limit` characters, at a paragraph, then a line,
 * then a space boundary. A code block cut in two is closed at the end of one part and reopened
 * (with its language) at the start of the next, so every part renders on its own.
 */
export function splitMessage(text: string, limit: number): string[] {
  const parts: string[] = [];
  let rest = text.trim();
  let reopen = ""; // the fence line to reopen a code block that the previous part closed
  while (rest.length > 0) {
    const room = limit - reopen.length - 4; // keep space for a closing "\n```"
    if (reopen.length + rest.length <= limit) {
      parts.push(reopen + rest);
      break;
    }
    const cut = cutPoint(rest, room);
    let part = reopen + rest.slice(0, cut).trimEnd();
    rest = rest.slice(cut).trimStart();
    const open = openFence(part);
    if (open !== undefined) {
      part += "\n```";
      reopen = `${open}\n`;
    } else {
      reopen = "";
    }
    parts.push(part);
  }
  return parts;
}

/** The best place to cut `text` within `room` characters. */
function cutPoint(text: string, room: number): number {
  const window = text.slice(0, room + 1);
  for (const boundary of ["\n\n", "\n", " "]) {
    const at = window.lastIndexOf(boundary);
    if (at > room / 2) return at;
  }
  return room; // one long word: cut it
}

/** The opening fence line (e.g. "```ts") if `text` ends inside a code block. */
function openFence(text: string): string | undefined {
  let open: string | undefined;
  for (const line of text.split("\n")) {
    const fence = line.trim().match(/^```.*$/);
    if (fence) open = open === undefined ? fence[0] : undefined;
  }
  return open;
}
