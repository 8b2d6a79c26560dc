/**
 * The link from an answer to its run in the trace viewer, in the form the chat page uses
 * (`/trace#session=<session>&run=<run>`), on the address people reach the web server at
 * (GLASSBOX_PUBLIC_URL). The ids go in the fragment: the browser never sends them to a server.
 */

/** Makes the trace link of a run of `sessionId`; undefined without a public URL (then nothing links). */
export type TraceLink = (runId: string) => string;

export function traceUrl(publicUrl: string, sessionId: string, runId?: string): string {
  const run = runId ? `&run=${encodeURIComponent(runId)}` : "";
  return `${publicUrl}/trace#session=${encodeURIComponent(sessionId)}${run}`;
}

/** The links of one session's runs, or undefined when no public URL is set. */
export function traceLinkOf(publicUrl: string | undefined, sessionId: string): TraceLink | undefined {
  return publicUrl ? (runId) => traceUrl(publicUrl, sessionId, runId) : undefined;
}
