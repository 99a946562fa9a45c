import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { AssetHashType, DockerImage } from "aws-cdk-lib";
import * as lambda from "aws-cdk-lib/aws-lambda";

/**
 * Where the construct's Lambdas get their code, decided once by where this module runs:
 *
 * - **prebuilt**, from an installed package: `npm run build` (hence `prepack`) bundled each handler into
 *   dist/lambda/<name>/ beside dist/infra/, where this module is compiled to. The user's app deploys those
 *   folders as they are: no esbuild, no Docker, no lock file of ours at synth time.
 * - **source**, in this repository (infra/*.ts run by Node 24, dist/lambda not beside them): each handler is
 *   bundled at synth time from functions/ by scripts/buildLambdas.ts, the same esbuild options the package uses,
 *   so the example stack and the tests deploy what the working tree holds.
 */

export type OutboxLambda = "relay" | "purge" | "migrate";

/** Lambda's Node 24 runtime imports `index.mjs` and calls its `handler` export. */
export const LAMBDA_HANDLER = "index.handler";

const PREBUILT_ROOT = fileURLToPath(new URL("../lambda/", import.meta.url));
const REPOSITORY_ROOT = fileURLToPath(new URL("..", import.meta.url));
const BUILD_SCRIPT = join(REPOSITORY_ROOT, "scripts", "buildLambdas.ts");

export const LAMBDA_CODE_ORIGIN: "prebuilt" | "source" = existsSync(join(PREBUILT_ROOT, "relay", "index.mjs"))
  ? "prebuilt"
  : "source";

/** The migrations the migrate Lambda carries unless the construct is given a folder of its own. */
export const DEFAULT_MIGRATIONS_DIR =
  LAMBDA_CODE_ORIGIN === "prebuilt"
    ? join(PREBUILT_ROOT, "migrate", "migrations")
    : join(REPOSITORY_ROOT, "migrations");

/**
 * The code of one of the construct's Lambdas. `migrationsDir` (migrate only) replaces the migrations the bundle
 * carries: the asset is then the bundle plus that folder's .sql files.
 */
export function outboxLambdaCode(name: OutboxLambda, options: { migrationsDir?: string } = {}): lambda.Code {
  const migrationsDir =
    name === "migrate" &&
    options.migrationsDir !== undefined &&
    options.migrationsDir !== DEFAULT_MIGRATIONS_DIR
      ? options.migrationsDir
      : undefined;
  if (LAMBDA_CODE_ORIGIN === "prebuilt") {
    const bundleDir = join(PREBUILT_ROOT, name);
    if (migrationsDir === undefined) return lambda.Code.fromAsset(bundleDir);
    return localAsset(bundleDir, (outputDir) => {
      copyFileSync(join(bundleDir, "index.mjs"), join(outputDir, "index.mjs"));
      mkdirSync(join(outputDir, "migrations"));
      for (const file of readdirSync(migrationsDir).filter((entry) => entry.endsWith(".sql"))) {
        copyFileSync(join(migrationsDir, file), join(outputDir, "migrations", file));
      }
    });
  }
  if (!existsSync(BUILD_SCRIPT)) {
    throw new Error(
      `aws-outbox-relay: no Lambda code: neither the prebuilt bundles (${PREBUILT_ROOT}) nor the build script ` +
        `(${BUILD_SCRIPT}) exist. An installed package carries dist/lambda; reinstall it.`,
    );
  }
  return localAsset(join(REPOSITORY_ROOT, "functions", name), (outputDir) => {
    const args = [BUILD_SCRIPT, "--only", name, "--outdir", outputDir];
    if (migrationsDir !== undefined) args.push("--migrations-dir", migrationsDir);
    // The Node that runs the CDK app (24: it runs infra/*.ts by stripping types) runs the build script too.
    const build = spawnSync(process.execPath, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    if (build.status !== 0) {
      throw new Error(
        `bundling the ${name} Lambda failed (${BUILD_SCRIPT}):\n${build.stderr}${build.error ?? ""}`,
      );
    }
  });
}

/**
 * An asset written by `write` into CDK's staging folder on this machine. The hash is the output's, so any change
 * under functions/ (or to the migrations) makes a new asset. The image is never pulled: `local` always succeeds
 * or throws, and CDK uses the image only when `local` returns false.
 */
function localAsset(sourceDir: string, write: (outputDir: string) => void): lambda.Code {
  return lambda.Code.fromAsset(sourceDir, {
    assetHashType: AssetHashType.OUTPUT,
    bundling: {
      image: DockerImage.fromRegistry("unused-local-bundling"),
      local: {
        tryBundle(outputDir) {
          write(outputDir);
          return true;
        },
      },
    },
  });
}
