/**
 * Text styles for a terminal: ANSI colours and attributes where the stream is a terminal that wants
 * them, and the bare text everywhere else (a pipe, a file, NO_COLOR, TERM=dumb).
 */

export interface Style {
  /** False when every function below returns its text unchanged. */
  readonly enabled: boolean;
  bold(text: string): string;
  dim(text: string): string;
  italic(text: string): string;
  underline(text: string): string;
  red(text: string): string;
  green(text: string): string;
  yellow(text: string): string;
  cyan(text: string): string;
}

interface MaybeTerminal {
  isTTY?: boolean;
}

/** A terminal that can move the cursor (a spinner needs that; NO_COLOR does not forbid it). */
export function isInteractive(stream: MaybeTerminal, env: NodeJS.ProcessEnv = process.env): boolean {
  return stream.isTTY === true && env.TERM !== "dumb";
}

/** Colour on a terminal unless NO_COLOR is set to anything (https://no-color.org). */
export function colourWanted(stream: MaybeTerminal, env: NodeJS.ProcessEnv = process.env): boolean {
  return isInteractive(stream, env) && !env.NO_COLOR;
}

// Each style closes with its own code, not a full reset, so styles nest (bold inside a heading's colour).
const sgr = (open: number, close: number) => (text: string) => (text ? `\u001b[${open}m${text}\u001b[${close}m` : text);
const same = (text: string) => text;

const ANSI: Style = {
  enabled: true,
  bold: sgr(1, 22),
  dim: sgr(2, 22),
  italic: sgr(3, 23),
  underline: sgr(4, 24),
  red: sgr(31, 39),
  green: sgr(32, 39),
  yellow: sgr(33, 39),
  cyan: sgr(36, 39),
};

export const PLAIN: Style = {
  enabled: false,
  bold: same,
  dim: same,
  italic: same,
  underline: same,
  red: same,
  green: same,
  yellow: same,
  cyan: same,
};

export function styleFor(stream: MaybeTerminal, env: NodeJS.ProcessEnv = process.env): Style {
  return colourWanted(stream, env) ? ANSI : PLAIN;
}

// CSI and OSC sequences (colours, cursor moves, titles, hyperlinks) and other C0/C1 controls.
const ESCAPES = /\u001b\[[0-?]*[ -/]*[@-~]|\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)?|\u001b[@-_]?/g;
const CONTROLS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/**
 * Text from a model or a tool, made safe to print on a terminal: escape sequences and control
 * characters (which could recolour, move the cursor, retitle the window or hide text) are removed;
 * newlines and tabs stay.
 */
export function withoutControls(text: string): string {
  return text.replace(ESCAPES, "").replace(CONTROLS, "");
}

// A piece that starts with a whole escape sequence: CSI, OSC (whose ST terminator is ESC \ itself), or
// a two-character one (not the openers of CSI, OSC and the other strings: [ ] P X ^ _).
const WHOLE_ESCAPE = /^(?:\u001b\[[0-?]*[ -/]*[@-~]|\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)|\u001b[@-OQ-WYZ\\])/;
const LONGEST_HELD = 256;

/**
 * withoutControls for text that comes in pieces (a model's stream): a sequence cut between two
 * pieces is held back until its end has come, so neither half reaches the terminal.
 */
export function createControlFilter(): (piece: string) => string {
  let held = "";
  return (piece) => {
    const text = held + piece;
    held = "";
    const escape = text.lastIndexOf("\u001b");
    if (escape >= 0 && text.length - escape <= LONGEST_HELD && !WHOLE_ESCAPE.test(text.slice(escape))) {
      held = text.slice(escape);
      return withoutControls(text.slice(0, escape));
    }
    return withoutControls(text);
  };
}

/** How many columns text takes, not counting our own styles. */
export function visibleLength(text: string): number {
  return [...text.replace(ESCAPES, "")].length;
}
