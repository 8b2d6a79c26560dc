import { execFile } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll } from "vitest";
import { startScriptedModelServer, type ScriptedModelServer } from "../../../src/testing/scripted-model-server.js";

export interface CliOutcome {
  code: number;
  stdout: string;
  stderr: string;
}

const CLI = fileURLToPath(new URL("../../../src/cli.ts", import.meta.url));
const TSX = import.meta.resolve("tsx");

/**
 * The real command line, in a child process, against a scripted model server that lives as long
 * as the test file (started and closed by its hooks). Each file gets its own data folder; the demo
 * shop is on, with its database there too.
 */
export function useCli() {
  let server: ScriptedModelServer | undefined;
  const dataDir = mkdtempSync(join(tmpdir(), "glassbox-cli-"));
  beforeAll(async () => {
    server = await startScriptedModelServer();
  });
  afterAll(async () => {
    await server?.close();
  });
  const modelServer = () => {
    if (!server) throw new Error("the scripted model server starts in beforeAll");
    return server;
  };

  /** `glassbox ...args` with the test's environment over the defaults, in `cwd`, reading `input`. */
  function glassbox(args: string[], env: Record<string, string> = {}, cwd?: string, input = ""): Promise<CliOutcome> {
    return new Promise((resolve) => {
      const child = execFile(
        process.execPath,
        ["--import", TSX, CLI, ...args],
        {
          cwd,
          env: {
            PATH: process.env.PATH ?? "",
            OPENAI_BASE_URL: modelServer().url,
            LLM_MODEL: "scripted-model",
            GLASSBOX_SHOP_DB: join(dataDir, "shop.db"),
            GLASSBOX_DEMO: "true",
            GLASSBOX_DB: join(dataDir, "glassbox.db"),
            ...env,
          },
        },
        (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
      );
      child.stdin?.end(input);
    });
  }

  return { server: modelServer, glassbox, dataDir };
}
