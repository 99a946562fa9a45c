import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

/**
 * The layout's rules (CONTRIBUTING.md, "Where does my change go"), checked on the import graph of the source
 * itself: no cycle anywhere in functions/, infra/, cli/; the core never imports a handler, infra or the CLI; the
 * event contract (outbox/) and util/ are leaves; handlers stay thin.
 */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const CORE = join(ROOT, "functions/shared");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return name === "node_modules" ? [] : sourceFiles(path);
    return path.endsWith(".ts") ? [path] : [];
  });
}

const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s*"([^"]+)"/g;

/** Relative imports of one file, resolved to absolute paths. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  return [...text.matchAll(IMPORT)].flatMap(([, specifier = ""]) => {
    if (specifier.startsWith(".")) return [resolve(dirname(file), specifier)];
    return [];
  });
}

const files = ["functions", "infra", "cli"].flatMap((dir) => sourceFiles(join(ROOT, dir)));
const graph = new Map(files.map((file) => [file, importsOf(file)]));
const rel = (file: string) => relative(ROOT, file);
/** The ground of the core: the event contract (outbox/) and util/ import nothing else of ours. */
const inGround = (file: string) => ["outbox", "util"].some((room) => file.startsWith(`${join(CORE, room)}/`));

describe("the source layout", () => {
  it("has no import cycle in functions/, infra/ or cli/", () => {
    const cycles: string[] = [];
    const state = new Map<string, "open" | "done">();
    const visit = (file: string, path: string[]) => {
      if (state.get(file) === "done") return;
      if (state.get(file) === "open") {
        cycles.push([...path.slice(path.indexOf(file)), file].map(rel).join(" > "));
        return;
      }
      state.set(file, "open");
      for (const next of graph.get(file) ?? []) visit(next, [...path, file]);
      state.set(file, "done");
    };
    for (const file of files) visit(file, []);
    expect(cycles).toEqual([]);
  });

  it("keeps the core below handlers, infra and the CLI, and the event contract and util/ as its ground", () => {
    const wrong: string[] = [];
    for (const [file, imports] of graph) {
      if (!file.startsWith(`${CORE}/`)) continue;
      for (const target of imports) {
        const upward = !target.startsWith(`${CORE}/`);
        const outOfGround = inGround(file) && !inGround(target);
        if (upward || outOfGround) wrong.push(`${rel(file)} imports ${rel(target)}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it("keeps each Lambda handler under 60 lines", () => {
    for (const name of ["relay", "purge", "migrate"]) {
      const lines = readFileSync(join(ROOT, "functions", name, "handler.ts"), "utf8").split("\n").length;
      expect(lines, name).toBeLessThan(60);
    }
  });
});
