/**
 * Who may call the web server: the holder of a token (the service's, or a user's), or, with no token
 * configured, only this machine; and how a refusal is answered.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { matchingCredential, type Caller, type Credential } from "./api-rules.js";
import { HttpError, sendJson } from "./http.js";

/** Who calls: the holder of a token, or (without any token configured) this machine, which acts for anyone. */
export function callersOf(credentials: Credential[]): (request: IncomingMessage, url: URL) => Caller {
  return (request, url) => {
    if (credentials.length > 0) {
      const credential = matchingCredential(request, url, credentials);
      if (!credential)
        throw new HttpError(
          401,
          "This API needs a token: send Authorization: Bearer <token>, the GLASSBOX_API_TOKEN or a user's token from GLASSBOX_API_USERS.",
        );
      return credential.userId === undefined ? {} : { userId: credential.userId };
    }
    // Without a token only this machine may call: a page from elsewhere (DNS rebinding) is refused.
    if (!isLoopbackHostHeader(request.headers.host))
      throw new HttpError(403, "Without GLASSBOX_API_TOKEN this API answers only requests to 127.0.0.1 or localhost.");
    return {};
  };
}

/** An HttpError as its JSON answer; a 401 says which scheme to use. */
export function sendHttpError(response: ServerResponse, error: HttpError): void {
  const headers: Record<string, string> = error.status === 401 ? { "www-authenticate": 'Bearer realm="glassbox"' } : {};
  sendJson(response, error.status, { error: error.message, ...error.extra }, headers);
}

/** Whether an address is this machine's own. */
export function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

function isLoopbackHostHeader(header: string | undefined): boolean {
  const name = (header ?? "")
    .replace(/:\d+$/, "")
    .replace(/^\[(.*)\]$/, "$1")
    .toLowerCase();
  return isLoopback(name);
}
