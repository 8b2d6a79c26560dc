/**
 * Slack tokens at rest: sealed with AES-256-GCM under GLASSBOX_ENCRYPTION_KEY (32 random bytes, as
 * base64 or hex). A sealed value is `v1.<iv>.<ciphertext>.<tag>` (base64url), bound to what it
 * belongs to (the installation's key is the additional data), so a value copied to another row, or
 * read with another key, fails to open instead of yielding a wrong token.
 */
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { configurationError, type GlassboxError } from "../../agent/errors.js";

export { parseEncryptionKey } from "../../config.js";

const KEY_BYTES = 32;
const IV_BYTES = 12; // GCM's standard nonce: random per value, so one key seals 2^32 values safely
const TAG_BYTES = 16;
const VERSION = "v1";

export interface TokenCipher {
  /** Encrypts `plain`, bound to `context` (what it belongs to); a new random IV every time. */
  seal(plain: string, context: string): string;
  /** Decrypts a sealed value; throws a GlassboxError when the key or the context is not the one it was sealed with. */
  open(sealed: string, context: string): string;
}

export function createTokenCipher(key: Buffer): TokenCipher {
  if (key.length !== KEY_BYTES) throw new Error(`an AES-256 key has ${KEY_BYTES} bytes, not ${key.length}`);
  return {
    seal(plain, context) {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv("aes-256-gcm", key, iv);
      cipher.setAAD(Buffer.from(context, "utf8"));
      const body = Buffer.concat([cipher.update(plain, "utf8"), cipher.final()]);
      return [VERSION, iv, body, cipher.getAuthTag()]
        .map((part) => (typeof part === "string" ? part : part.toString("base64url")))
        .join(".");
    },
    open(sealed, context) {
      const [version, iv, body, tag] = sealed.split(".");
      if (version !== VERSION || iv === undefined || body === undefined || tag === undefined)
        throw unreadable(context, "it is not in the format glassbox writes");
      try {
        const decipher = createDecipheriv("aes-256-gcm", key, Buffer.from(iv, "base64url"), {
          authTagLength: TAG_BYTES,
        });
        decipher.setAAD(Buffer.from(context, "utf8"));
        decipher.setAuthTag(Buffer.from(tag, "base64url"));
        return Buffer.concat([decipher.update(Buffer.from(body, "base64url")), decipher.final()]).toString("utf8");
      } catch {
        throw unreadable(context, "GLASSBOX_ENCRYPTION_KEY is not the key it was stored with");
      }
    },
  };
}

function unreadable(context: string, why: string): GlassboxError {
  return configurationError(
    `The stored Slack installation of ${context} cannot be decrypted (${why}); set the key it was installed with, or install the app in that workspace again.`,
  );
}
