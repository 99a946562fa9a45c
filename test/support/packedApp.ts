import { execFileSync, type SpawnSyncReturns, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/**
 * A user's fresh app with the packed tarball installed, as npm installs it: `npm pack` of what `npm run build`
 * produced (`--ignore-scripts`: prepack's rebuild would delete dist/ under the other test files), then
 * `npm install ./aws-outbox-relay-x.y.z.tgz` and the app's own dependencies, at the versions this repository
 * pins. test/package/nodeMajors.test.ts (the producer on each Node major) and readme.test.ts (the README's story)
 * build their apps here.
 */

export const REPOSITORY = realpathSync(new URL("../..", import.meta.url));

/**
 * No npm_*, NODE_OPTIONS or VITEST from this run; npm prefers its cache (it holds what `npm ci` fetched). How a user's
 * fresh npm resolves the package against the registry's releases of today is test/package/install.test.ts's job
 * (an empty cache of its own): these apps test what the package does once installed.
 */
export function appEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (!/^(npm_|NODE_OPTIONS$|VITEST|OUTBOX_|DATABASE_)/.test(name)) env[name] = value;
  }
  return { ...env, npm_config_prefer_offline: "true", npm_config_update_notifier: "false", ...extra };
}

/** `name@version` as this repository has it installed, so the app gets what the tests here ran with. */
function pinned(names: string[]): string[] {
  if (names.length === 0) return [];
  const versions = JSON.parse(
    execFileSync("npm", ["ls", "--json", "--depth=0", ...names], {
      cwd: REPOSITORY,
      encoding: "utf8",
      env: appEnv(),
    }),
  ).dependencies as Record<string, { version: string }>;
  return names.map((name) => {
    const version = versions[name]?.version;
    if (version === undefined) throw new Error(`${name} is not installed in this repository: run \`npm ci\``);
    return `${name}@${version}`;
  });
}

export interface PackedApp {
  /** The app's folder. */
  app: string;
  /** The tarball, as `npm pack` wrote it. */
  tarball: string;
}

/**
 * Packs the package into `scratch` and makes `scratch/app` a fresh ESM app (package name `name`) with the tarball
 * and `dependencies` installed, and `devDependencies` as dev dependencies, each at this repository's version.
 */
export function packedApp(
  scratch: string,
  options: { name: string; dependencies?: string[]; devDependencies?: string[] },
): PackedApp {
  if (!existsSync(join(REPOSITORY, "dist", "functions", "shared", "index.js"))) {
    throw new Error("dist/ is not built: run `npm run build` first (`npm test` does)");
  }
  const app = join(scratch, "app");
  mkdirSync(app);
  const [packed] = JSON.parse(
    execFileSync("npm", ["pack", "--json", "--ignore-scripts", "--pack-destination", scratch], {
      cwd: REPOSITORY,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
      env: appEnv(),
    }),
  ) as { filename: string }[];
  const tarball = join(scratch, packed?.filename ?? "");
  writeFileSync(
    join(app, "package.json"),
    JSON.stringify({ name: options.name, private: true, type: "module" }),
  );
  const install = (args: string[]) =>
    execFileSync("npm", ["install", "--no-audit", "--no-fund", ...args], {
      cwd: app,
      stdio: ["ignore", "pipe", "pipe"],
      env: appEnv(),
    });
  install([tarball, ...pinned(options.dependencies ?? [])]);
  const dev = pinned(options.devDependencies ?? []);
  if (dev.length > 0) install(["--save-dev", ...dev]);
  return { app, tarball };
}

/** The package.json of the app, as npm left it. */
export function appManifest(app: string): { dependencies?: Record<string, string> } {
  return JSON.parse(readFileSync(join(app, "package.json"), "utf8"));
}

/** The app's own TypeScript over its tsconfig.json, as the user's build would run it; check `status` and the output. */
export function typeCheckApp(app: string): SpawnSyncReturns<string> {
  return spawnSync(process.execPath, [join(app, "node_modules", "typescript", "bin", "tsc"), "-p", "."], {
    cwd: app,
    encoding: "utf8",
    env: appEnv(),
  });
}
