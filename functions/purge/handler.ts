import { Logger } from "@aws-lambda-powertools/logger";
import { injectLambdaContext } from "@aws-lambda-powertools/logger/middleware";
import { logMetrics } from "@aws-lambda-powertools/metrics/middleware";
import middy from "@middy/core";
import type { Context, ScheduledEvent } from "aws-lambda";
import { createDatabasePool, queryTimeoutFor } from "../shared/db/connection.ts";
import { createMetrics } from "../shared/observe/metrics.ts";
import { serviceNameFromEnv } from "../shared/observe/settings.ts";
import { purgeInvocation } from "../shared/purge/invocation.ts";
import type { PurgeSummary } from "../shared/purge/purge.ts";
import { purgeConfigFromEnv } from "../shared/purge/settings.ts";

// Cold start: configuration errors fail here, naming the variable, before any event is handled.
const config = purgeConfigFromEnv(process.env);
const logger = new Logger({ serviceName: serviceNameFromEnv(process.env, "outbox-purge") });
const metrics = createMetrics(process.env, "outbox-purge");
// The current invocation's deadline: a checkout retrying authentication failures (a rotation's window) stops
// before it.
let currentDeadline: number | undefined;
const pool = await createDatabasePool(config.database, {
  deadline: () => currentDeadline,
  max: 1,
  applicationName: "outbox-purge",
  queryTimeoutMs: queryTimeoutFor(config.purge.statementTimeoutMs),
  onError: (error) =>
    logger.warn("idle database connection failed; it will be replaced", { error: error.message }),
});

/** The metrics schedule (every minute, the alarms' period) sends this; the purge schedule (hourly) does not. */
export interface SnapshotOnlyEvent {
  snapshotOnly: true;
}

/** Invoked by EventBridge schedules: the outbox snapshot's metrics, then (hourly) the purge itself. */
export async function purge(
  event: ScheduledEvent | SnapshotOnlyEvent | Record<string, never>,
  context: Context,
): Promise<PurgeSummary | { snapshotOnly: true }> {
  const deadline = Date.now() + context.getRemainingTimeInMillis() - config.budgetMarginMs;
  currentDeadline = deadline;
  const snapshotOnly = "snapshotOnly" in event && event.snapshotOnly === true;
  return purgeInvocation({ pool, metrics, logger, deadline }, config, snapshotOnly);
}

export const handler = middy(purge).use(injectLambdaContext(logger)).use(logMetrics(metrics));
