import { join, relative } from "node:path";
import { parseArgs } from "node:util";
import { buildLambda, isLambdaName, LAMBDAS, type LambdaName, REPOSITORY_ROOT } from "./lambdaBundles.ts";

/**
 * Bundles the construct's Lambdas: `node scripts/buildLambdas.ts` writes dist/lambda/<name>/ for the package
 * (run by `npm run build`, hence by `prepack`). infra/lambdaCode.ts runs it with `--only <name> --outdir <dir>`
 * to bundle one function from source into a CDK asset folder.
 */
const { values } = parseArgs({
  options: {
    outdir: { type: "string" },
    only: { type: "string" },
    "migrations-dir": { type: "string" },
  },
  strict: true,
});

let names: readonly LambdaName[] = LAMBDAS;
if (values.only !== undefined) {
  if (!isLambdaName(values.only)) {
    throw new Error(`--only must be one of ${LAMBDAS.join(", ")}; got ${JSON.stringify(values.only)}`);
  }
  names = [values.only];
}
// With --only, --outdir is that function's folder; without it, the parent of one folder per function.
const outdir = values.outdir ?? join(REPOSITORY_ROOT, "dist", "lambda");
const migrationsDir = values["migrations-dir"];

const built = await Promise.all(
  names.map((name) =>
    buildLambda(name, values.only === undefined ? join(outdir, name) : outdir, {
      ...(migrationsDir === undefined ? {} : { migrationsDir }),
    }),
  ),
);
if (values.only === undefined) {
  for (const lambda of built) {
    const kb = (bytes: number) => `${Math.round(bytes / 1024)} KiB`;
    // stderr: this runs in `prepack`, and `npm pack --json` / `npm publish --json` own stdout.
    console.error(`${relative(process.cwd(), lambda.dir)}: index.mjs ${kb(lambda.bytes)}`);
  }
}
