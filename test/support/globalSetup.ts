import type { TestProject } from "vitest/node";
import { startAwsEndpoint } from "../../local/awsEndpoint.ts";
import { startPostgres } from "../../local/postgres.ts";
import { createMigratedTemplate } from "./templateDatabase.ts";

declare module "vitest" {
  export interface ProvidedContext {
    pgUrl: string;
    pgSource: string;
    templateDatabase: string;
    awsEndpoint: string;
    awsSource: string;
  }
}

const TEMPLATE = "outbox_test_template";

/**
 * Starts one Postgres and one SQS endpoint for the whole run (see local/postgres.ts and local/awsEndpoint.ts
 * for how they are found: TEST_DATABASE_URL / TEST_AWS_ENDPOINT_URL, else OUTBOX_LOCAL_BACKEND and whether a
 * Docker engine answers) and migrates a template database once; each test file clones it (test/support/db.ts).
 */
export default async function setup(project: TestProject) {
  const [postgres, aws] = await Promise.all([
    startPostgres(process.env.TEST_DATABASE_URL),
    startAwsEndpoint(process.env.TEST_AWS_ENDPOINT_URL),
  ]);
  console.log(`[harness] postgres: ${postgres.source}, sqs/eventbridge: ${aws.source} (${aws.url})`);

  await createMigratedTemplate(postgres.url, TEMPLATE);

  project.provide("pgUrl", postgres.url);
  project.provide("pgSource", postgres.source);
  project.provide("templateDatabase", TEMPLATE);
  project.provide("awsEndpoint", aws.url);
  project.provide("awsSource", aws.source);

  return async () => {
    await Promise.allSettled([postgres.stop(), aws.stop()]);
  };
}
