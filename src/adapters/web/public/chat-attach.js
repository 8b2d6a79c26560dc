// Files attached in the chat page: chosen with "Attach files", listed under the message box (each
// removable), checked against the server's limits before they are sent, and sent with the message
// in base64. A file too large to send is said in one sentence; the rest of the message still goes.
import { el } from "./common.js";

// The server's limits (src/agent/attachments.ts DEFAULT_ATTACHMENT_LIMITS).
const MAX_FILE_BYTES = 8 * 1024 * 1024;
const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;
const MAX_FILES = 8;

export function formatBytes(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(bytes < 10 * 1024 ? 1 : 0)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(bytes < 10 * 1024 * 1024 ? 1 : 0)} MB`;
}

/** The picker (`input`, a file input) and the list of chosen files (`list`, a ul). */
export function createAttachments(input, list) {
  let chosen = [];
  const render = () => {
    list.replaceChildren(
      ...chosen.map((file, index) => {
        const remove = el(
          "button",
          { type: "button", class: "remove", "aria-label": `Remove ${file.name}`, title: "Remove" },
          "×",
        );
        remove.addEventListener("click", () => {
          chosen.splice(index, 1);
          render();
        });
        return el("li", { class: "attachment" }, `${file.name} (${formatBytes(file.size)})`, remove);
      }),
    );
    list.hidden = chosen.length === 0;
  };
  input.addEventListener("change", () => {
    chosen = [...chosen, ...input.files];
    input.value = ""; // the same file can be chosen again
    render();
  });
  return {
    get count() {
      return chosen.length;
    },
    /** The chosen files as POST /api/runs takes them, and one sentence for each that cannot go; the list stays until clear(). */
    async take() {
      const files = chosen;
      const attachments = [];
      const problems = [];
      let left = MAX_MESSAGE_BYTES;
      for (const [index, file] of files.entries()) {
        if (index >= MAX_FILES)
          problems.push(`I could not read ${file.name}: only the first ${MAX_FILES} files of a message are read.`);
        else if (file.size > MAX_FILE_BYTES)
          problems.push(
            `I could not read ${file.name}: it is ${formatBytes(file.size)}, over the ${formatBytes(MAX_FILE_BYTES)} limit for one file.`,
          );
        else if (file.size > left)
          problems.push(
            `I could not read ${file.name}: the files of one message may come to ${formatBytes(MAX_MESSAGE_BYTES)} together, and this one would pass that.`,
          );
        else {
          left -= file.size;
          attachments.push({
            name: file.name,
            type: file.type || "application/octet-stream",
            data: await base64Of(file),
          });
        }
      }
      return { attachments, problems, names: files.map((file) => `${file.name} (${formatBytes(file.size)})`) };
    },
    /** Once the message is sent: a message refused (too long, the server away) keeps its files to send again. */
    clear() {
      chosen = [];
      render();
    },
  };
}

/** The file's bytes in base64, read in pieces (one String.fromCharCode call per 32 KB). */
async function base64Of(file) {
  const bytes = new Uint8Array(await file.arrayBuffer());
  let binary = "";
  for (let start = 0; start < bytes.length; start += 0x8000)
    binary += String.fromCharCode(...bytes.subarray(start, start + 0x8000));
  return btoa(binary);
}
