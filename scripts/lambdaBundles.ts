import { copyFile, mkdir, readdir, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type BuildOptions, build } from "esbuild";

/**
 * How the construct's Lambdas are bundled: one definition for the package's prebuilt code (`npm run build`,
 * `prepack`), for the construct bundling from source in this repository (infra/lambdaCode.ts runs
 * buildLambdas.ts), and for the bench that measures the bundle's size and cold start.
 */

export const REPOSITORY_ROOT = fileURLToPath(new URL("..", import.meta.url));

/** The Lambdas, by the folder of their handler under functions/; each becomes `<outdir>/<name>/index.mjs`. */
export const LAMBDAS = ["relay", "purge", "migrate"] as const;
export type LambdaName = (typeof LAMBDAS)[number];

/** Lambda's Node 24 runtime imports `index.mjs` as ESM and calls its `handler` export (`index.handler`). */
export const BUNDLE_FILE = "index.mjs";

export function isLambdaName(name: string): name is LambdaName {
  return (LAMBDAS as readonly string[]).includes(name);
}

/**
 * esbuild options for one Lambda: ESM for node24 (the runtime; the code is the same on arm64 and x86),
 * minified except for names, and without a source map: a map that works without the sources it names would need
 * them inside it (`sourcesContent`), 2.6 MB for the relay alone (2.2 MB packed for the whole package instead of
 * 1.1), most of it the bundled AWS SDK's sources. Keeping identifiers makes stack traces name the real functions
 * (`at claimBatch (file:///var/task/index.mjs:…)`) for a fraction of that.
 */
export function bundleOptions(name: LambdaName, outdir: string): BuildOptions {
  return {
    entryPoints: [join(REPOSITORY_ROOT, "functions", name, "handler.ts")],
    outfile: join(outdir, BUNDLE_FILE),
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node24",
    // pg and the Powertools ship CommonJS and ESM; ESM first lets esbuild tree-shake them.
    mainFields: ["module", "main"],
    minifyWhitespace: true,
    minifySyntax: true,
    // The AWS SDK is bundled (nothing is external) at the versions package-lock.json pins, rather than taken from
    // the runtime, whose copy AWS updates under us: what the tests ran is what runs. Minified and tree-shaken it is
    // most of each bundle (docs/deploy.md has the sizes), and a bundled SDK starts no slower than the runtime's.
    // ESM output for CommonJS dependencies (pg): give them a `require`.
    banner: {
      js: "import { createRequire as __outboxCreateRequire } from 'node:module'; const require = __outboxCreateRequire(import.meta.url);",
    },
    logLevel: "error",
  };
}

export interface BuiltLambda {
  name: LambdaName;
  dir: string;
  bytes: number;
}

/**
 * Bundles one Lambda into `outdir` (emptied first: the folder is the Lambda's whole code asset). The migrate
 * Lambda gets the migration files beside its bundle, where defaultMigrationsDir() finds them.
 */
export async function buildLambda(
  name: LambdaName,
  outdir: string,
  options: { migrationsDir?: string } = {},
): Promise<BuiltLambda> {
  await rm(outdir, { recursive: true, force: true });
  await mkdir(outdir, { recursive: true });
  await build(bundleOptions(name, outdir));
  if (name === "migrate") {
    // The top-level .sql files only: what the migration runner reads (and hashMigrations() hashes).
    const from = options.migrationsDir ?? join(REPOSITORY_ROOT, "migrations");
    await mkdir(join(outdir, "migrations"));
    for (const file of (await readdir(from)).filter((entry) => entry.endsWith(".sql"))) {
      await copyFile(join(from, file), join(outdir, "migrations", file));
    }
  }
  const file = join(outdir, BUNDLE_FILE);
  return {
    name,
    dir: outdir,
    bytes: (await stat(file)).size,
  };
}
