import { spawnSync } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEmptyDatabase } from "../support/db.ts";
import { appEnv, packedApp, typeCheckApp } from "../support/packedApp.ts";

/**
 * The README's producer (docs/examples/producer.js, shown verbatim there: install.test.ts checks it) in a fresh
 * app that has nothing but the packed tarball and `pg`, installed by npm as a user would (`npm install
 * ./aws-outbox-relay-x.y.z.tgz pg`, against the registry through an npm cache that starts empty), type-checked against the package's declarations and
 * run on each Node major the package supports: a commit keeps the order and its event, a failed enqueue rolls both
 * back. Which majors: OUTBOX_TEST_NODE_MAJORS (default 22,24,26, the majors Node supports: CONTRIBUTING.md's
 * "Node versions"; the CI matrix runs one per job). A major that is not
 * on this machine fails, saying where to get it: never a skip.
 */

const REPOSITORY = realpathSync(new URL("../..", import.meta.url));
const MAJORS = (process.env.OUTBOX_TEST_NODE_MAJORS ?? "22,24,26").split(",").map((major) => major.trim());
/** Where the majors this repository does not run on come from (see nodeBinaries). */
const HOW_TO_GET = {
  "22": "the test installs it from the npm registry (node-<platform>-<arch>, pinned in NODE_PACKAGES)",
  "24": "`npm ci` installs it as the `node` devDependency (node_modules/node/bin/node)",
  "26": "the test installs it from the npm registry (node-<platform>-<arch>, pinned in NODE_PACKAGES)",
} as Record<string, string>;

/** npm's own script, to run it on each Node major (the `npm` on PATH runs on whichever node comes first). */
const NPM_CLI = realpathSync(
  (process.env.PATH ?? "")
    .split(delimiter)
    .map((dir) => join(dir, "npm"))
    .find((file) => existsSync(file) && !file.startsWith(REPOSITORY)) ?? "npm",
);
let tarball: string;

const scratch = realpathSync(mkdtempSync(join(tmpdir(), "outbox-node-majors-")));
const app = join(scratch, "app");

/**
 * Majors neither the repository nor the machine brings, installed by the test from npm's per-platform Node packages
 * (what the `node` package's own installer fetches; they have no install script) into node_modules/.cache. Not a
 * devDependency: an aliased `node@22` links its `node` bin over the Node 24 that npm scripts must run on.
 */
const NODE_PACKAGES: Record<string, string> = { "22": "22.23.3", "26": "26.10.0" };
const NODE_CACHE = join(REPOSITORY, "node_modules", ".cache", "outbox-node-majors");

function installedNode(major: string): string | undefined {
  const version = NODE_PACKAGES[major];
  if (version === undefined) return undefined;
  const name = `node-${process.platform}-${process.arch}`;
  const prefix = join(NODE_CACHE, version);
  const binary = join(prefix, "node_modules", name, "bin", "node");
  if (!existsSync(binary)) {
    const install = spawnSync(
      process.execPath,
      [
        NPM_CLI,
        "install",
        "--no-save",
        "--no-package-lock",
        "--no-audit",
        "--no-fund",
        "--prefix",
        prefix,
        `${name}@${version}`,
      ],
      { encoding: "utf8", timeout: 300_000 },
    );
    if (install.status !== 0) {
      throw new Error(`could not install Node ${version} (${name}) from the npm registry: ${install.stderr}`);
    }
  }
  return binary;
}

/** Every `node` this machine has: this process's, the `node` devDependency's, each one on PATH, and NODE_PACKAGES'. */
function nodeBinaries(): Map<string, string> {
  const candidates = [
    process.execPath,
    join(REPOSITORY, "node_modules", "node", "bin", "node"),
    ...(process.env.PATH ?? "").split(delimiter).map((dir) => join(dir, "node")),
  ];
  const byMajor = new Map<string, string>();
  for (const binary of candidates) {
    if (!existsSync(binary)) continue;
    const version = spawnSync(binary, ["--version"], { encoding: "utf8" }).stdout?.trim() ?? "";
    const major = /^v(\d+)\./.exec(version)?.[1];
    if (major !== undefined && !byMajor.has(major)) byMajor.set(major, binary);
  }
  return byMajor;
}

beforeAll(() => {
  ({ tarball } = packedApp(scratch, {
    name: "orders-service",
    dependencies: ["pg"],
    devDependencies: ["typescript", "@types/node", "@types/pg"],
  }));
  copyFileSync(join(REPOSITORY, "docs", "examples", "producer.js"), join(app, "producer.js"));
}, 300_000);

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe("the installed package in a fresh app", () => {
  it("has only the package, pg and their dependencies: no CDK, no data library", () => {
    const top = readdirSync(join(app, "node_modules"));
    expect(top).toEqual(expect.arrayContaining(["aws-outbox-relay", "pg"]));
    for (const absent of [
      "aws-cdk-lib",
      "constructs",
      "drizzle-orm",
      "kysely",
      "knex",
      "typeorm",
      "postgres",
    ]) {
      expect(top, absent).not.toContain(absent);
    }
  });

  it("type-checks the README's producer against the package's declarations (strict, nodenext)", () => {
    writeFileSync(
      join(app, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "es2022",
          module: "nodenext",
          strict: true,
          // The example is JavaScript: its parameters are untyped; everything it calls is checked.
          noImplicitAny: false,
          allowJs: true,
          checkJs: true,
          noEmit: true,
          types: ["node"],
        },
        files: ["producer.js"],
      }),
    );
    const check = typeCheckApp(app);
    expect(check.status, `${check.stdout}${check.stderr}`).toBe(0);
  }, 120_000);

  const binaries = nodeBinaries();
  it.each(MAJORS)(
    "runs it on Node %s: commit keeps the order and its event, a failed enqueue rolls both back",
    async (major) => {
      const binary = binaries.get(major) ?? installedNode(major);
      if (binary === undefined) {
        throw new Error(
          `Node ${major} is not on this machine (found ${[...binaries.keys()].join(", ") || "none"}): ${HOW_TO_GET[major] ?? `install Node ${major}`}`,
        );
      }
      // npm on that Node, as strict as a user may set it: `engines` must let it install.
      const npm = spawnSync(
        binary,
        [NPM_CLI, "install", "--dry-run", "--engine-strict", "--no-audit", "--no-fund", tarball],
        { cwd: app, encoding: "utf8", timeout: 120_000, env: appEnv() },
      );
      expect(npm.status, `${npm.stdout}${npm.stderr}`).toBe(0);
      const database = await createEmptyDatabase();
      try {
        writeFileSync(
          join(app, "run.mjs"),
          `import pg from "pg";
import { migrate } from "aws-outbox-relay/migrations";

const admin = new pg.Pool({ connectionString: process.env.DATABASE_URL });
await migrate(admin);
await admin.query("create table orders (id bigint generated always as identity primary key, customer text not null, total int not null)");
const { placeOrder } = await import("./producer.js");
const committed = await placeOrder("c-1", 4200);
// A lone surrogate: Postgres stores the order's text (as U+FFFD), enqueue() refuses the payload (jsonb would).
const failed = await placeOrder("\\uD800", 1).then(() => "committed", (error) => error.name);
const orders = (await admin.query("select id::text, customer from orders order by id")).rows;
const events = (await admin.query("select aggregate_id, event_type from outbox_events order by seq")).rows;
console.log("RESULT " + JSON.stringify({ version: process.version, committed, failed, orders, events }));
process.exit(0);
`,
        );
        const run = spawnSync(binary, ["run.mjs"], {
          cwd: app,
          encoding: "utf8",
          timeout: 60_000,
          env: appEnv({ DATABASE_URL: database.url }),
        });
        expect(run.status, `${run.stdout}${run.stderr}`).toBe(0);
        const line = run.stdout.split("\n").find((text) => text.startsWith("RESULT ")) ?? "";
        const result = JSON.parse(line.slice("RESULT ".length));
        expect(result.version).toMatch(new RegExp(`^v${major}\\.`));
        expect(result.failed).toBe("ValidationError");
        expect(result.orders).toEqual([{ id: result.committed, customer: "c-1" }]);
        expect(result.events).toEqual([
          { aggregate_id: `order-${result.committed}`, event_type: "order.placed" },
        ]);
      } finally {
        await database.drop();
      }
    },
    120_000,
  );
});
