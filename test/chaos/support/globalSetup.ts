import type { TestProject } from "vitest/node";
import { serverVersion, startPostgres } from "../../../local/backends/postgres.ts";
import { createMigratedTemplate } from "../../support/templateDatabase.ts";

const TEMPLATE = "outbox_chaos_template";

/**
 * The chaos suite's own setup (vitest.chaos.config.ts): one Postgres and a migrated template database, as the
 * main harness provides them (same injected names, so test/support/db.ts works), but no AWS emulator: every
 * chaos scenario talks to the in-process SQS endpoint (cli/dev/aws/fakeSqs.ts).
 */
export default async function setup(project: TestProject) {
  const postgres = await startPostgres(process.env.TEST_DATABASE_URL);
  await createMigratedTemplate(postgres.url, TEMPLATE);
  project.provide("pgUrl", postgres.url);
  project.provide("pgSource", postgres.source);
  project.provide("pgVersion", postgres.version ?? (await serverVersion(postgres.url)));
  project.provide("pgAppServerUrl", postgres.url);
  project.provide("pooler", "none");
  project.provide("templateDatabase", TEMPLATE);
  return async () => {
    await postgres.stop();
  };
}
