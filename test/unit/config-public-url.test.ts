// GLASSBOX_PUBLIC_URL: the http(s) address people open the web server at, kept without trailing
// slashes or a user and password written in it (the link is posted in chats). Anything else stops
// the start with one sentence naming the value and what to set.
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";

const sentence = (value: string) =>
  `GLASSBOX_PUBLIC_URL is '${value}'; set it to the http:// or https:// address people open the web server at ` +
  "(such as https://glassbox.example.com), without a query or fragment.";

describe("GLASSBOX_PUBLIC_URL", () => {
  it("is unset when unset or blank: then nothing links to the trace", () => {
    expect(loadConfig({}).publicUrl).toBeUndefined();
    expect(loadConfig({ GLASSBOX_PUBLIC_URL: "  " }).publicUrl).toBeUndefined();
  });

  it("takes an http(s) address, with a path, without its trailing slashes or credentials", () => {
    expect(loadConfig({ GLASSBOX_PUBLIC_URL: "https://glassbox.example.com/" }).publicUrl).toBe(
      "https://glassbox.example.com",
    );
    expect(loadConfig({ GLASSBOX_PUBLIC_URL: " http://10.0.0.5:8787/bot// " }).publicUrl).toBe(
      "http://10.0.0.5:8787/bot",
    );
    expect(loadConfig({ GLASSBOX_PUBLIC_URL: "https://ops:s3cret@glassbox.example.com" }).publicUrl).toBe(
      "https://glassbox.example.com",
    );
  });

  it.each(["glassbox.example.com", "ftp://glassbox.example.com", "https://", "https://x.example/?a=1", "http://x/#y"])(
    "refuses '%s' with one sentence",
    (value) => {
      let message: string | undefined;
      try {
        loadConfig({ GLASSBOX_PUBLIC_URL: value });
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message).toBe(sentence(value));
    },
  );
});
