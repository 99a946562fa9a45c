import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";

const root = new URL("../../", import.meta.url).pathname;

/**
 * An application without @opentelemetry/api (an optional peer dependency): resolving it fails as it would when it
 * is not installed, and the write API still loads and works, capturing nothing and starting no span. The same
 * run shows the root import loads neither OpenTelemetry nor the AWS SDK up front.
 */
describe("without @opentelemetry/api installed", () => {
  it("loads the write API without it, captures nothing and runs work without a span", () => {
    const output = execFileSync(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `import { registerHooks } from "node:module";
const resolved = [];
registerHooks({ resolve(specifier, context, next) {
  if (specifier.startsWith("@opentelemetry/")) {
    throw Object.assign(new Error("Cannot find package '" + specifier + "'"), { code: "ERR_MODULE_NOT_FOUND" });
  }
  const result = next(specifier, context); resolved.push(result.url); return result;
} });
const api = await import(${JSON.stringify(`${root}functions/shared/index.ts`)});
const atImport = [...resolved];
const tracing = await import(${JSON.stringify(`${root}functions/shared/observe/tracing.ts`)});
const captured = await tracing.activeTraceContext();
const ranWithoutSpan = await tracing.inSpan(await tracing.openTelemetry(), "x", { kind: "producer", attributes: {} },
  async (span) => span === undefined);
console.log(JSON.stringify({ enqueue: typeof api.enqueue, captured: captured ?? null, ranWithoutSpan, atImport }));`,
      ],
      { cwd: root, encoding: "utf8" },
    );
    const result = JSON.parse(output) as {
      enqueue: string;
      captured: unknown;
      ranWithoutSpan: boolean;
      atImport: string[];
    };
    expect(result).toMatchObject({ enqueue: "function", captured: null, ranWithoutSpan: true });
    expect(result.atImport.filter((url) => /@opentelemetry|@aws-sdk|@smithy/.test(url))).toEqual([]);
  });
});
