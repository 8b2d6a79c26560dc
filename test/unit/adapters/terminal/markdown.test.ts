import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createMarkdownStream } from "../../../../src/adapters/terminal/markdown.js";
import { createControlFilter, PLAIN, styleFor, withoutControls } from "../../../../src/adapters/terminal/style.js";
import { count, formatTable } from "../../../../src/adapters/terminal/table.js";

const ANSI = styleFor({ isTTY: true }, { TERM: "xterm" });

function render(text: string, style = PLAIN, pieces: string[] = [text]): string {
  const stream = createMarkdownStream(style);
  return pieces.map((piece) => stream.push(piece)).join("") + stream.end();
}

/** `text` cut at the given points. */
function cut(text: string, points: number[]): string[] {
  const sorted = [...new Set(points.map((point) => point % (text.length + 1)))].sort((a, b) => a - b);
  return [0, ...sorted, text.length]
    .slice(1)
    .map((end, index, ends) => text.slice(index === 0 ? 0 : ends[index - 1], end));
}

/** Each character shown with the styles it is shown in, as a terminal keeps them. */
function onScreen(output: string): string[] {
  const on = new Set<number>();
  const shown: string[] = [];
  const CLOSES: Record<number, number[]> = { 22: [1, 2], 23: [3], 24: [4], 39: [31, 32, 33, 36] };
  for (const [, code, character] of output.matchAll(/\u001b\[(\d+)m|([\s\S])/g)) {
    if (character !== undefined) shown.push(`${character}${[...on].sort().join(",")}`);
    else for (const closed of CLOSES[Number(code)] ?? []) on.delete(closed);
    if (code !== undefined && !CLOSES[Number(code)]) on.add(Number(code));
  }
  return shown;
}

describe("Markdown for a terminal", () => {
  it("renders headings, emphasis, code, lists, quotes, rules, links and code blocks without their marks", () => {
    const text = [
      "# Orders",
      "",
      "Order **20240315001** is *shipped*; see `get_order_status` or [the shop](https://shop.example).",
      "- red",
      "  - dark red",
      "2. second",
      "> quoted",
      "---",
      "```js",
      "const a = 1; // **not bold**",
      "```",
      "snake_case_name and 2 * 3 stay as they are",
    ].join("\n");
    expect(render(text)).toBe(
      [
        "Orders",
        "",
        "Order 20240315001 is shipped; see `get_order_status` or the shop (https://shop.example).",
        "• red",
        "  • dark red",
        "2. second",
        "│ quoted",
        "─".repeat(40),
        "    const a = 1; // **not bold**",
        "snake_case_name and 2 * 3 stay as they are",
      ].join("\n"),
    );
    expect(render("Order **1** is *here* and `x`", ANSI)).toBe(
      "Order \u001b[1m1\u001b[22m is \u001b[3mhere\u001b[23m and \u001b[36mx\u001b[39m",
    );
    expect(render("# Title", ANSI)).toBe("\u001b[1m\u001b[4mTitle\u001b[24m\u001b[22m");
  });

  it("lines a table up, numbers to the right where the separator says so", () => {
    const text = "| Order | Total |\n|---|--:|\n| 20240315001 | $12.00 |\n| 2 | $1.50 |\n\nafter";
    expect(render(text)).toBe(
      ["Order         Total", "───────────  ──────", "20240315001  $12.00", "2             $1.50", "", "after"].join(
        "\n",
      ),
    );
  });

  it("shows text as it streams: a word waits only for the mark that closes it", () => {
    const stream = createMarkdownStream(PLAIN);
    expect(stream.push("The answer is ")).toBe("The answer is ");
    expect(stream.push("**4")).toBe("");
    expect(stream.push("2** and")).toBe("42 and");
    expect(stream.push(" more\n- it")).toBe(" more\n• it");
    expect(stream.end()).toBe("");
  });

  it("an unclosed mark at the end of a line is text", () => {
    expect(render("a *b and `c\nnext")).toBe("a *b and `c\nnext");
  });

  it("property: however the text is cut into pieces, the output is the same as for the whole", () => {
    const alphabet = fc.constantFrom(
      "*",
      "_",
      "`",
      "[",
      "]",
      "(",
      ")",
      "#",
      "-",
      "|",
      ">",
      "1",
      ".",
      " ",
      " ",
      "\n",
      "\n",
      "a",
      "b",
      "\\",
      "~",
      ":",
      "x",
    );
    fc.assert(
      fc.property(
        fc.array(alphabet, { maxLength: 80 }).map((characters) => characters.join("")),
        fc.array(fc.nat(), { maxLength: 10 }),
        (text, points) => {
          const pieces = cut(text, points);
          expect(render(text, PLAIN, pieces)).toBe(render(text, PLAIN));
          // With styles, a piece's styles close at its end and open again: the same on the screen, not byte for byte.
          expect(onScreen(render(text, ANSI, pieces))).toEqual(onScreen(render(text, ANSI)));
        },
      ),
      { numRuns: 3_000 },
    );
  });

  it("property: without a style no escape code is ever written", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 120 }), (text) => {
        expect(render(withoutControls(text))).not.toContain("\u001b");
      }),
    );
  });
});

describe("escape codes from a model", () => {
  it("are removed whole, also when a stream cuts one in two", () => {
    const text =
      "safe \u001b]0;title\u0007text \u001b[31mred\u001b[0m and \u001b]8;;https://x\u001b\\link\u001b]8;;\u001b\\ done\r\u0008";
    expect(withoutControls(text)).toBe("safe text red and link done");
    fc.assert(
      fc.property(fc.array(fc.nat(), { maxLength: 12 }), (points) => {
        const filter = createControlFilter();
        expect(cut(text, points).map(filter).join("")).toBe("safe text red and link done");
      }),
    );
  });
});

describe("tables for the terminal", () => {
  it("sizes each column to its widest cell, styles not counted", () => {
    const table = formatTable(
      [{ header: "NAME" }, { header: "RUNS", align: "right" }],
      [
        [ANSI.bold("a-long-name"), "1"],
        ["b", "1,234"],
      ],
    );
    expect(table.split("\n").map((line) => line.replace(/\u001b\[\d+m/g, ""))).toEqual([
      "NAME          RUNS",
      "a-long-name      1",
      "b            1,234",
    ]);
  });

  it("counts in words: singular for one, separators for thousands", () => {
    expect([count(1, "run"), count(2, "run"), count(0, "step"), count(12_345, "token")]).toEqual([
      "1 run",
      "2 runs",
      "0 steps",
      "12,345 tokens",
    ]);
  });
});

describe("Markdown for a terminal, bounded", () => {
  it("regression: a line whose mark never closes is shown as it comes once 2,000 characters wait, not held (and rescanned) to its end", () => {
    const stream = createMarkdownStream(PLAIN);
    let shown = stream.push("see [");
    for (let piece = 0; piece < 399; piece++) shown += stream.push("word ");
    expect(shown).toBe("see ");
    for (let piece = 0; piece < 1_000; piece++) shown += stream.push("word ");
    expect(shown).toBe(`see [${"word ".repeat(1_399)}`);
    expect(stream.end()).toBe("");
  });
});
