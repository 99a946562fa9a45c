import { execFileSync, type SpawnSyncReturns, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, relative, sep } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { installBeside, userNpmEnv } from "../produce/libraries/installs.ts";
import { LIBRARIES } from "../produce/libraries/versions.ts";
import { cfnLint, forbiddenDocker } from "../support/cdkChecks.ts";
import { createEmptyDatabase } from "../support/db.ts";
import { type Packed, packedTarball } from "../support/packedApp.ts";

/**
 * What a user does with the published package, offline: `npm pack`, unpack the tarball into an app folder outside
 * the repository, and use it there. The app's node_modules links to this repository's installed dependencies
 * (aws-cdk-lib, constructs, pg, ...) but never to its sources, and leaves esbuild out: the construct must deploy
 * the prebuilt bundles, not bundle anything. Docker is a stub that fails if called.
 *
 * The stack the app synthesizes is docs/examples/ordersStack.ts and the producer is docs/examples/producer.js,
 * copied as they are; README and docs/producer.md show them verbatim (asserted below), so the documented code is the
 * tested code.
 *
 * `npm test` builds dist/ before the suite, so the tarball holds what the build produced: the run's one tarball
 * (test/support/packedApp.ts, packedTarball).
 */

const REPOSITORY = realpathSync(new URL("../..", import.meta.url));
const PACKAGE = "aws-outbox-relay";
const EXAMPLES = join(REPOSITORY, "docs", "examples");
const STACK = "Orders";

const scratch = realpathSync(mkdtempSync(join(tmpdir(), "outbox-user-app-")));
const app = join(scratch, "app");
const installed = join(app, "node_modules", PACKAGE);
const outdir = join(app, "cdk.out");

let packed: Packed;
let synth: SpawnSyncReturns<string>;
let template: {
  Resources: Record<string, { Type: string; Properties?: Record<string, unknown> }>;
};

function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (/^(AWS_|CDK_|npm_|NODE_OPTIONS$|VITEST)/.test(name) && name !== "AWS_CA_BUNDLE") continue;
    env[name] = value;
  }
  return {
    ...env,
    // The Node 24 running this test first on PATH (the user's `node`, and the bin's `#!/usr/bin/env node`), and
    // none of the repository's node_modules/.bin (esbuild, cdk, tsc) that npm put there for this test run.
    PATH: [
      dirname(process.execPath),
      ...(process.env.PATH ?? "").split(":").filter((dir) => !dir.startsWith(REPOSITORY)),
    ].join(":"),
    AWS_EC2_METADATA_DISABLED: "true",
    npm_config_offline: "true",
    npm_config_update_notifier: "false",
    ...extra,
  };
}

/** Links every installed dependency of this repository into the app, except esbuild (the point: none needed). */
function linkDependencies(nodeModules: string) {
  const source = join(REPOSITORY, "node_modules");
  for (const entry of readdirSync(source)) {
    if (entry.startsWith(".") || entry === "esbuild" || entry === "@esbuild" || entry === PACKAGE) continue;
    symlinkSync(join(source, entry), join(nodeModules, entry));
  }
}

/** What npm's bin-links does for the manifest's `bin` on install. */
function linkBins(nodeModules: string) {
  const manifest = JSON.parse(readFileSync(join(installed, "package.json"), "utf8"));
  mkdirSync(join(nodeModules, ".bin"));
  for (const [name, target] of Object.entries(manifest.bin as Record<string, string>)) {
    const file = join(installed, target);
    chmodSync(file, 0o755);
    symlinkSync(relative(join(nodeModules, ".bin"), file), join(nodeModules, ".bin", name));
  }
}

function run(command: string, args: string[], env: Record<string, string> = {}) {
  return spawnSync(command, args, { cwd: app, encoding: "utf8", timeout: 120_000, env: userEnv(env) });
}

beforeAll(() => {
  packed = packedTarball();
  console.log(
    `${packed.filename}: ${(packed.size / 1024).toFixed(0)} KiB packed, ` +
      `${(packed.unpackedSize / 1024).toFixed(0)} KiB unpacked, ${packed.files.length} files`,
  );

  mkdirSync(installed, { recursive: true });
  execFileSync("tar", ["-xzf", packed.tarball, "-C", installed, "--strip-components=1"]);
  const nodeModules = join(app, "node_modules");
  linkDependencies(nodeModules);
  linkBins(nodeModules);
  writeFileSync(
    join(app, "package.json"),
    JSON.stringify({ name: "orders-service", private: true, type: "module" }, null, 2),
  );
  for (const file of ["ordersStack.ts", "producer.js"]) copyFileSync(join(EXAMPLES, file), join(app, file));
  // The app's entry point: the stack as README shows it, and the AWS Solutions checks as a validation plugin
  // (any finding fails the synthesis). Node 24 runs TypeScript outside node_modules by stripping the types.
  writeFileSync(
    join(app, "main.ts"),
    `import { App, Validations } from "aws-cdk-lib";
import { AwsSolutionsChecks } from "cdk-nag";
import { OrdersStack } from "./ordersStack.ts";

const app = new App({ outdir: ${JSON.stringify(outdir)} });
new OrdersStack(app, ${JSON.stringify(STACK)}, { env: { account: "123456789012", region: "eu-west-1" } });
Validations.of(app).addPlugins(new AwsSolutionsChecks(app, { verbose: true }));
app.synth();
`,
  );
  const docker = forbiddenDocker(scratch);
  synth = run(process.execPath, ["main.ts"], { CDK_DOCKER: docker });
  const templateFile = join(outdir, `${STACK}.template.json`);
  if (existsSync(templateFile)) template = JSON.parse(readFileSync(templateFile, "utf8"));
}, 240_000);

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe("the packed tarball, installed in an app outside the repository", () => {
  it("links to the repository's installed dependencies only, never to its sources, and has no esbuild", () => {
    expect(relative(REPOSITORY, scratch).startsWith("..")).toBe(true);
    const nodeModules = join(app, "node_modules");
    for (const entry of readdirSync(nodeModules)) {
      const target = realpathSync(join(nodeModules, entry));
      const inRepository = target === REPOSITORY || target.startsWith(REPOSITORY + sep);
      if (inRepository) expect(target.startsWith(join(REPOSITORY, "node_modules") + sep), entry).toBe(true);
    }
    expect(realpathSync(installed).startsWith(scratch + sep)).toBe(true);
    expect(() =>
      execFileSync(process.execPath, ["--input-type=module", "-e", "import.meta.resolve('esbuild')"], {
        cwd: app,
        stdio: "ignore",
      }),
    ).toThrow();
  });

  it("synthesizes the README's stack against existing resources: no esbuild, no Docker, cdk-nag clean", () => {
    expect(synth.error).toBeUndefined();
    expect(synth.status, `synth failed:\n${synth.stdout}\n${synth.stderr}`).toBe(0);
    expect(synth.stderr).not.toMatch(/docker was called|esbuild/i);
    const types = Object.values(template.Resources).map((resource) => resource.Type);
    // Existing VPC, cluster, secret, queue and topic: referenced, not created.
    for (const created of ["AWS::EC2::VPC", "AWS::RDS::DBCluster", "AWS::SQS::Queue", "AWS::SNS::Topic"]) {
      expect(types, created).not.toContain(created);
    }
    // The only secrets the stack makes are the relay's and the purge's own logins (issue 29).
    expect(types.filter((type) => type === "AWS::SecretsManager::Secret")).toHaveLength(2);
    expect(types.filter((type) => type === "AWS::Lambda::Function").length).toBeGreaterThanOrEqual(3);
    // The imported cluster's security group admits the Lambdas' group and, by grantEnqueue, the service's.
    const ingress = Object.values(template.Resources)
      .filter((resource) => resource.Type === "AWS::EC2::SecurityGroupIngress")
      .map((resource) => resource.Properties ?? {})
      .filter((rule) => rule.GroupId === "sg-0a1b2c3d4e5f67890");
    expect(ingress).toEqual([
      expect.objectContaining({
        FromPort: 5432,
        SourceSecurityGroupId: {
          "Fn::GetAtt": [expect.stringMatching(/^OutboxFunctionsSecurityGroup/), "GroupId"],
        },
      }),
      // The multi-user rotation Lambdas of the relay's and the purge's logins (issue 29).
      ...["OutboxRelayLoginRotationSecurityGroup", "OutboxPurgeLoginRotationSecurityGroup"].map((group) =>
        expect.objectContaining({
          FromPort: 5432,
          SourceSecurityGroupId: {
            "Fn::GetAtt": [expect.stringMatching(new RegExp(`^${group}`)), "GroupId"],
          },
        }),
      ),
      expect.objectContaining({ FromPort: 5432, SourceSecurityGroupId: "sg-0c1d2e3f4a5b67890" }),
    ]);
  });

  it("deploys the package's prebuilt bundles, byte for byte", () => {
    const assets = JSON.parse(readFileSync(join(outdir, `${STACK}.assets.json`), "utf8")) as {
      files: Record<string, { source: { path: string } }>;
    };
    for (const name of ["relay", "purge", "migrate"]) {
      const prefix = `Outbox${name[0]?.toUpperCase()}${name.slice(1)}Function`;
      const fn = Object.entries(template.Resources).find(
        ([id, r]) => r.Type === "AWS::Lambda::Function" && new RegExp(`^${prefix}[0-9A-F]{8}$`).test(id),
      )?.[1];
      // The code's S3 key names the asset; the asset manifest says which staged folder it uploads.
      const key = (fn?.Properties?.Code as { S3Key?: string } | undefined)?.S3Key ?? "";
      const asset = assets.files[key.replace(/\.zip$/, "")]?.source.path;
      expect(asset, prefix).toBeDefined();
      expect(fn?.Properties?.Handler).toBe("index.handler");
      expect(fn?.Properties?.Runtime).toBe("nodejs24.x");
      expect(fn?.Properties?.Architectures).toEqual(["arm64"]);
      const deployed = join(outdir, asset as string);
      const prebuilt = join(installed, "dist", "lambda", name);
      expect(readdirSync(deployed).sort(), name).toEqual(readdirSync(prebuilt).sort());
      expect(
        readFileSync(join(deployed, "index.mjs")).equals(readFileSync(join(prebuilt, "index.mjs"))),
        name,
      ).toBe(true);
    }
  });

  it("type-checks the README's stack against the package's declarations", () => {
    writeFileSync(
      join(app, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "es2024",
          module: "nodenext",
          strict: true,
          noEmit: true,
          allowImportingTsExtensions: true,
          types: ["node"],
          // The app's use of the declarations is checked; the insides of .d.ts files (aws-cdk-lib's) are not.
          skipLibCheck: true,
        },
        files: ["main.ts", "ordersStack.ts"],
      }),
    );
    const check = run(process.execPath, [join(app, "node_modules", "typescript", "bin", "tsc"), "-p", "."]);
    expect(check.status, `${check.stdout}${check.stderr}`).toBe(0);
  }, 120_000);

  it("produces a template that passes cfn-lint", () => {
    const lint = cfnLint(join(outdir, `${STACK}.template.json`), userEnv());
    expect(lint.status, `cfn-lint found problems:\n${lint.stdout}\n${lint.stderr}`).toBe(0);
  }, 120_000);

  it("runs the `outbox` bin with npx", () => {
    const help = run("npx", ["--no-install", "outbox", "--help"]);
    expect(help.status, help.stderr).toBe(0);
    expect(help.stdout).toMatch(/Usage: outbox/);
    expect(help.stdout).toMatch(/migrate/);
  });
});

describe("the write API from the installed package, in plain ESM JavaScript", () => {
  // Roles belong to the server, not to a database: a name of this run's own, dropped after the database.
  const producerRole = `orders_service_${randomBytes(4).toString("hex")}`;
  const producerGrants = readFileSync(join(EXAMPLES, "producerGrants.sql"), "utf8");
  let database: Awaited<ReturnType<typeof createEmptyDatabase>>;
  beforeAll(async () => {
    database = await createEmptyDatabase();
    await serverQuery(`create role ${producerRole} login password 'producer'`);
  });
  afterAll(async () => {
    await database?.drop();
    await serverQuery(`drop role if exists ${producerRole}`);
  });

  it("migrates with the shipped .sql files; docs/producer.md's producer enqueues with the documented privileges only, loading no CDK module", () => {
    // Every module the process resolves, through the synchronous hooks (they see both import and require).
    writeFileSync(
      join(app, "trace.mjs"),
      `import { registerHooks } from "node:module";
import { writeFileSync } from "node:fs";
const resolved = [];
registerHooks({ resolve(specifier, context, next) { const result = next(specifier, context); resolved.push(result.url); return result; } });
process.on("exit", () => writeFileSync(process.env.TRACE_FILE, JSON.stringify(resolved)));
`,
    );
    // As an operator would: migrate as the admin, then give the service's own user the privileges docs/deploy.md
    // lists (docs/examples/producerGrants.sql) and nothing more; the documented producer runs as that user.
    writeFileSync(
      join(app, "producerRun.mjs"),
      `import pg from "pg";
import { enqueue } from "${PACKAGE}";
import { migrate } from "${PACKAGE}/migrations";

const admin = new pg.Pool({ connectionString: process.env.ADMIN_URL });
const migrated = await migrate(admin);
await admin.query("create table orders (id bigint generated always as identity primary key, customer text not null, total int not null)");
await admin.query("grant insert, select on orders to ${producerRole}");
// A hardened database: no function is executable by PUBLIC, so only the documented grants let enqueue() run.
await admin.query("revoke execute on all functions in schema public from public");
await admin.query(process.env.PRODUCER_GRANTS);
process.env.DATABASE_URL = process.env.PRODUCER_URL;
const { placeOrder } = await import("./producer.js");
const orderId = await placeOrder("c-7", 4200);
// Events of two aggregates in one call: enqueue() locks them through the migration's functions.
const producer = new pg.Client({ connectionString: process.env.PRODUCER_URL });
await producer.connect();
await producer.query("begin");
await enqueue(producer, [
  { aggregateType: "customer", aggregateId: "c-7", eventType: "customer.ordered", payload: { orderId } },
  { aggregateType: "customer", aggregateId: "c-8", eventType: "customer.referred", payload: { by: "c-7" } },
]);
await producer.query("commit");
await producer.end();
const { rows } = await admin.query("select aggregate_id, event_type, payload from outbox_events order by seq");
// A consuming service imports the consumer entry point: no CDK behind it either.
const { createInboxHandler } = await import("${PACKAGE}/consumer");
console.log("RESULT " + JSON.stringify({ migrated, orderId, rows, consumer: typeof createInboxHandler, sql: import.meta.resolve("${PACKAGE}/migrations/0001_outbox_events.sql") }));
process.exit(0);
`,
    );
    const traceFile = join(scratch, "resolved.json");
    const producerUrl = new URL(database.url);
    producerUrl.username = producerRole;
    producerUrl.password = "producer";
    const child = run(process.execPath, ["--import", "./trace.mjs", "producerRun.mjs"], {
      ADMIN_URL: database.url,
      PRODUCER_URL: producerUrl.toString(),
      PRODUCER_GRANTS: producerGrants.replaceAll("orders_service", producerRole),
      TRACE_FILE: traceFile,
    });
    expect(child.status, child.stderr).toBe(0);
    const line = child.stdout.split("\n").find((l) => l.startsWith("RESULT ")) ?? "";
    const result = JSON.parse(line.slice("RESULT ".length));

    const shipped = packed.files
      .map((file) => file.path)
      .filter((path) => /^migrations\/[^/]+\.sql$/.test(path))
      .map((path) => path.slice("migrations/".length))
      .sort();
    expect(shipped.length).toBeGreaterThan(0);
    expect(result.migrated).toEqual({ applied: shipped, alreadyApplied: [] });
    expect(result.rows).toEqual([
      {
        aggregate_id: `order-${result.orderId}`,
        event_type: "order.placed",
        payload: { orderId: result.orderId, customer: "c-7", total: 4200 },
      },
      { aggregate_id: "c-7", event_type: "customer.ordered", payload: { orderId: result.orderId } },
      { aggregate_id: "c-8", event_type: "customer.referred", payload: { by: "c-7" } },
    ]);
    expect(result.consumer).toBe("function");
    expect(result.sql).toBe(`file://${join(installed, "migrations", "0001_outbox_events.sql")}`);

    const resolved = JSON.parse(readFileSync(traceFile, "utf8")) as string[];
    expect(resolved.some((url) => url.includes(`/node_modules/${PACKAGE}/dist/functions/shared/`))).toBe(
      true,
    );
    expect(resolved.filter((url) => /\/(aws-cdk-lib|constructs)\//.test(url))).toEqual([]);
  });
});

describe("the docs show the tested code verbatim", () => {
  const block = (language: string, file: string) =>
    `\`\`\`${language}\n${readFileSync(join(EXAMPLES, file), "utf8")}\`\`\``;
  it("README: the stack; docs/producer.md: the producer in plain JavaScript", () => {
    expect(readFileSync(join(REPOSITORY, "README.md"), "utf8")).toContain(block("ts", "ordersStack.ts"));
    expect(readFileSync(join(REPOSITORY, "docs", "producer.md"), "utf8")).toContain(
      block("js", "producer.js"),
    );
  });
  it("docs/deploy.md: the producer's privileges", () => {
    expect(readFileSync(join(REPOSITORY, "docs", "deploy.md"), "utf8")).toContain(
      block("sql", "producerGrants.sql"),
    );
  });
});

async function serverQuery(sql: string) {
  const client = new pg.Client({ connectionString: inject("pgUrl") });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/**
 * The packed package as a service's npm installs it (issue 38): from the registry, through an npm cache that starts
 * empty (test/produce/libraries/installs.ts), with no flag that loosens peer resolution. npm 11 resolves the optional
 * peers of an optional peer (drizzle-orm's `postgres >=3`, `kysely *`, `knex *`, `@prisma/client *`) against the
 * registry's newest releases even when nothing installs them: with a peer range closed above, a library's next major
 * refuses every install of the package, an empty project's included (postgres.js 4.1.0 did, against `^3.4.0`). So
 * the data libraries' ranges start at the oldest release the library matrix passes and stay open above. No registry
 * is a failure here, never a skip.
 *
 * The installs beside the data libraries (each one's oldest and newest, and all of them at once) are
 * `npm run test:libraries`'s (scripts/testLibraries.ts): the CI job .github/workflows/libraries.yml runs them every
 * day and on every pull request that changes package.json, the only input of the tree npm resolves besides the
 * registry. Here they cost 30–40 s of a 2-core `npm test` each and
 * tested nothing a change outside package.json could break.
 */
describe("the packed package from the registry, with a fresh npm cache and no flags", () => {
  const fresh = realpathSync(mkdtempSync(join(tmpdir(), "outbox-registry-installs-")));
  const env = userNpmEnv(join(fresh, "npm-cache"));
  // Started at once, beside the unreachable registry's test (it mostly waits on the network); awaited by its test.
  let empty: Promise<string>;
  beforeAll(() => {
    const project = join(fresh, "empty");
    empty = installBeside(project, packed.tarball, [], env).then(() => project);
    empty.catch(() => {}); // awaited, and so reported, by its test
  });
  // A project of a few hundred packages and npm's cache: removing them takes a while on a busy machine.
  afterAll(() => rm(fresh, { recursive: true, force: true }), 600_000);

  it("declares each data library's peer range from its oldest supported release, open above", () => {
    const manifest = JSON.parse(readFileSync(join(REPOSITORY, "package.json"), "utf8"));
    for (const library of LIBRARIES) {
      for (const peer of library.peers) {
        expect(manifest.peerDependencies[peer], peer).toBe(`>=${library.oldest[peer]}`);
        expect(manifest.peerDependenciesMeta[peer], peer).toEqual({ optional: true });
      }
    }
  });

  it("fails, saying the registry did not answer, when it does not (never a skip)", async () => {
    const unreachable = {
      ...userNpmEnv(join(fresh, "unreachable-cache")),
      // A port nothing listens on: npm's connection is refused at once.
      npm_config_registry: "http://127.0.0.1:9/",
      npm_config_fetch_retries: "0",
    };
    await expect(installBeside(join(fresh, "unreachable"), packed.tarball, [], unreachable)).rejects.toThrow(
      /could not reach the registry/,
    );
  }, 120_000);

  it("installs into an empty project, and none of the optional peers with it", async () => {
    const top = readdirSync(join(await empty, "node_modules"));
    expect(top).toContain(PACKAGE);
    for (const library of LIBRARIES) {
      for (const peer of library.peers) expect(top, peer).not.toContain(peer.split("/")[0]);
    }
  }, 600_000);
});
