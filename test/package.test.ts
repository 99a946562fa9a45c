import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));

describe("the package's entry point", () => {
  // `npm test` builds before running the suite; this checks what a producer's `import` really gets.
  it("exports the write API, migration runner and relay engine, with type declarations", () => {
    const output = execFileSync(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `const m = await import(${JSON.stringify(pkg.name)}); console.log(Object.keys(m).sort().join(","))`,
      ],
      { cwd: new URL("..", import.meta.url), encoding: "utf8" },
    );
    const names = output.trim().split(",");
    expect(names).toEqual(
      expect.arrayContaining(["enqueue", "migrate", "runRelay", "ValidationError", "outboxNames"]),
    );
    const types = pkg.exports["."].types as string;
    expect(existsSync(new URL(`../${types}`, import.meta.url))).toBe(true);
    expect(readFileSync(new URL(`../${types}`, import.meta.url), "utf8")).toMatch(/enqueue/);
  });
});
