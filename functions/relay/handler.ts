import { Logger } from "@aws-lambda-powertools/logger";
import { injectLambdaContext } from "@aws-lambda-powertools/logger/middleware";
import { logMetrics } from "@aws-lambda-powertools/metrics/middleware";
import middy from "@middy/core";
import type { Context, ScheduledEvent } from "aws-lambda";
import { createDatabasePool, queryTimeoutFor } from "../shared/db/connection.ts";
import { createDestination } from "../shared/destinations/create.ts";
import { createMetrics, RelayMetrics, relayMetricsOptionsFromEnv } from "../shared/observe/metrics.ts";
import { serviceNameFromEnv } from "../shared/observe/settings.ts";
import type { RelaySummary } from "../shared/relay/engine.ts";
import * as invocation from "../shared/relay/invocation.ts";
import { relayConfigFromEnv } from "../shared/relay/settings.ts";

// Cold start: configuration errors fail here, naming the variable, before any event is handled. Clients are
// created once per container; the SDK reads AWS_ENDPOINT_URL, region and credentials from the environment.
const config = relayConfigFromEnv(process.env);
const logger = new Logger({ serviceName: serviceNameFromEnv(process.env, "outbox-relay") });
const metrics = createMetrics(process.env, "outbox-relay");
const metricsOptions = relayMetricsOptionsFromEnv(process.env);
const clientOptions = invocation.destinationClientOptions(config);
const { destination } = await createDestination(config.destination, clientOptions);
invocation.checkMaxDuration(config, destination.maxMessageBytes);
// The invocation's deadline: a checkout retrying a rotation's authentication failures stops before it.
let currentDeadline: number | undefined;
const pool = await createDatabasePool(config.database, {
  deadline: () => currentDeadline,
  max: invocation.relaySessions(config),
  applicationName: "outbox-relay",
  // Claim, record, COMMIT and ROLLBACK each fail within this even if the network path died silently.
  queryTimeoutMs: queryTimeoutFor(invocation.longestStatementMs(config, destination.maxMessageBytes)),
  onError: (error) =>
    logger.warn("idle database connection failed; it will be replaced", { error: error.message }),
});
const checkDestinationOnce = invocation.destinationCheckOnce(destination, logger);

/**
 * Invoked by the EventBridge schedule; relays until the time budget ends (dwell) or nothing is left (drain). The
 * metrics write a heartbeat and any stall every flush interval while it runs (RelayMetrics.observe).
 */
export async function relay(
  _event: ScheduledEvent | Record<string, never>,
  context: Context,
): Promise<RelaySummary> {
  const { noProgress, ...summary } = await new RelayMetrics(metrics, metricsOptions).observe(
    async (observer) => {
      const deadline = invocation.invocationDeadline(
        config,
        Date.now(),
        context.getRemainingTimeInMillis(),
        destination.maxMessageBytes,
      );
      currentDeadline = deadline;
      // The first invocation checks the destination, before relaying or, for a route table, beside it.
      return checkDestinationOnce(deadline, (signal) =>
        invocation.relayInvocation(
          { pool, destination, deadline, logger, ...observer, ...(signal ? { signal } : {}) },
          config,
        ),
      );
    },
  );
  logger.info("relay finished", { summary });
  // Nothing got through although there was work: fail the invocation so Lambda's Errors metric sees it.
  if (noProgress !== undefined) throw noProgress;
  return summary;
}

export const handler = middy(relay).use(injectLambdaContext(logger)).use(logMetrics(metrics));
