import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { defineConfig, type Plugin } from "vitest/config";
import { LIBRARIES } from "./test/produce/libraries/versions.ts";
import base from "./vitest.config.ts";

/**
 * The library tests (test/produce/libraries/) against the data libraries installed in another project, a service's
 * as `npm run test:libraries` builds it (scripts/testLibraries.ts): OUTBOX_TEST_LIBRARIES names that project's
 * folder. Each library's package (and its subpaths) is resolved from there instead of from this repository's
 * node_modules, and so is the Prisma client, which that project's `prisma generate` wrote. Everything else (pg,
 * the test support, the package's own sources) is this repository's.
 */
const project = process.env.OUTBOX_TEST_LIBRARIES;
if (project === undefined || !existsSync(join(project, "node_modules"))) {
  throw new Error(
    "OUTBOX_TEST_LIBRARIES must name a project folder with the data libraries installed: run `npm run test:libraries`",
  );
}
const packages = new Set(LIBRARIES.flatMap((library) => Object.keys(library.oldest)));
const packageOf = (specifier: string) =>
  specifier
    .split("/")
    .slice(0, specifier.startsWith("@") ? 2 : 1)
    .join("/");

function librariesOf(folder: string): Plugin {
  const importer = join(folder, "package.json");
  const packageImporter = join(folder, "node_modules", "aws-outbox-relay", "package.json");
  return {
    name: "outbox-libraries-of-a-project",
    enforce: "pre",
    async resolveId(source, requester) {
      if (source.endsWith("/prisma/generated/client.ts") && requester?.includes("/test/produce/libraries/")) {
        return join(folder, "prisma", "generated", "client.ts");
      }
      // pg: the app's in the library tests (the pool a test gives its library, as a service does: Drizzle 0.36 tells
      // a pool from a client by `instanceof` its own pg's Pool), the installed package's everywhere else (the
      // harness, the package's sources). They differ where a library pins a pg of its own (MikroORM 6).
      const name = packageOf(source);
      const inLibraryTest = /\/test\/produce\/libraries\/[^/]+\.test\.ts$/.test(requester ?? "");
      const from =
        name === "pg"
          ? inLibraryTest
            ? importer
            : packageImporter
          : packages.has(name)
            ? importer
            : undefined;
      if (from === undefined) return null;
      const resolved = await this.resolve(source, from, { skipSelf: true });
      if (resolved === null) throw new Error(`${source} is not installed in ${folder}`);
      return resolved;
    },
  };
}

// Not mergeConfig: it would add this include to the base's, which takes every test file.
export default defineConfig({
  ...base,
  plugins: [librariesOf(resolve(project))],
  test: {
    ...base.test,
    include: LIBRARIES.map((library) => `test/produce/libraries/${library.test}`),
    // MikroORM compares its packages' versions with the ones it finds from the working directory, this repository,
    // whose devDependencies are the newest release: the project's own packages are of one version (npm saw to it).
    env: { MIKRO_ORM_ALLOW_VERSION_MISMATCH: "1" },
  },
});
