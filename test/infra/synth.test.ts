import { type SpawnSyncReturns, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_MIGRATIONS_DIR, PROJECT_ROOT } from "../../infra/outboxRelay.ts";
import { cfnLint, forbiddenDocker } from "../support/cdkChecks.ts";
import { createEmptyDatabase } from "../support/db.ts";

/**
 * The example app as a user runs it: `cdk synth` through the CLI, with cdk.json's `node infra/app.ts`, real
 * esbuild bundling and the cdk-nag plugin, into a temporary folder. Once, in beforeAll (~10 s on 2 cores);
 * every test below reads what it produced. No AWS account, no network and no Docker: credentials are removed
 * from the environment and CDK_DOCKER points at a stub that fails loudly if anything tries to use Docker.
 */

const STACK = "OutboxRelayExample";
const workDir = mkdtempSync(join(tmpdir(), "outbox-cdk-"));
const outdir = join(workDir, "cdk.out");
let synth: SpawnSyncReturns<string>;
let template: {
  Resources: Record<
    string,
    { Type: string; Properties?: Record<string, unknown>; Metadata?: Record<string, string> }
  >;
};

function offlineEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (/^(AWS_|CDK_)/.test(name) && name !== "AWS_CA_BUNDLE") continue;
    env[name] = value;
  }
  return {
    ...env,
    // The Node that runs this test (24, from the `node` package) first, so cdk.json's `node` is the same one.
    PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ""}`,
    AWS_EC2_METADATA_DISABLED: "true",
    CDK_DISABLE_VERSION_CHECK: "1",
    CDK_DISABLE_CLI_TELEMETRY: "true",
    ...extra,
  };
}

/** The bundle folder of one of the construct's functions, from the template's asset metadata. */
function assetDir(functionPrefix: string): string {
  const entry = Object.entries(template.Resources).find(
    ([id, r]) => r.Type === "AWS::Lambda::Function" && new RegExp(`^${functionPrefix}[0-9A-F]{8}$`).test(id),
  );
  const assetPath = entry?.[1].Metadata?.["aws:asset:path"];
  if (assetPath === undefined) throw new Error(`no bundled asset for ${functionPrefix}`);
  return join(outdir, assetPath);
}

/** Runs a bundled handler the way Lambda's Node 24 runtime would import it, in a child process. */
function runBundle(bundleDir: string, env: Record<string, string>, event?: unknown) {
  const script = `
    const mod = await import(${JSON.stringify(join(bundleDir, "index.mjs"))});
    const context = { functionName: "test", functionVersion: "$LATEST", awsRequestId: "req-1", memoryLimitInMB: "256",
      invokedFunctionArn: "arn:aws:lambda:eu-west-1:123456789012:function:test", logGroupName: "g", logStreamName: "s",
      getRemainingTimeInMillis: () => 60000, callbackWaitsForEmptyEventLoop: false };
    const result = await mod.handler(JSON.parse(process.env.TEST_EVENT), context);
    console.log("RESULT " + JSON.stringify(result));`;
  const child = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
    cwd: workDir,
    encoding: "utf8",
    timeout: 60_000,
    env: offlineEnv({ POWERTOOLS_LOG_LEVEL: "WARN", TEST_EVENT: JSON.stringify(event ?? {}), ...env }),
  });
  const line = child.stdout.split("\n").find((l) => l.startsWith("RESULT "));
  return { child, result: line === undefined ? undefined : JSON.parse(line.slice("RESULT ".length)) };
}

beforeAll(() => {
  const docker = forbiddenDocker(workDir);
  synth = spawnSync(
    process.execPath,
    [
      join(PROJECT_ROOT, "node_modules/aws-cdk/bin/cdk"),
      "synth",
      "--no-notices",
      "--quiet",
      "--output",
      outdir,
    ],
    { cwd: PROJECT_ROOT, encoding: "utf8", timeout: 240_000, env: offlineEnv({ CDK_DOCKER: docker }) },
  );
  const templateFile = join(outdir, `${STACK}.template.json`);
  if (existsSync(templateFile)) template = JSON.parse(readFileSync(templateFile, "utf8"));
}, 300_000);

afterAll(() => rmSync(workDir, { recursive: true, force: true }));

describe("cdk synth of the example app (CLI, offline)", () => {
  it("succeeds with no AWS account, network or Docker, bundling with the local esbuild", () => {
    expect(synth.error).toBeUndefined();
    expect(synth.status, `cdk synth failed:\n${synth.stdout}\n${synth.stderr}`).toBe(0);
    expect(synth.stderr).not.toMatch(/docker was called|Switching to Docker/);
    expect(template.Resources).toBeDefined();
    // Environment-agnostic: nothing was looked up in an account.
    const manifest = JSON.parse(readFileSync(join(outdir, "manifest.json"), "utf8"));
    expect(manifest.artifacts[STACK].environment).toBe("aws://unknown-account/unknown-region");
    expect(manifest.artifacts[STACK].missing).toBeUndefined();
  });

  it("bundles each function as one minified ESM file for node24, with the AWS SDK inside", () => {
    for (const name of ["OutboxRelayFunction", "OutboxPurgeFunction", "OutboxMigrateFunction"]) {
      const dir = assetDir(name);
      const code = readFileSync(join(dir, "index.mjs"), "utf8");
      expect(code.startsWith("import { createRequire as __outboxCreateRequire }"), name).toBe(true);
      // Bundled, not resolved from the runtime's copy: the SDK's code is inside, and no import or require of an
      // @aws-sdk package is left (error messages that quote `[require("@aws-sdk/...")]` do not count).
      expect(code, name).toContain("GetSecretValue");
      const external = [
        ...code.matchAll(/(?<![[\w])(?:require|import)\(\s*["']@aws-sdk\/|\bfrom\s*["']@aws-sdk\//g),
      ];
      expect(
        external.map((m) => code.slice(Math.max(0, m.index - 40), m.index + 60)),
        name,
      ).toEqual([]);
      // No source map (scripts/lambdaBundles.ts): stack traces name the functions, kept unminified.
      expect(existsSync(join(dir, "index.mjs.map")), name).toBe(false);
      expect(code, name).toMatch(/function claimBatch|function runPurge|function migrate/);
      // Minified whitespace and syntax: a bundle of the SDK and pg with its whitespace is several MB (the relay's
      // is 1.5 MB minified since its clients load lazily: docs/deploy.md's bundle table).
      expect(statSync(join(dir, "index.mjs")).size, name).toBeLessThan(2_000_000);
    }
  });

  it("copies the migrations beside the migrate bundle, where defaultMigrationsDir() finds them", () => {
    const copied = join(assetDir("OutboxMigrateFunction"), "migrations");
    const expected = readdirSync(DEFAULT_MIGRATIONS_DIR).filter((f) => f.endsWith(".sql"));
    expect(readdirSync(copied).sort()).toEqual(expected.sort());
    for (const file of expected) {
      expect(readFileSync(join(copied, file), "utf8")).toBe(
        readFileSync(join(DEFAULT_MIGRATIONS_DIR, file), "utf8"),
      );
    }
  });

  it("produces a template that passes cfn-lint", () => {
    const lint = cfnLint(join(outdir, `${STACK}.template.json`), offlineEnv());
    expect(lint.error).toBeUndefined();
    expect(lint.status, `cfn-lint found problems:\n${lint.stdout}\n${lint.stderr}`).toBe(0);
  });

  it("ships relay and purge bundles that load on Node 24 and stop at cold start on missing configuration", () => {
    for (const [name, variable] of [
      ["OutboxRelayFunction", "OUTBOX_QUEUE_URL"],
      ["OutboxPurgeFunction", "DATABASE_URL"],
    ] as const) {
      const { child } = runBundle(assetDir(name), {});
      expect(child.status, name).not.toBe(0);
      // A configuration error naming the variable, not a module-resolution or `require` error.
      expect(child.stderr, name).toMatch(/ConfigError/);
      expect(child.stderr, name).toContain(variable);
      expect(child.stderr, name).not.toMatch(
        /Cannot find (module|package)|require is not defined|Dynamic require/,
      );
    }
  });
});

describe("the bundled migrate handler against a real PostgreSQL", () => {
  let database: Awaited<ReturnType<typeof createEmptyDatabase>>;
  beforeAll(async () => {
    database = await createEmptyDatabase();
  });
  afterAll(async () => {
    await database?.drop();
  });

  const event = (requestType: "Create" | "Update" | "Delete") => ({
    RequestType: requestType,
    ServiceToken: "arn:aws:lambda:eu-west-1:123456789012:function:provider",
    ResponseURL: "https://example.invalid/response",
    StackId: "arn:aws:cloudformation:eu-west-1:123456789012:stack/OutboxRelayExample/1",
    RequestId: `request-${requestType}`,
    LogicalResourceId: "OutboxMigrations",
    ResourceType: "Custom::OutboxMigrations",
    ResourceProperties: { ServiceToken: "x", MigrationsHash: "h", Schema: "", Table: "" },
    ...(requestType === "Create"
      ? {}
      : { PhysicalResourceId: "outbox-migrations:sales.outbox_events", OldResourceProperties: {} }),
  });

  async function outboxTables(): Promise<string[]> {
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      const { rows } = await client.query<{ table_name: string }>(
        "select table_name from information_schema.tables where table_schema = 'sales' order by 1",
      );
      return rows.map((r) => r.table_name);
    } finally {
      await client.end();
    }
  }

  it("applies every migration on Create, finds them applied on Update, and drops nothing on Delete", async () => {
    const env = { DATABASE_URL: database.url, OUTBOX_SCHEMA: "sales" };
    const migrationCount = readdirSync(DEFAULT_MIGRATIONS_DIR).filter((f) => f.endsWith(".sql")).length;

    const created = runBundle(assetDir("OutboxMigrateFunction"), env, event("Create"));
    expect(created.child.status, created.child.stderr).toBe(0);
    expect(created.result).toEqual({
      PhysicalResourceId: "outbox-migrations:sales.outbox_events",
      Data: {
        Applied: String(migrationCount),
        AlreadyApplied: "0",
        Latest: expect.stringMatching(/^\d{4}_/),
      },
    });

    const updated = runBundle(assetDir("OutboxMigrateFunction"), env, event("Update"));
    expect(updated.result?.Data).toMatchObject({ Applied: "0", AlreadyApplied: String(migrationCount) });

    const deleted = runBundle(assetDir("OutboxMigrateFunction"), env, event("Delete"));
    expect(deleted.result).toEqual({ PhysicalResourceId: "outbox-migrations:sales.outbox_events" });
    expect(await outboxTables()).toEqual(expect.arrayContaining(["outbox_events", "outbox_migrations"]));
  });
});
