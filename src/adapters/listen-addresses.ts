/**
 * Where a server can be opened, given the address it listens on: from this machine, and, when it
 * listens on every address (0.0.0.0, ::), from other machines at this machine's own addresses.
 * Start lines and logs name these rather than a wildcard nobody can open.
 */
import { networkInterfaces } from "node:os";

export interface ListenAddresses {
  /** The address to open on this machine (loopback when the server listens on every address). */
  url: string;
  /** Listening on every address: the machine's other addresses it answers on, for another machine. */
  alsoAt: string[];
}

const WILDCARDS = new Set(["0.0.0.0", "::"]);

/** The addresses of a server listening on `host` and `port`, each as `http://host:port`. */
export function addressesOf(host: string, port: number): ListenAddresses {
  return {
    url: `http://${urlHost(host)}:${port}`,
    alsoAt: WILDCARDS.has(host) ? otherAddresses(host).map((address) => `http://${address}:${port}`) : [],
  };
}

/** The machine's own addresses other than loopback (IPv4 for 0.0.0.0; IPv6 too for ::), as URL hosts. */
function otherAddresses(host: string): string[] {
  return Object.values(networkInterfaces())
    .flat()
    .filter((entry) => entry !== undefined && !entry.internal && (host === "::" || entry.family === "IPv4"))
    .map((entry) => (entry?.family === "IPv6" ? `[${entry.address}]` : (entry?.address ?? "")))
    .filter((address) => address !== "" && !address.startsWith("[fe80"));
}

/** The host of the server's address as a page is opened: a wildcard address is reached on 127.0.0.1. */
function urlHost(host: string): string {
  if (WILDCARDS.has(host)) return "127.0.0.1";
  return host.includes(":") ? `[${host}]` : host;
}
