import { Logger } from "@aws-lambda-powertools/logger";
import { injectLambdaContext } from "@aws-lambda-powertools/logger/middleware";
import { logMetrics } from "@aws-lambda-powertools/metrics/middleware";
import middy from "@middy/core";
import type { Context, ScheduledEvent } from "aws-lambda";
import { createDatabasePool, queryTimeoutFor } from "#shared/db/connection.ts";
import {
  createMetrics,
  recordOutboxSnapshot,
  recordPurgeSummary,
  recordSnapshotError,
} from "#shared/observe/metrics.ts";
import { errorMessage } from "#shared/outbox/errors.ts";
import { type PurgeSummary, readOutboxSnapshot, runPurge } from "#shared/purge/purge.ts";
import { purgeConfigFromEnv } from "#shared/purge/settings.ts";

// Cold start: configuration errors fail here, naming the variable, before any event is handled.
const config = purgeConfigFromEnv(process.env);
const logger = new Logger({ serviceName: process.env.POWERTOOLS_SERVICE_NAME ?? "outbox-purge" });
const metrics = createMetrics(process.env, "outbox-purge");
const pool = await createDatabasePool(config.database, {
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

/**
 * Invoked by EventBridge schedules. Reports how the outbox stands (one line of metrics), then, unless the event
 * asks for the snapshot only, deletes old published rows until none are left or the budget ends. The two are
 * independent: a snapshot that fails or times out does not skip the hour's purge, and a failing purge still
 * reports the snapshot. Either failure is counted (SnapshotErrors, PurgeErrors) and fails the invocation, so
 * Lambda's Errors metric sees it too; the metrics stored so far are published all the same.
 */
export async function purge(
  event: ScheduledEvent | SnapshotOnlyEvent | Record<string, never>,
  context: Context,
): Promise<PurgeSummary | { snapshotOnly: true }> {
  const deadline = Date.now() + context.getRemainingTimeInMillis() - config.budgetMarginMs;
  const failures: string[] = [];
  // The snapshot first: the alarms depend on it, and it is bounded by the statement timeout. It reads only
  // unpublished rows, which the purge does not touch (dead letters aside, when their retention is set).
  const snapshot = await readOutboxSnapshot(pool, config.purge).catch((error: unknown) => {
    recordSnapshotError(metrics);
    failures.push(`outbox snapshot failed: ${errorMessage(error)}`);
    logger.error("outbox snapshot failed; its metrics are missing for this run", {
      error: errorMessage(error),
    });
    return undefined;
  });
  if (snapshot !== undefined) recordOutboxSnapshot(metrics, snapshot);
  let result: PurgeSummary | { snapshotOnly: true };
  if ("snapshotOnly" in event && event.snapshotOnly === true) {
    logger.info("outbox snapshot", { snapshot });
    result = { snapshotOnly: true };
  } else {
    const summary = await runPurge({ pool, deadline, logger }, config.purge);
    recordPurgeSummary(metrics, summary);
    logger.info("purge finished", { summary, snapshot });
    if (summary.stoppedBy === "error") failures.push(`purge stopped by an error: ${summary.error}`);
    result = summary;
  }
  if (failures.length > 0) throw new Error(failures.join("; "));
  return result;
}

export const handler = middy(purge).use(injectLambdaContext(logger)).use(logMetrics(metrics));
