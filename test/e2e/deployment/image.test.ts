// The container image, built from the Dockerfile with podman and run as a team would: as its
// non-root user, with a read-only root file system and one data volume, against the scripted model
// server; ready by /readyz and by the image's own HEALTHCHECK; stopped by SIGTERM with exit code 0;
// and in the `scale` shape, an ingress and two workers on this machine's PostgreSQL, to an answer.
// The base image is made offline by scripts/offline-base-image.sh (no image registry is reachable
// here). compose.yaml is read by podman-compose. Needs podman, runc, debootstrap and podman-compose,
// as root; where they are missing it says so by name.
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { copyFileSync, existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { startScriptedModelServer, type ScriptedModelServer } from "../../../src/testing/scripted-model-server.js";
import { createTestDatabase, TEST_DATABASE_URL, type TestDatabase } from "../fixtures/queue-database.js";
import { fetchJson as json, freePort } from "../../helpers/http.js";

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL("../../../", import.meta.url));
const IMAGE = `localhost/glassbox:e2e`;
const TOKEN = "image-test-service-token";
const WAIT = { timeout: 60_000, interval: 250 };

const onPath = (command: string) =>
  (process.env.PATH ?? "").split(":").some((folder) => existsSync(join(folder, command)));
const missing = [
  ...["podman", "runc", "debootstrap", "podman-compose"].filter((command) => !onPath(command)),
  ...(process.getuid?.() === 0 ? [] : ["root"]),
];

/** podman with this machine's needs: no ulimits or systemd cgroups to set, and the runc runtime. */
function podman(args: string[], timeout = 120_000) {
  return run("podman", ["--runtime", "runc", ...args], { env: process.env, timeout, maxBuffer: 32 * 1024 * 1024 });
}

/** Sends a message through the HTTP API and waits for the run's answer. */
async function answerOf(web: string, input: string): Promise<Record<string, unknown>> {
  const headers = { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" };
  const sent = await json(`${web}/api/runs`, {
    method: "POST",
    headers,
    body: JSON.stringify({ session: `image-${randomBytes(3).toString("hex")}`, input }),
  });
  expect(sent.status).toBe(202);
  return vi.waitFor(async () => {
    const read = await json(`${web}/api/runs/${sent.body.runId as string}`, { headers });
    if (read.body.done !== true) throw new Error(`run ${String(read.body.status)}`);
    return read.body;
  }, WAIT);
}

const containers: string[] = [];
const volumes: string[] = [];
const databases: TestDatabase[] = [];

/** Starts the image detached, on the host's network, with a read-only root, `volume` (else an anonymous one) as /data, and `env`. */
async function start(name: string, env: Record<string, string>, volume?: string): Promise<string> {
  const id = `glassbox-e2e-${name}-${randomBytes(3).toString("hex")}`;
  containers.push(id);
  const settings = Object.entries(env).flatMap(([key, value]) => ["-e", `${key}=${value}`]);
  await podman([
    "run",
    "-d",
    "--name",
    id,
    "--network=host",
    "--read-only",
    ...(volume ? ["-v", `${volume}:/data`] : []),
    ...settings,
    IMAGE,
  ]);
  return id;
}

const ready = (healthPort: number) =>
  vi.waitFor(async () => expect((await json(`http://127.0.0.1:${healthPort}/readyz`)).status).toBe(200), WAIT);

async function stopped(id: string): Promise<number> {
  await podman(["stop", "--time", "30", id]);
  const { stdout } = await podman(["inspect", id, "--format", "{{.State.ExitCode}}"]);
  return Number(stdout.trim());
}

// Exactly one of the two describes exists: where podman can run, the image's tests; elsewhere, one
// test that names what is missing (so nothing is quietly skipped).
if (missing.length === 0)
  describe("the container image (podman)", () => {
    let model: ScriptedModelServer;

    beforeAll(async () => {
      if (!process.env.CONTAINERS_CONF) {
        const conf = join(mkdtempSync(join(tmpdir(), "glassbox-podman-")), "containers.conf");
        writeFileSync(conf, '[containers]\ndefault_ulimits = []\n[engine]\ncgroup_manager = "cgroupfs"\n');
        process.env.CONTAINERS_CONF = conf;
      }
      await run(join(ROOT, "scripts/offline-base-image.sh"), [], { env: process.env, timeout: 300_000 });
      await podman(
        [
          "build",
          "--pull=never",
          "--network=host",
          "--format",
          "docker",
          "--build-arg",
          "VERSION=e2e",
          "-t",
          IMAGE,
          ROOT,
        ],
        900_000,
      );
      model = await startScriptedModelServer({ script: () => ({ content: "Hello from inside the container." }) });
    }, 1_200_000);

    afterAll(async () => {
      for (const id of containers) await podman(["rm", "-f", id]).catch(() => {});
      for (const volume of volumes) await podman(["volume", "rm", "-f", volume]).catch(() => {});
      for (const database of databases) await database.drop();
      await model?.close();
    }, 120_000);

    it("runs as its non-root user on a read-only root with a data volume, answers, is healthy, and stops on SIGTERM with 0", async () => {
      const volume = `glassbox-e2e-data-${randomBytes(3).toString("hex")}`;
      volumes.push(volume);
      await podman(["volume", "create", volume]);
      const [webPort, healthPort] = [await freePort(), await freePort()];
      const id = await start(
        "single",
        {
          OPENAI_BASE_URL: model.url,
          OPENAI_API_KEY: "sk-test-image",
          LLM_MODEL: "gpt-4o-mini",
          GLASSBOX_API_TOKEN: TOKEN,
          GLASSBOX_WEB_PORT: String(webPort),
          GLASSBOX_HEALTH_PORT: String(healthPort),
        },
        volume,
      );
      const { stdout: config } = await podman([
        "inspect",
        id,
        "--format",
        "{{.Config.User}} {{.HostConfig.ReadonlyRootfs}}",
      ]);
      expect(config.trim()).toBe("node true");
      await ready(healthPort);
      expect((await answerOf(`http://127.0.0.1:${webPort}`, "hello")).output).toBe("Hello from inside the container.");
      // The image's HEALTHCHECK asks the same route.
      await podman(["healthcheck", "run", id]);
      // What the run wrote is on the volume, written by the image's user.
      // Temporary files go to the volume too (TMPDIR); the root file system takes nothing.
      const { stdout: listed } = await podman([
        "exec",
        id,
        "sh",
        "-c",
        'id -u; ls /data; touch "$TMPDIR/probe" && echo temporary-ok; touch /app/x 2>&1 || true',
      ]);
      expect(listed).toMatch(/^1000\n/);
      expect(listed).toContain("glassbox.db");
      expect(listed).toContain("temporary-ok");
      expect(listed).toMatch(/Read-only file system/);
      const { stdout: labels } = await podman(["inspect", id, "--format", "{{json .Config.Labels}}"]);
      expect(JSON.parse(labels)).toMatchObject({
        "org.opencontainers.image.version": "e2e",
        "org.opencontainers.image.title": "glassbox",
      });
      expect(await stopped(id)).toBe(0);
    }, 180_000);

    it("compose.yaml: every glassbox container read-only, without capabilities, its settings from .env; two workers", async () => {
      const folder = mkdtempSync(join(tmpdir(), "glassbox-compose-"));
      copyFileSync(join(ROOT, "compose.yaml"), join(folder, "compose.yaml"));
      writeFileSync(join(folder, ".env"), "POSTGRES_PASSWORD=compose-test-password\nGLASSBOX_API_TOKEN=t\n");
      const { stdout } = await run("podman-compose", ["--dry-run", "up", "--no-build", "-d"], {
        cwd: folder,
        env: { ...process.env, IMAGE },
      });
      const commands = stdout.split("\n").filter((line) => line.startsWith("podman run "));
      const service = (name: string) => commands.filter((line) => line.includes(`com.docker.compose.service=${name} `));
      const glassbox = [...service("glassbox"), ...service("ingress"), ...service("worker")];
      expect(glassbox).toHaveLength(4);
      for (const command of glassbox) {
        expect(command).toContain("--read-only");
        expect(command).toContain("--cap-drop ALL");
        expect(command).toContain("--security-opt no-new-privileges:true");
        expect(command).toContain(`--env-file ${join(folder, ".env")}`);
        expect(command).toContain("--tmpfs /tmp");
      }
      expect(service("glassbox")[0]).toMatch(/-v \S+_glassbox-data:\/data .*-p 127\.0\.0\.1:8787:8787/);
      expect(service("worker")).toHaveLength(2);
      for (const command of [...service("ingress"), ...service("worker")])
        expect(command).toContain(
          "GLASSBOX_DATABASE_URL=postgres://glassbox:compose-test-password@postgres:5432/glassbox",
        );
    });

    describe.runIf(Boolean(TEST_DATABASE_URL))("the scale shape on PostgreSQL", () => {
      it("an ingress and two workers answer a message sent to the ingress, and each stops on SIGTERM with 0", async () => {
        const database = await createTestDatabase(TEST_DATABASE_URL as string);
        databases.push(database);
        const shared = { GLASSBOX_DATABASE_URL: database.url };
        const model_ = { OPENAI_BASE_URL: model.url, OPENAI_API_KEY: "sk-test-image", LLM_MODEL: "gpt-4o-mini" };
        const webPort = await freePort();
        const ingressHealth = await freePort();
        const firstHealth = await freePort();
        const secondHealth = await freePort();
        const ingress = await start("ingress", {
          ...shared,
          GLASSBOX_ROLE: "ingress",
          GLASSBOX_API_TOKEN: TOKEN,
          GLASSBOX_WEB_PORT: String(webPort),
          GLASSBOX_HEALTH_PORT: String(ingressHealth),
        });
        const workers = [
          await start("worker1", {
            ...shared,
            ...model_,
            GLASSBOX_ROLE: "worker",
            GLASSBOX_HEALTH_PORT: String(firstHealth),
          }),
          await start("worker2", {
            ...shared,
            ...model_,
            GLASSBOX_ROLE: "worker",
            GLASSBOX_HEALTH_PORT: String(secondHealth),
          }),
        ];
        for (const port of [ingressHealth, firstHealth, secondHealth]) await ready(port);
        expect((await answerOf(`http://127.0.0.1:${webPort}`, "hello at scale")).output).toBe(
          "Hello from inside the container.",
        );
        for (const id of [...workers, ingress]) expect(await stopped(id)).toBe(0);
      }, 180_000);
    });
  });

if (missing.length > 0)
  describe(`the container image: not run here (missing: ${missing.join(", ")})`, () => {
    it("names what it needs", () => {
      expect(missing.length).toBeGreaterThan(0);
    });
  });
