import type { SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import type { CloudFormationCustomResourceEvent } from "aws-lambda";
import { limitsProperty } from "../outbox/limits.ts";
import { DEFAULT_SCHEMA, DEFAULT_TABLE, type OutboxLocation, outboxNames } from "../outbox/names.ts";
import type { Logger } from "../util/logger.ts";
import { createDatabasePool, type DatabaseSource, secretsManagerClient } from "./connection.ts";
import { createLogins, type OutboxLogin } from "./logins.ts";
import { migrate } from "./migrate.ts";
import { ROLES_RENEWED_HINT } from "./rolesHere.ts";
import { writeLimits } from "./sql/writeLimits.ts";

/**
 * Deploy-time migrations: what the `onEvent` handler of a CDK Provider-framework custom resource runs. The
 * framework (outside the VPC) turns the return value or thrown error into the CloudFormation response, so the
 * handler needs no route to the S3 response URL, only to the database and Secrets Manager.
 */

/** What the Provider framework expects back; `Data` becomes the custom resource's `Fn::GetAtt` attributes. */
export interface MigrationResponse {
  PhysicalResourceId: string;
  Data?: { Applied: string; AlreadyApplied: string; Latest: string };
}

/**
 * Create and Update run every pending migration with the project's runner (advisory lock, one transaction per
 * file, checksums), then make the relay's and purge's logins it is given (each from its secret, in its outbox
 * role; a login that exists keeps its password), then write the outbox's limits row from the resource's `Limits`
 * property (the construct's destinations and `largePayloads`: infra/outboxLimits.ts). Delete does nothing: removing the stack (or moving the outbox elsewhere) must never drop a
 * table that may still hold unpublished events.
 */
export async function migrationsCustomResource(
  event: CloudFormationCustomResourceEvent,
  deps: {
    source: DatabaseSource;
    location: OutboxLocation;
    logger: Logger;
    /** Epoch ms: authentication retries (a rotation in progress) stop before it. */
    deadline?: number;
    /** Default AUTH_RETRY_MS (connection.ts). */
    authRetryMs?: number;
    /** The relay's and purge's logins to make once the schema is current (logins.ts). Default none. */
    logins?: readonly OutboxLogin[];
    secrets?: SecretsManagerClient;
  },
): Promise<MigrationResponse> {
  const { source, location, logger, deadline } = deps;
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
  // file runs on one while the other holds the runners' lock (migrate.ts).
  // A rotation's window (new password set, not yet current) is retried for about a minute (connection.ts).
  const pool = await createDatabasePool(source, {
    max: 2,
    applicationName: "outbox-migrate",
    ...(deadline === undefined ? {} : { deadline: () => deadline }),
    ...(deps.authRetryMs === undefined ? {} : { authRetryMs: deps.authRetryMs }),
  });
  try {
    const result = await migrate(pool, location);
    for (const change of result.roles ?? []) {
      // A clone or a restore under another name: its logins below get the new roles; others need a grant by hand.
      if (change.action === "renewed")
        logger.warn("outbox roles renewed", { ...change, ...ROLES_RENEWED_HINT });
      else logger.info("outbox roles recorded as this database's", { ...change });
    }
    const limits = limitsProperty(event.ResourceProperties.Limits);
    if (limits !== undefined) {
      const client = await pool.connect();
      try {
        await writeLimits(client, outboxNames(location), limits);
      } finally {
        client.release();
      }
      logger.info("outbox limits written", { ...limits });
    }
    const logins = deps.logins ?? [];
    if (logins.length > 0) {
      const secrets = deps.secrets ?? (await secretsManagerClient());
      await createLogins(pool, location, logins, { secrets, logger });
    }
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
