/**
 * The line that says something is happening while nothing else moves ("⠹ thinking… 3 s"): drawn
 * over itself on an interactive terminal, nothing at all on a pipe or a file.
 */
import { isInteractive, PLAIN, type Style } from "./style.js";

export interface StatusLine {
  /** Shows `text` with a spinner and the seconds since it was first shown, until clear(). */
  show(text: string): void;
  /** Erases the line; call before writing anything else to the same terminal. */
  clear(): void;
  /** Writes `text` (whole lines) to the stream above the status line, which stays. */
  print(text: string): void;
}

const FRAMES = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
const FRAME_MS = 80;

/** The status line of a pipe or a file: it shows nothing. */
export const noStatus = (stream: NodeJS.WritableStream): StatusLine => ({
  show() {},
  clear() {},
  print: (text) => void stream.write(text),
});

export function createStatusLine(
  stream: NodeJS.WritableStream & { isTTY?: boolean },
  style: Style = PLAIN,
  env: NodeJS.ProcessEnv = process.env,
): StatusLine {
  if (!isInteractive(stream, env)) return noStatus(stream);
  let timer: NodeJS.Timeout | undefined;
  let text = "";
  let since = 0;
  let frame = 0;
  const draw = () => {
    const seconds = Math.floor((Date.now() - since) / 1000);
    stream.write(
      `\r${style.cyan(FRAMES[frame++ % FRAMES.length] ?? "")} ${style.dim(`${text}${seconds >= 1 ? ` ${seconds} s` : ""}`)}\u001b[K`,
    );
  };
  return {
    show(next) {
      if (!timer || next !== text) since = Date.now();
      text = next;
      draw();
      // unref: a spinner never keeps the process alive.
      timer ??= setInterval(draw, FRAME_MS).unref();
    },
    clear() {
      if (!timer) return;
      clearInterval(timer);
      timer = undefined;
      stream.write("\r\u001b[K");
    },
    print(printed) {
      if (!timer) return void stream.write(printed);
      stream.write(`\r\u001b[K${printed}`);
      draw();
    },
  };
}
