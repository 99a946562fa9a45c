import pg from "pg";
import type { TestProject } from "vitest/node";
import { migrate } from "../../../functions/shared/migrate.ts";
import { startPostgres } from "../../../local/postgres.ts";
import { withDatabase } from "../../support/globalSetup.ts";

const TEMPLATE = "outbox_chaos_template";

/**
 * The chaos suite's own setup (vitest.chaos.config.ts): one Postgres and a migrated template database, as the
 * main harness provides them (same injected names, so test/support/db.ts works), but no AWS emulator: every
 * chaos scenario talks to the in-process SQS endpoint (local/fakeSqs.ts).
 */
export default async function setup(project: TestProject) {
  const postgres = await startPostgres(process.env.TEST_DATABASE_URL);
  const admin = new pg.Client({ connectionString: postgres.url });
  await admin.connect();
  await admin.query(`drop database if exists ${TEMPLATE}`);
  await admin.query(`create database ${TEMPLATE}`);
  await admin.end();
  const pool = new pg.Pool({ connectionString: withDatabase(postgres.url, TEMPLATE), max: 2 });
  await migrate(pool);
  await pool.end();
  project.provide("pgUrl", postgres.url);
  project.provide("pgSource", postgres.source);
  project.provide("templateDatabase", TEMPLATE);
  return async () => {
    await postgres.stop();
  };
}
