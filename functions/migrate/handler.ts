import { Logger } from "@aws-lambda-powertools/logger";
import { injectLambdaContext } from "@aws-lambda-powertools/logger/middleware";
import middy from "@middy/core";
import type { CloudFormationCustomResourceEvent, Context } from "aws-lambda";
import { createDatabasePool, type DatabaseSource, databaseSourceFromEnv } from "#shared/db/connection.ts";
import { migrate } from "#shared/db/migrate.ts";
import {
  DEFAULT_SCHEMA,
  DEFAULT_TABLE,
  type OutboxLocation,
  outboxLocationFromEnv,
} from "#shared/outbox/names.ts";

/**
 * Deploy-time migrations: the `onEvent` handler of a CDK Provider-framework custom resource. The framework
 * (outside the VPC) turns our return value or thrown error into the CloudFormation response, so this handler
 * needs no route to the S3 response URL, only to the database and Secrets Manager.
 */

// Cold start: a missing or malformed variable fails here, naming it, and the deployment reports that message.
const source: DatabaseSource = databaseSourceFromEnv(process.env);
const location: OutboxLocation = outboxLocationFromEnv(process.env);
const logger = new Logger({ serviceName: process.env.POWERTOOLS_SERVICE_NAME ?? "outbox-migrate" });

/** What the Provider framework expects back; `Data` becomes the custom resource's `Fn::GetAtt` attributes. */
export interface MigrationResponse {
  PhysicalResourceId: string;
  Data?: { Applied: string; AlreadyApplied: string; Latest: string };
}

/**
 * Create and Update run every pending migration with the project's runner (advisory lock, one transaction per
 * file, checksums). Delete does nothing: removing the stack (or moving the outbox elsewhere) must never drop a
 * table that may still hold unpublished events.
 */
export async function runMigrations(event: CloudFormationCustomResourceEvent): Promise<MigrationResponse> {
  // One id per outbox location: if schema or table change, CloudFormation sees a new resource, migrates the new
  // location, and sends Delete for the old id, which (see above) leaves the old table alone.
  const physicalResourceId = `outbox-migrations:${location.schema ?? DEFAULT_SCHEMA}.${location.table ?? DEFAULT_TABLE}`;
  if (event.RequestType === "Delete") {
    logger.info("stack deletion: migrations are forward-only, nothing is dropped", {
      physicalResourceId: event.PhysicalResourceId,
    });
    return { PhysicalResourceId: event.PhysicalResourceId };
  }

  // A pool per invocation, closed at the end: this runs once per deployment, so a connection kept open in a
  // frozen container would only hold a database slot for nothing. Two connections: a `create index concurrently`
  // file runs on one while the other holds the runners' lock (functions/shared/migrate.ts).
  const pool = await createDatabasePool(source, { max: 2, applicationName: "outbox-migrate" });
  try {
    const result = await migrate(pool, location);
    logger.info("migrations done", { ...result, physicalResourceId });
    const all = [...result.alreadyApplied, ...result.applied].sort();
    return {
      PhysicalResourceId: physicalResourceId,
      // Counts and the last name only: a custom resource response is limited to 4 KiB.
      Data: {
        Applied: String(result.applied.length),
        AlreadyApplied: String(result.alreadyApplied.length),
        Latest: all.at(-1) ?? "",
      },
    };
  } finally {
    await pool.end();
  }
}

export const handler = middy(
  (event: CloudFormationCustomResourceEvent, _context: Context): Promise<MigrationResponse> =>
    runMigrations(event),
).use(injectLambdaContext(logger));
