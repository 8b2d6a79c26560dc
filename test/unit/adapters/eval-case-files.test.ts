// Eval case files: named by glassbox from the run id, bounded in size, and read back only when they are cases.
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  EvalCaseTooLarge,
  evalCaseFileName,
  readEvalCases,
  writeEvalCase,
} from "../../../src/adapters/eval-case-files.js";
import { evalCaseOf } from "../../../src/agent/eval-case.js";

const folders: string[] = [];
const folder = () => {
  const made = mkdtempSync(join(tmpdir(), "glassbox-cases-"));
  folders.push(made);
  return made;
};
afterEach(() => {
  for (const made of folders.splice(0)) rmSync(made, { recursive: true, force: true });
});

const caseOf = (runId: string, answer = "Delivered.") =>
  evalCaseOf(
    {
      runId,
      userId: "web:api",
      request: { messages: [{ role: "user", content: "Where is my order?" }] },
      calls: [],
      original: {
        output: answer,
        stopReason: "final",
        toolCalls: [],
        steps: 1,
        promptTokens: 1,
        completionTokens: 1,
        cost: null,
        latencyMs: 1,
      },
    },
    { sessionId: "web:one", input: "Where is my order?", model: null },
  );

describe("eval case files", () => {
  it("are named from the run id, kept to safe characters, whatever it holds", () => {
    expect(evalCaseFileName("run_abc-123")).toBe("run-run_abc-123.json");
    expect(evalCaseFileName("../../etc/passwd")).toBe("run-etcpasswd.json");
    expect(() => evalCaseFileName("../..")).toThrow("cannot name a file");
  });

  it("are written whole into the folder, and a case over the limit is refused before anything is written", () => {
    const cases = join(folder(), "evals");
    const saved = writeEvalCase(cases, caseOf("run_1"));
    expect(saved.file).toBe(join(cases, "run-run_1.json"));
    expect(() => writeEvalCase(cases, caseOf("run_2", "x".repeat(3 * 1024 * 1024)))).toThrow(EvalCaseTooLarge);
    expect(readdirSync(cases)).toEqual(["run-run_1.json"]);
    expect(readEvalCases([cases]).map(({ evalCase }) => evalCase.runId)).toEqual(["run_1"]);
  });

  it("read back only as cases: anything else is one sentence naming the file", () => {
    const cases = folder();
    writeFileSync(join(cases, "other.json"), '{"hello": 1}');
    expect(() => readEvalCases([cases])).toThrow(
      `${join(cases, "other.json")} is not a glassbox eval case (no "format": "glassbox-eval-case")`,
    );
    expect(() => readEvalCases([join(cases, "missing")])).toThrow("There is no eval case file or folder");
  });
});
