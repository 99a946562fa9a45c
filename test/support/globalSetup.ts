import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { startAwsEndpoint } from "../../local/backends/awsEndpoint.ts";
import { startPgbouncer } from "../../local/backends/pgbouncer.ts";
import { serverVersion, startPostgres } from "../../local/backends/postgres.ts";
import { createMigratedTemplate } from "./templateDatabase.ts";

declare module "vitest" {
  export interface ProvidedContext {
    /** The server itself: admin work (create/drop database), and tests that need a session of their own. */
    pgUrl: string;
    pgSource: string;
    /** `server_version` of the server, e.g. "16.14" (OUTBOX_POSTGRES_VERSION picks the major). */
    pgVersion: string;
    /** What each test file's database is reached through: pgUrl's server, or a transaction pooler in front of it. */
    pgAppServerUrl: string;
    pooler: "none" | "pgbouncer";
    templateDatabase: string;
    awsEndpoint: string;
    awsSource: string;
    /** The run's folder for the one packed tarball and its installed app that test files share (test/support/packedApp.ts). */
    packedAppCache: string;
  }
}

const TEMPLATE = "outbox_test_template";

const POOLER_VARIABLE = "OUTBOX_TEST_POOLER";

/** OUTBOX_TEST_POOLER: `pgbouncer` puts a transaction pooler between the tests and Postgres; unset: none. */
export function testPooler(env: NodeJS.ProcessEnv = process.env): "none" | "pgbouncer" {
  const value = env[POOLER_VARIABLE];
  if (value === undefined || value === "" || value === "none") return "none";
  if (value === "pgbouncer") return value;
  throw new Error(`${POOLER_VARIABLE}=${value} is not one of none, pgbouncer`);
}

/**
 * Starts one Postgres and one SQS endpoint for the whole run (see local/backends/postgres.ts and local/backends/awsEndpoint.ts
 * for how they are found: TEST_DATABASE_URL / TEST_AWS_ENDPOINT_URL, else OUTBOX_LOCAL_BACKEND and whether a
 * Docker engine answers; OUTBOX_POSTGRES_VERSION picks the major) and migrates a template database once; each
 * test file clones it (test/support/db.ts). With OUTBOX_TEST_POOLER=pgbouncer, each file's database is reached
 * through pgbouncer in transaction mode (local/backends/pgbouncer.ts): the same tests, behind a pooler.
 */
export default async function setup(project: TestProject) {
  const pooler = testPooler();
  const [postgres, aws] = await Promise.all([
    startPostgres(process.env.TEST_DATABASE_URL),
    startAwsEndpoint(process.env.TEST_AWS_ENDPOINT_URL),
  ]);
  const version = postgres.version ?? (await serverVersion(postgres.url));
  const bouncer = pooler === "pgbouncer" ? await startPgbouncer(postgres.url) : undefined;
  console.log(
    `[harness] postgres ${version}: ${postgres.source}, sqs/eventbridge: ${aws.source} (${aws.url})` +
      (bouncer === undefined ? "" : `, through ${bouncer.version} (pool_mode = transaction)`),
  );

  await createMigratedTemplate(postgres.url, TEMPLATE);

  project.provide("pgUrl", postgres.url);
  project.provide("pgSource", postgres.source);
  project.provide("pgVersion", version);
  project.provide("pgAppServerUrl", bouncer?.url ?? postgres.url);
  project.provide("pooler", pooler);
  project.provide("templateDatabase", TEMPLATE);
  project.provide("awsEndpoint", aws.url);
  project.provide("awsSource", aws.source);
  const packedAppCache = mkdtempSync(join(tmpdir(), "outbox-packed-"));
  project.provide("packedAppCache", packedAppCache);

  return async () => {
    await bouncer?.stop();
    await Promise.allSettled([postgres.stop(), aws.stop()]);
    // The shared install is thousands of files: removing them took ~15 s at the end of a loaded run, which waited
    // for it. A detached rm removes them after the run.
    spawn("rm", ["-rf", packedAppCache], { detached: true, stdio: "ignore" }).unref();
  };
}
