import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import {
  POSTGRES_VERSION_VARIABLE,
  POSTGRES_VERSIONS,
  type PostgresVersion,
} from "../local/backends/docker.ts";
import { REPOSITORY_ROOT } from "./lambdaBundles.ts";

/**
 * The Postgres version matrix: `npm run test:versions` runs the database-facing test files once per supported
 * major (OUTBOX_POSTGRES_VERSION=14..17, each on its own server: embedded binaries, or the pinned image with
 * Docker), one major after the other, and prints the time each took. `npm run test:versions -- 15 16` runs those
 * majors only (the workflow runs one per job). `npm test` runs everything on the newest major alone.
 *
 * Database-facing: every test file that takes a database from the harness (test/support/db.ts), except the CDK
 * and package files, whose database use does not depend on the server's version. Chosen by what a file imports,
 * so a new test file joins the matrix without being listed here.
 */
const { positionals } = parseArgs({ allowPositionals: true, strict: true });
const wanted = positionals.length === 0 ? [...POSTGRES_VERSIONS] : positionals;
for (const version of wanted) {
  if (!(POSTGRES_VERSIONS as readonly string[]).includes(version)) {
    throw new Error(
      `unknown Postgres major ${JSON.stringify(version)}: one of ${POSTGRES_VERSIONS.join(", ")}`,
    );
  }
}

function databaseTestFiles(): string[] {
  const root = join(REPOSITORY_ROOT, "test");
  return readdirSync(root, { recursive: true, encoding: "utf8" })
    .filter((name) => name.endsWith(".test.ts") && !/^(infra|package|chaos)\//.test(name))
    .filter((name) => /from "(\.\.?\/)+support\/db\.ts"/.test(readFileSync(join(root, name), "utf8")))
    .map((name) => `test/${name}`)
    .sort();
}

// The upgrade test runs after the others, by itself (vitest.upgrade.config.ts says why).
const files = databaseTestFiles().filter((file) => file !== "test/upgrade.test.ts");
const results: { version: PostgresVersion; seconds: number; ok: boolean }[] = [];
for (const version of wanted as PostgresVersion[]) {
  console.log(`\n=== Postgres ${version}: ${files.length} test files, then test/upgrade.test.ts ===`);
  const started = Date.now();
  const env = { ...process.env, [POSTGRES_VERSION_VARIABLE]: version };
  const suite = spawnSync("npx", ["vitest", "run", ...files], {
    cwd: REPOSITORY_ROOT,
    stdio: "inherit",
    env,
  });
  const upgrade = spawnSync("npx", ["vitest", "run", "--config", "vitest.upgrade.config.ts"], {
    cwd: REPOSITORY_ROOT,
    stdio: "inherit",
    env,
  });
  results.push({
    version,
    seconds: Math.round((Date.now() - started) / 1000),
    ok: suite.status === 0 && upgrade.status === 0,
  });
}
console.log("\nPostgres version matrix:");
for (const { version, seconds, ok } of results) {
  console.log(`  Postgres ${version}: ${ok ? "passed" : "FAILED"} in ${seconds} s`);
}
if (results.some((result) => !result.ok)) process.exitCode = 1;
