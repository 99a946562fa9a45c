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
  event: ScheduledEvent | RelayTick | Record<string, never>,
  context: Context,
): Promise<RelaySummary> {
  const startedAt = Date.now();
  const handover = { slot: relaySlot(event), startedAt };
  const { noProgress, ...summary } = await new RelayMetrics(metrics, metricsOptions).observe(
    async (observer) => {
      const deadline = invocation.invocationDeadline(
        config,
        startedAt,
        context.getRemainingTimeInMillis(),
        destination.maxMessageBytes,
      );
      currentDeadline = deadline;
      await checkDestinationOnce(deadline);
      return invocation.relayInvocation(
        { pool, destination, deadline, logger, handover, ...observer },
        config,
      );
    },
  );
  logger.info("relay finished", { summary });
  // Nothing got through although there was work: fail the invocation so Lambda's Errors metric sees it.
  if (noProgress !== undefined) throw noProgress;
  return summary;
}

/** The schedule's input per target (infra/schedules.ts): which relay slot this invocation dwells in. */
export interface RelayTick {
  relaySlot: number;
}

/** A tick without a slot (a hand-started invocation, an older rule) dwells in slot 0. */
function relaySlot(event: object): number {
  const slot = (event as Partial<RelayTick>).relaySlot;
  return Number.isInteger(slot) && (slot as number) >= 0 && (slot as number) < 32 ? (slot as number) : 0;
}

export const handler = middy(relay).use(injectLambdaContext(logger)).use(logMetrics(metrics));
