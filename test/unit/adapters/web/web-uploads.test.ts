/** The web server's shelf of uploaded files, bounded in files and in bytes whatever a person sends. */
import { describe, expect, it } from "vitest";
import { createUploadShelf } from "../../../../src/adapters/web/web-uploads.js";

const file = (name: string, bytes: number) => ({
  name,
  mimeType: "text/plain",
  size: bytes,
  data: new Uint8Array(bytes),
});

describe("the upload shelf", () => {
  it("keeps a message's files until their run takes them", () => {
    const shelf = createUploadShelf();
    const [reference] = shelf.keep([file("notes.txt", 10)]);
    expect(reference?.url).toMatch(/^upload:/);
    expect(shelf.take(reference!)).toMatchObject({ name: "notes.txt", size: 10 });
  });

  it("lets the oldest files go once their bytes together pass the bound, and says so when one is taken", () => {
    const shelf = createUploadShelf({ maxBytes: 250 });
    const first = shelf.keep([file("a.txt", 100)]);
    const second = shelf.keep([file("b.txt", 100)]);
    const third = shelf.keep([file("c.txt", 100)]);
    expect(shelf.take(first[0]!)).toMatchObject({
      name: "a.txt",
      problem: "it was uploaded to a glassbox process that has since stopped, or too long ago",
    });
    expect(shelf.take(second[0]!)).toMatchObject({ name: "b.txt", size: 100, data: expect.any(Uint8Array) });
    expect(shelf.take(third[0]!)).toMatchObject({ name: "c.txt", size: 100, data: expect.any(Uint8Array) });
  });

  it("lets the oldest go past the number of files too", () => {
    const shelf = createUploadShelf({ maxFiles: 2 });
    const references = shelf.keep([file("a", 1), file("b", 1), file("c", 1)]);
    expect(references.map((reference) => "problem" in shelf.take(reference))).toEqual([true, false, false]);
  });
});
