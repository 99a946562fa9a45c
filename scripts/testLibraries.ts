import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import {
  installBeside,
  packPackage,
  preparePrismaClient,
  userNpmEnv,
} from "../test/produce/libraries/installs.ts";
import { LIBRARIES, type Library, packageSpecs } from "../test/produce/libraries/versions.ts";
import { REPOSITORY_ROOT } from "./lambdaBundles.ts";

/**
 * The data-library matrix: `npm run test:libraries` installs the packed package into an empty project, then, for
 * each library of test/produce/libraries/versions.ts at its oldest supported and at its newest release, into a
 * project with that library (as a service would: `npm install` of the tarball beside it, no flags, a fresh npm
 * cache so npm resolves against the registry as a user's does), and runs that library's test file against the
 * installed library (vitest.libraries.config.ts): commit, rollback, refused handle. `-- kysely prisma` runs those
 * libraries only; `--newest` only their newest releases (the scheduled CI job's question: did a new release break
 * us?). `--together` installs instead, after the empty project, beside every library at once, at their oldest
 * releases and at their newest, as a service with several of them has it (npm checks the libraries' peer ranges
 * against each other's and ours in one tree); it runs no library's tests. Prints what each step took; any step that
 * fails fails the run, an unreachable registry included.
 */
const { positionals, values } = parseArgs({
  allowPositionals: true,
  strict: true,
  options: { newest: { type: "boolean", default: false }, together: { type: "boolean", default: false } },
});
const wanted = positionals.map((name) => name.toLowerCase());
for (const name of wanted) {
  if (!LIBRARIES.some((library) => library.name.toLowerCase() === name)) {
    throw new Error(
      `unknown library ${JSON.stringify(name)}: one of ${LIBRARIES.map((l) => l.name).join(", ")}`,
    );
  }
}
const libraries = LIBRARIES.filter(
  (library) => wanted.length === 0 || wanted.includes(library.name.toLowerCase()),
);
const ages: ("oldest" | "newest")[] = values.newest ? ["newest"] : ["oldest", "newest"];

if (!existsSync(join(REPOSITORY_ROOT, "dist", "functions", "shared", "index.js"))) {
  throw new Error("dist/ is not built: run `npm run build` first (the packed package holds it)");
}
const scratch = realpathSync(mkdtempSync(join(tmpdir(), "outbox-libraries-")));
const env = userNpmEnv(join(scratch, "npm-cache"));
const results: { step: string; seconds: number; ok: boolean }[] = [];

async function step(name: string, work: () => Promise<boolean>) {
  console.log(`\n=== ${name} ===`);
  const started = Date.now();
  let ok = false;
  try {
    ok = await work();
  } catch (error) {
    console.error(error instanceof Error ? error.message : error);
  }
  results.push({ step: name, seconds: Math.round((Date.now() - started) / 1000), ok });
}

try {
  const tarball = packPackage(scratch, env);
  await step("the package in an empty project", async () => {
    await installBeside(join(scratch, "empty"), tarball, [], env);
    return true;
  });
  for (const age of values.together ? ages : []) {
    await step(`every library at once (${age}: ${packageSpecs(libraries, age).join(" ")})`, () =>
      installTogether(libraries, age, tarball),
    );
  }
  for (const library of values.together ? [] : libraries) {
    for (const age of ages) {
      await step(`${library.name} (${age}: ${packageSpecs([library], age).join(" ")})`, () =>
        testLibrary(library, age, tarball),
      );
    }
  }
} finally {
  rmSync(scratch, { recursive: true, force: true });
}

/** The libraries' packages all in one project beside the package; at `oldest`, each at exactly that release. */
async function installTogether(
  together: readonly Library[],
  age: "oldest" | "newest",
  tarball: string,
): Promise<boolean> {
  const project = join(scratch, `together-${age}`);
  await installBeside(project, tarball, packageSpecs(together, age), env);
  const installed: string[] = [];
  for (const library of together) {
    for (const [name, oldest] of Object.entries(library.oldest)) {
      const manifest = JSON.parse(readFileSync(join(project, "node_modules", name, "package.json"), "utf8"));
      if (age === "oldest" && manifest.version !== oldest) {
        throw new Error(`${name}: asked for ${oldest}, npm installed ${manifest.version}`);
      }
      installed.push(`${name}@${manifest.version}`);
    }
  }
  // Drizzle's and postgres.js's entries both name postgres.js.
  console.log(`installed without ERESOLVE: ${[...new Set(installed)].join(" ")}`);
  return true;
}

async function testLibrary(library: Library, age: "oldest" | "newest", tarball: string): Promise<boolean> {
  const project = join(scratch, `${library.name.toLowerCase().replace(/\W/g, "")}-${age}`);
  await installBeside(project, tarball, packageSpecs([library], age), env);
  const installed = Object.keys(library.oldest).map((name) => {
    const manifest = JSON.parse(readFileSync(join(project, "node_modules", name, "package.json"), "utf8"));
    return `${name}@${manifest.version}`;
  });
  console.log(`installed without ERESOLVE: ${installed.join(" ")}`);
  if (library.test === "prisma.test.ts") preparePrismaClient(project, env);
  const run = spawnSync(
    "npx",
    ["vitest", "run", "--config", "vitest.libraries.config.ts", `test/produce/libraries/${library.test}`],
    { cwd: REPOSITORY_ROOT, stdio: "inherit", env: { ...process.env, OUTBOX_TEST_LIBRARIES: project } },
  );
  return run.status === 0;
}

console.log("\nData-library matrix:");
for (const { step: name, seconds, ok } of results) {
  console.log(`  ${ok ? "passed" : "FAILED"} in ${String(seconds).padStart(3)} s: ${name}`);
}
if (results.length === 0 || results.some((result) => !result.ok)) process.exitCode = 1;
