/**
 * Files that came with a message, as the model is given them. Adapters fetch the files within the
 * limits below (see src/adapters/attachment-download.ts) and pass them on the task; here each file
 * becomes what the model reads: an image (png, jpeg, gif, webp) an image part, a text file its text
 * (cut to a share of the request), anything else one line with its name, type and size. Each file
 * is announced by a line naming it, so a model that cannot take images (the model layer then drops
 * the image parts) still knows what was attached.
 *
 * The conversation keeps the text of the message (what a person wrote, the files' lines and text):
 * an image is shown to the model in the run of the message that carried it; later turns see its line.
 */
import { textOf, type ContentPart, type Message } from "./types.js";

/** A file read in full, within the limits. */
export interface ReceivedFile {
  name: string;
  /** Its media type as the platform declared it (application/octet-stream when it did not). */
  mimeType: string;
  size: number;
  data: Uint8Array;
}

/** A file that could not be read (too large, unreachable): the model is told so in a line. */
export interface UnreadFile {
  name: string;
  mimeType: string;
  size: number;
  /** Why, as the end of a sentence: "it is 30 MB, over the 8 MB limit for one file". */
  problem: string;
}

export type Attachment = ReceivedFile | UnreadFile;

/** How a file was given to the model, for the trace. */
export type GivenAs = "image" | "text" | "text_cut" | "named" | "unread";

/** Bounds on what a person may attach; adapters check them before reading and while reading. */
export interface AttachmentLimits {
  maxFileBytes: number;
  maxMessageBytes: number;
  maxFiles: number;
  downloadTimeoutMs: number;
}

export const DEFAULT_ATTACHMENT_LIMITS: AttachmentLimits = {
  maxFileBytes: 8 * 1024 * 1024,
  maxMessageBytes: 16 * 1024 * 1024,
  maxFiles: 8,
  downloadTimeoutMs: 20_000,
};

/**
 * The text of all text files of one message, in characters (about 3,000 tokens, a quarter of the
 * default 12,000-token request): the request is pinned in every step's context, so its files must
 * leave room for the rest.
 */
export const DEFAULT_TEXT_CHARS = 12_000;

const IMAGE_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);
const TEXT_TYPES =
  /^(text\/|application\/(json|xml|yaml|x-yaml|toml|javascript|typescript|x-sh|sql|x-ndjson|csv)$|application\/[\w.-]+\+(json|xml)$)/;
const TEXT_EXTENSIONS = new Set(
  "txt md markdown csv tsv json jsonl ndjson xml yaml yml toml ini cfg conf log sql html htm css js mjs cjs ts tsx jsx py rb go rs java kt swift c h cc cpp hpp cs php sh bash zsh ps1 r lua pl scala dart vue svelte diff patch env gitignore dockerfile makefile".split(
    " ",
  ),
);

export interface ShapedFile {
  name: string;
  mimeType: string;
  size: number;
  givenAs: GivenAs;
  /** What the model reads about the file (its line, and its text when inlined). */
  text: string;
  /** The image part, for givenAs "image". */
  image?: ContentPart;
  /** For "text_cut": characters kept of how many. */
  cut?: { kept: number; of: number };
}

/** Each file as the model is given it; text files share `textChars`. Deterministic, so the trace and the message agree. */
export function shapeAttachments(
  attachments: readonly Attachment[],
  textChars = DEFAULT_TEXT_CHARS,
  withImageData = true,
): ShapedFile[] {
  let textLeft = textChars;
  let textFilesLeft = attachments.filter((file) => "data" in file && kindOf(file) === "text").length;
  return attachments.map((file): ShapedFile => {
    const name = cleanName(file.name);
    const about = `${name} (${file.mimeType}, ${formatBytes(file.size)})`;
    const base = { name, mimeType: file.mimeType, size: file.size };
    if (!("data" in file))
      return { ...base, givenAs: "unread", text: `[Attached file ${about} could not be read: ${file.problem}.]` };
    const kind = kindOf(file);
    if (kind === "image") {
      const url = withImageData
        ? `data:${imageTypeOf(file.data) ?? file.mimeType};base64,${Buffer.from(file.data).toString("base64")}`
        : "";
      return {
        ...base,
        givenAs: "image",
        text: `[Attached image: ${about}]`,
        image: { type: "image_url", image_url: { url } },
      };
    }
    if (kind === "text") {
      const whole = new TextDecoder().decode(file.data);
      const share = Math.floor(textLeft / textFilesLeft--);
      const kept = whole.length <= share ? whole : whole.slice(0, share);
      textLeft -= kept.length;
      const cut = kept.length < whole.length ? { kept: kept.length, of: whole.length } : undefined;
      const said = cut ? `its first ${cut.kept} of ${cut.of} characters follow` : "its text follows";
      const body = `${kept}${cut ? `\n…[cut: ${cut.of - cut.kept} more characters not shown]` : ""}`;
      return {
        ...base,
        givenAs: cut ? "text_cut" : "text",
        text: `[Attached file: ${about}; ${said}]\n<file name="${name.replace(/"/g, "'")}">\n${body}\n</file>`,
        ...(cut ? { cut } : {}),
      };
    }
    return {
      ...base,
      givenAs: "named",
      text: `[Attached file: ${about}; its content cannot be read here, only its name, type and size]`,
    };
  });
}

/**
 * Whether a message carries files as userMessageOf gives them: each file's line ("[Attached file: …",
 * "[Attached image: …") starts a line of the message's text, in the turn that brought it and as the
 * conversation keeps it. Someone who types such a line counts too, which errs on the careful side.
 */
export function carriesFiles(message: Message): boolean {
  return message.role === "user" && ATTACHED_LINE.test(textOf(message.content));
}
const ATTACHED_LINE = /^\[Attached (?:file|image)\b/m;

/** The user message of a task: its text, or, with attachments, the text and each file as shapeAttachments gives it. */
export function userMessageOf(
  task: { input: string; attachments?: readonly Attachment[] },
  textChars?: number,
): Message {
  if (!task.attachments?.length) return { role: "user", content: task.input };
  const shaped = shapeAttachments(task.attachments, textChars);
  const texts = [task.input, ...shaped.map((file) => file.text)].filter((text) => text !== "");
  if (!shaped.some((file) => file.image)) return { role: "user", content: texts.join("\n\n") };
  const parts: ContentPart[] = [{ type: "text", text: task.input }];
  for (const file of shaped) {
    const last = parts.at(-1);
    // Each file's line goes with the text before it; an image part follows its own line.
    if (last?.type === "text") last.text = last.text ? `${last.text}\n\n${file.text}` : file.text;
    else parts.push({ type: "text", text: file.text });
    if (file.image) parts.push(file.image);
  }
  return { role: "user", content: parts };
}

/** The run's input as the trace keeps it: the text, then one line per file saying how the model was given it. */
export function inputWithAttachments(
  task: { input: string; attachments?: readonly Attachment[] },
  textChars?: number,
): string {
  if (!task.attachments?.length) return task.input;
  const lines = shapeAttachments(task.attachments, textChars, false).map(
    (file) => `Attached: ${file.name} (${file.mimeType}, ${formatBytes(file.size)}) — ${givenInWords(file)}`,
  );
  return [task.input, ...lines].filter((text) => text !== "").join("\n");
}

function givenInWords(file: ShapedFile): string {
  if (file.givenAs === "image") return "offered as an image"; // a model that refuses images gets a line instead, as its step's notes say
  if (file.givenAs === "text") return "its text inlined";
  if (file.givenAs === "text_cut") return `its text inlined, cut to ${file.cut?.kept} of ${file.cut?.of} characters`;
  if (file.givenAs === "named") return "named only (name, type and size)";
  return "could not be read";
}

/**
 * A message as the conversation keeps it: an image part becomes a line saying it was shown in its
 * own turn, so later turns (and the store) carry no image data.
 */
export function conversationFormOf(message: Message): Message {
  if (message.role !== "user" || typeof message.content === "string") return message;
  const text = message.content
    .map((part) => (part.type === "text" ? part.text : "(the image was shown to you in this turn only)"))
    .join("\n");
  return { role: "user", content: text };
}

function kindOf(file: ReceivedFile): "image" | "text" | "other" {
  const type = file.mimeType.toLowerCase().split(";")[0]?.trim() ?? "";
  if (IMAGE_TYPES.has(type) || (type === "application/octet-stream" && imageTypeOf(file.data)))
    return imageTypeOf(file.data) ? "image" : "other";
  const extension = file.name.toLowerCase().split(".").at(-1) ?? "";
  if ((TEXT_TYPES.test(type) || TEXT_EXTENSIONS.has(extension)) && isText(file.data)) return "text";
  return "other";
}

/** The image type its first bytes show (a file named .png may be anything). */
function imageTypeOf(data: Uint8Array): string | undefined {
  const starts = (...bytes: number[]) => bytes.every((byte, index) => data[index] === byte);
  if (starts(0x89, 0x50, 0x4e, 0x47)) return "image/png";
  if (starts(0xff, 0xd8, 0xff)) return "image/jpeg";
  if (starts(0x47, 0x49, 0x46, 0x38)) return "image/gif";
  if (starts(0x52, 0x49, 0x46, 0x46) && data[8] === 0x57 && data[9] === 0x45 && data[10] === 0x42 && data[11] === 0x50)
    return "image/webp";
  return undefined;
}

/** UTF-8 without NUL bytes: text a model can read. */
function isText(data: Uint8Array): boolean {
  if (data.includes(0)) return false;
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(data);
    return true;
  } catch {
    return false;
  }
}

/** A name on one line, without brackets that could end our markers, at most 200 characters. */
export function cleanName(name: string): string {
  const clean = name
    .replace(/[\r\n\t]+/g, " ")
    .replace(/[[\]<>]/g, "_")
    .trim()
    .slice(0, 200);
  return clean || "unnamed";
}

export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(bytes < 10 * 1024 ? 1 : 0)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(bytes < 10 * 1024 * 1024 ? 1 : 0)} MB`;
}

/** The request with text put before it (memory's notes): before its text, or as a first part. */
export function withTextBefore(message: Message, text: string): Message {
  if (message.role === "user" && typeof message.content !== "string")
    return { role: "user", content: [{ type: "text", text }, ...message.content] };
  return { role: "user", content: `${text}\n\n${textOf(message.content)}` };
}
