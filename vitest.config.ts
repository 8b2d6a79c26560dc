import { availableParallelism } from "node:os";
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    projects: [
      // fast, in one process per worker: test/unit mirrors src/
      {
        extends: true,
        test: {
          name: "unit",
          include: ["test/unit/**/*.test.ts"],
          // A worker runs file after file on the modules it has loaded: the SDKs (openai, Bolt,
          // discord.js) and the tokenizer ranks load once per worker, not once per file. What a
          // test leaves in the process (the model servers known to refuse an option, say) must not
          // reach another file's test: see test/unit/agent/llm/client.test.ts.
          isolate: false,
          // A worker more than cores (Vitest's default is one fewer): much of a unit test is waiting
          // on local sockets and timers, which the other workers fill.
          maxWorkers: availableParallelism() + 1,
          sequence: { groupOrder: 0 },
        },
      },
      // child processes, PostgreSQL (GLASSBOX_TEST_DATABASE_URL), Chromium; after the unit tier
      { extends: true, test: { name: "e2e", include: ["test/e2e/**/*.test.ts"], sequence: { groupOrder: 1 } } },
    ],
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
