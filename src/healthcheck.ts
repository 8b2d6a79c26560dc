/**
 * The container image's HEALTHCHECK: asks this process's /readyz on the port the settings give it
 * (GLASSBOX_HEALTH_PORT, else the web server's GLASSBOX_WEB_PORT) and exits 0 when it is ready, 1
 * when not; what /readyz said is printed, so `docker inspect` shows which part is not ready.
 */
const env = process.env;
const port = env.GLASSBOX_HEALTH_PORT?.trim() || env.GLASSBOX_WEB_PORT?.trim() || "8787";
const configured = env.GLASSBOX_WEB_HOST?.trim() || "127.0.0.1";
const host = ["0.0.0.0", "::"].includes(configured) ? "127.0.0.1" : configured;
const url = `http://${host.includes(":") ? `[${host}]` : host}:${port}/readyz`;

try {
  const response = await fetch(url, { signal: AbortSignal.timeout(4_000) });
  process.stdout.write(`${(await response.text()).slice(0, 2_000)}\n`);
  process.exitCode = response.status === 200 ? 0 : 1;
} catch (error) {
  process.stdout.write(`${url} did not answer (${(error as Error).name})\n`);
  process.exitCode = 1;
}
