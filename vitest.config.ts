import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    projects: [
      // fast, in one process: test/unit mirrors src/
      { extends: true, test: { name: "unit", include: ["test/unit/**/*.test.ts"] } },
      // child processes, PostgreSQL (GLASSBOX_TEST_DATABASE_URL), Chromium
      { extends: true, test: { name: "e2e", include: ["test/e2e/**/*.test.ts"] } },
    ],
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
