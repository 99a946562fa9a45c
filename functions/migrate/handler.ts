import { Logger } from "@aws-lambda-powertools/logger";
import { injectLambdaContext } from "@aws-lambda-powertools/logger/middleware";
import middy from "@middy/core";
import type { CloudFormationCustomResourceEvent, Context } from "aws-lambda";
import { databaseSourceFromEnv } from "../shared/db/connection.ts";
import { loginsFromEnv } from "../shared/db/logins.ts";
import { type MigrationResponse, migrationsCustomResource } from "../shared/db/migrationsResource.ts";
import { serviceNameFromEnv } from "../shared/observe/settings.ts";
import { outboxLocationFromEnv } from "../shared/outbox/names.ts";

// Cold start: a missing or malformed variable fails here, naming it, and the deployment reports that message.
const source = databaseSourceFromEnv(process.env);
const location = outboxLocationFromEnv(process.env);
const logins = loginsFromEnv(process.env);
const logger = new Logger({ serviceName: serviceNameFromEnv(process.env, "outbox-migrate") });

/** The custom resource's `onEvent`: Create and Update migrate; Delete drops nothing (migrationsResource.ts). */
export const handler = middy(
  (event: CloudFormationCustomResourceEvent, context: Context): Promise<MigrationResponse> =>
    migrationsCustomResource(event, {
      source,
      location,
      logger,
      logins,
      // Authentication retries (a rotation's window) end 10 s before the Lambda would be cut off.
      deadline: Date.now() + context.getRemainingTimeInMillis() - 10_000,
    }),
).use(injectLambdaContext(logger));
