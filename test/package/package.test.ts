import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8"));

describe("the package's entry point", () => {
  // `npm test` builds before running the suite; this checks what a producer's `import` really gets.
  it("exports the write API and nothing of the relay, with type declarations; the jobs are subpaths", () => {
    const output = execFileSync(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `const m = await import(${JSON.stringify(pkg.name)}); console.log(Object.keys(m).sort().join(","))`,
      ],
      { cwd: new URL("../..", import.meta.url), encoding: "utf8" },
    );
    const names = output.trim().split(",");
    expect(names).toEqual(expect.arrayContaining(["enqueue", "ValidationError", "outboxNames"]));
    // A producer's import loads no relay, purge or migration code (and so no AWS SDK): those are subpaths.
    for (const name of ["migrate", "runRelay", "relayRound", "runPurge", "createDatabasePool"]) {
      expect(names).not.toContain(name);
    }
    const subpaths = {
      "/relay": ["relayInvocation", "relayConfigFromEnv", "createDestination"],
      "/purge": ["runPurge", "readOutboxSnapshot"],
      "/db": ["createDatabasePool", "databaseSourceFromEnv"],
      "/migrations": ["migrate"],
    };
    for (const [subpath, expected] of Object.entries(subpaths)) {
      const exported = execFileSync(
        process.execPath,
        [
          "--input-type=module",
          "-e",
          `const m = await import(${JSON.stringify(pkg.name + subpath)}); console.log(Object.keys(m).join(","))`,
        ],
        { cwd: new URL("../..", import.meta.url), encoding: "utf8" },
      );
      expect(exported.trim().split(","), subpath).toEqual(expect.arrayContaining(expected));
    }
    const types = pkg.exports["."].types as string;
    expect(existsSync(new URL(`../../${types}`, import.meta.url))).toBe(true);
    expect(readFileSync(new URL(`../../${types}`, import.meta.url), "utf8")).toMatch(/enqueue/);
  });
});

describe("the producer's import", () => {
  it("loads no AWS SDK, CDK, relay module or data library (only the write API and what it needs)", () => {
    const output = execFileSync(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `import { registerHooks } from "node:module";
const resolved = [];
registerHooks({ resolve(specifier, context, next) { const result = next(specifier, context); resolved.push(result.url); return result; } });
await import(${JSON.stringify(pkg.name)});
console.log(JSON.stringify(resolved));`,
      ],
      { cwd: new URL("../..", import.meta.url), encoding: "utf8" },
    );
    const resolved = JSON.parse(output) as string[];
    expect(resolved.some((url) => url.includes("/dist/functions/shared/produce/enqueue.js"))).toBe(true);
    expect(resolved.filter((url) => /@aws-sdk|@smithy|aws-cdk-lib|\/relay\/|\/purge\//.test(url))).toEqual(
      [],
    );
    // Nor any data library: enqueue knows their transaction handles by shape (produce/transactionHandle.ts).
    expect(
      resolved.filter((url) =>
        /\/node_modules\/(pg|pg-[a-z-]+|postgres|drizzle-orm|kysely|@prisma|prisma|knex|typeorm|@mikro-orm)\//.test(
          url,
        ),
      ),
    ).toEqual([]);
  });
});

/**
 * Which AWS SDK clients each entry point loads (issue 38): `/relay` loaded all six (1.36 s) for an SQS-only relay and
 * `/db` loaded Secrets Manager for a plain DATABASE_URL. Each runs in a child process against the built package, no
 * network reached (every endpoint is a closed port).
 */
describe("the AWS SDK clients each entry point loads", () => {
  function loadedClients(script: string): Record<string, string[]> {
    const output = execFileSync(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `import { registerHooks } from "node:module";
const resolved = [];
registerHooks({ resolve(specifier, context, next) { const result = next(specifier, context); resolved.push(result.url); return result; } });
const clients = () => [...new Set(resolved.map((url) => /@aws-sdk[/](client-[a-z0-9-]+)[/]/.exec(url)?.[1]).filter(Boolean))].sort();
const steps = {};
${script}
console.log(JSON.stringify(steps));`,
      ],
      {
        cwd: new URL("../..", import.meta.url),
        encoding: "utf8",
        env: {
          ...process.env,
          AWS_REGION: "us-east-1",
          AWS_ACCESS_KEY_ID: "test",
          AWS_SECRET_ACCESS_KEY: "test",
          AWS_ENDPOINT_URL: "http://127.0.0.1:9",
        },
      },
    );
    return JSON.parse(output) as Record<string, string[]>;
  }

  it("/relay: none on import, then only the clients of the destinations it is given", () => {
    const steps = loadedClients(`
const relay = await import(${JSON.stringify(`${pkg.name}/relay`)});
steps.imported = clients();
const options = { sockets: 1, requestTimeoutMs: 1000, region: "us-east-1" };
const sqs = await relay.createDestination(
  { kind: "sqs-fifo", queueUrl: "https://sqs.us-east-1.amazonaws.com/123456789012/orders.fifo", maxMessageBytes: 262144 },
  options,
);
steps.sqsFifo = clients();
sqs.destroy();
const routes = await relay.createDestination(
  relay.destinationSettingFromEnv({
    OUTBOX_ROUTES: JSON.stringify([{ match: {}, destination: { kind: "sns", topicArn: "arn:aws:sns:us-east-1:123456789012:orders" } }]),
  }),
  options,
);
steps.plusSns = clients();
routes.destroy();`);
    expect(steps).toEqual({ imported: [], sqsFifo: ["client-sqs"], plusSns: ["client-sns", "client-sqs"] });
  });

  it("/db: none for a URL, Secrets Manager only for a secret", () => {
    const steps = loadedClients(`
const db = await import(${JSON.stringify(`${pkg.name}/db`)});
steps.imported = clients();
const pool = await db.createDatabasePool(db.databaseSourceFromEnv({ DATABASE_URL: "postgres://u:p@127.0.0.1:9/db?sslmode=disable" }), { max: 1, applicationName: "t" });
await pool.end();
steps.url = clients();
const secret = db.databaseSourceFromEnv({ DATABASE_SECRET_ARN: "arn:aws:secretsmanager:us-east-1:123456789012:secret:db", DATABASE_SSLMODE: "disable" });
await db.createDatabasePool(secret, { max: 1, applicationName: "t" }).catch(() => {});
steps.secret = clients();`);
    expect(steps).toEqual({ imported: [], url: [], secret: ["client-secrets-manager"] });
  });

  it("the root entry and /consumer: none", () => {
    const steps = loadedClients(`
await import(${JSON.stringify(pkg.name)});
steps.root = clients();
await import(${JSON.stringify(`${pkg.name}/consumer`)});
steps.consumer = clients();`);
    expect(steps).toEqual({ root: [], consumer: [] });
  });
});

/**
 * What `npm publish` would upload (`npm pack --dry-run`; `--ignore-scripts` because `npm test` built dist/ already
 * and a prepack rebuild would delete it under the other test files). Asserted by rule, not by list, so a new
 * file under dist/ needs no change here: every file is under an allowed place, every entry point the manifest
 * names is in it, and nothing a user should not get (tests, bench, local tooling, CI, sources) is.
 */
describe("the published package", () => {
  const packed = JSON.parse(
    execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], {
      cwd: new URL("../..", import.meta.url),
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    }),
  ) as { files: { path: string }[] }[];
  const files = (packed[0]?.files ?? []).map((file) => file.path);

  const ROOT_FILES = ["package.json", "README.md", "LICENSE", "NOTICE", "CHANGELOG.md"];
  const ALLOWED_DIRECTORIES = ["dist/", "migrations/"];

  it("holds only the build, the migrations and the root documents", () => {
    const stray = files.filter(
      (path) => !ROOT_FILES.includes(path) && !ALLOWED_DIRECTORIES.some((dir) => path.startsWith(dir)),
    );
    expect(stray).toEqual([]);
    expect(files).toEqual(expect.arrayContaining(ROOT_FILES));
  });

  it("holds every file the manifest points at: main, types, exports, bin", () => {
    const targets = [
      pkg.main,
      pkg.types,
      ...Object.values(pkg.exports as Record<string, string | Record<string, string>>).flatMap((target) =>
        typeof target === "string" ? [target] : Object.values(target),
      ),
      ...Object.values(pkg.bin as Record<string, string>),
    ].map((target: string) => target.replace(/^\.\//, ""));
    expect(targets.length).toBeGreaterThan(4);
    for (const target of targets) {
      // A subpath pattern ("./migrations/*.sql") must match at least one file.
      if (target.includes("*")) {
        const [before, after] = target.split("*") as [string, string];
        expect(
          files.some((path) => path.startsWith(before) && path.endsWith(after)),
          target,
        ).toBe(true);
      } else {
        expect(files, target).toContain(target);
      }
    }
  });

  it("holds the prebuilt Lambda code and the compiled construct, but not the example app", () => {
    // What puts them there when npm packs or publishes: prepack runs the build, the build bundles the Lambdas.
    expect(pkg.scripts.prepack).toBe("npm run build");
    expect(pkg.scripts.build).toMatch(/&& node scripts\/buildLambdas\.ts$/);
    for (const name of ["relay", "purge", "migrate"]) {
      expect(files).toContain(`dist/lambda/${name}/index.mjs`);
      // A Lambda's folder is its whole code asset: nothing else goes in it.
      const extra = files.filter(
        (path) =>
          path.startsWith(`dist/lambda/${name}/`) &&
          !path.endsWith("/index.mjs") &&
          !(name === "migrate" && /^dist\/lambda\/migrate\/migrations\/[^/]+\.sql$/.test(path)),
      );
      expect(extra, name).toEqual([]);
    }
    const migrations = readdirSync(new URL("../../migrations/", import.meta.url)).filter((f) =>
      f.endsWith(".sql"),
    );
    for (const name of migrations) expect(files).toContain(`dist/lambda/migrate/migrations/${name}`);
    expect(files).toEqual(
      expect.arrayContaining(["dist/infra/outboxRelay.js", "dist/infra/outboxRelay.d.ts"]),
    );
    expect(
      files.filter((path) => /^dist\/(infra\/(app|exampleStack)\.|scripts\/|bench\/|local\/)/.test(path)),
    ).toEqual([]);
  });

  it("holds no source map: a map whose sources are not in the tarball only sends a debugger looking for them", () => {
    expect(files.filter((path) => path.endsWith(".map"))).toEqual([]);
    const mapped = files
      .filter((path) => /\.m?js$/.test(path))
      .filter((path) =>
        readFileSync(new URL(`../../${path}`, import.meta.url), "utf8").includes("//# sourceMappingURL="),
      );
    expect(mapped).toEqual([]);
  });

  it("holds every migration, and no tests, bench, local tooling, TypeScript sources or CI files", () => {
    const migrations = readdirSync(new URL("../../migrations/", import.meta.url)).filter((name) =>
      name.endsWith(".sql"),
    );
    expect(migrations.length).toBeGreaterThan(0);
    for (const name of migrations) expect(files).toContain(`migrations/${name}`);
    const forbidden = files.filter(
      (path) =>
        /(^|\/)(test|bench|local|\.github|\.ci|node_modules)\//.test(path) ||
        /\.test\.|\.chaos\./.test(path) ||
        (path.endsWith(".ts") && !path.endsWith(".d.ts")),
    );
    expect(forbidden).toEqual([]);
  });
});

/**
 * The manifest as a user's npm reads it (issue 32): installable on every Node the write API runs on, sharing the
 * app's copies of its dependencies, and pointing at nothing the tarball does not hold.
 */
describe("the manifest", () => {
  const REPOSITORY = "https://github.com/aws-outbox-relay/aws-outbox-relay";

  it("accepts Node 22.12 and later, the majors Node supports (the Lambdas run on nodejs24.x, set by the construct, not by engines)", () => {
    expect(pkg.engines).toEqual({ node: ">=22.12" });
  });

  it("takes runtime dependencies as caret ranges, so an app's copy is shared instead of nested", () => {
    const dependencies = Object.entries(pkg.dependencies as Record<string, string>);
    expect(dependencies.length).toBeGreaterThan(0);
    for (const [name, range] of dependencies) expect(range, name).toMatch(/^\^\d+\.\d+\.\d+$/);
  });

  it("depends at run time only on what the compiled modules import (the Lambda bundles carry their own)", () => {
    const compiled = execFileSync(
      "grep",
      // Static imports and the dynamic ones by which the SDK clients load when first needed (util/awsClient.ts).
      ["-rhoE", '(from |import\\()"[^".][^"]*"', "dist/functions", "dist/cli", "dist/infra"],
      {
        cwd: new URL("../..", import.meta.url),
        encoding: "utf8",
      },
    );
    const imported = new Set(
      [...compiled.matchAll(/(?:from |import\()"((?:@[^/"]+\/)?[^/"]+)/g)].map((match) => match[1] as string),
    );
    const unused = Object.keys(pkg.dependencies).filter((name) => !imported.has(name));
    expect(unused).toEqual([]);
    // The construct's heavy part stays out of a producer's install: optional peers, never dependencies.
    for (const name of ["aws-cdk-lib", "constructs"]) {
      expect(pkg.dependencies[name], name).toBeUndefined();
      expect(pkg.peerDependenciesMeta[name], name).toEqual({ optional: true });
    }
  });

  it("is side-effect free, names its repository, and has no `imports` field aimed at unshipped sources", () => {
    expect(pkg.sideEffects).toBe(false);
    expect(pkg.repository).toEqual({ type: "git", url: `git+${REPOSITORY}.git` });
    expect(pkg.homepage).toBe(`${REPOSITORY}#readme`);
    expect(pkg.bugs).toEqual({ url: `${REPOSITORY}/issues` });
    expect(pkg.keywords).toEqual(expect.arrayContaining(["outbox", "postgres", "sqs", "lambda", "cdk"]));
    expect(pkg.imports).toBeUndefined();
  });
});

describe("the project's open-source files", () => {
  const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), "utf8");

  it("license: the Apache-2.0 text that package.json declares", () => {
    expect(pkg.license).toBe("Apache-2.0");
    const license = read("LICENSE");
    expect(license).toMatch(/^\s+Apache License\s+Version 2\.0, January 2004/);
    expect(license).toContain("END OF TERMS AND CONDITIONS");
    expect(read("NOTICE")).toContain("Apache License, Version 2.0");
  });

  it("README links to the contributing guide, the security policy and the license (docs.test.ts resolves every link)", () => {
    const readme = read("README.md");
    const targets = [...readme.matchAll(/\]\(([^)#\s]+)(#[^)]*)?\)/g)].map((match) => match[1] ?? "");
    // The package page shows README.md: files the tarball does not hold are linked in the repository.
    const repository = "https://github.com/aws-outbox-relay/aws-outbox-relay/blob/main/";
    expect(targets).toEqual(
      expect.arrayContaining([
        `${repository}CONTRIBUTING.md`,
        `${repository}SECURITY.md`,
        "LICENSE",
        "CHANGELOG.md",
      ]),
    );
  });

  it("changelog: an Unreleased section to add to, and an entry for the version in package.json", () => {
    const changelog = read("CHANGELOG.md");
    expect(changelog).toMatch(/^## \[Unreleased\]$/m);
    expect(changelog).toMatch(
      new RegExp(`^## \\[${pkg.version.replaceAll(".", "\\.")}\\] - \\d{4}-\\d{2}-\\d{2}$`, "m"),
    );
  });
});
