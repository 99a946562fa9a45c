import { Logger } from "@aws-lambda-powertools/logger";
import { injectLambdaContext } from "@aws-lambda-powertools/logger/middleware";
import { logMetrics } from "@aws-lambda-powertools/metrics/middleware";
import middy from "@middy/core";
import type { Context, ScheduledEvent } from "aws-lambda";
import { createDatabasePool, queryTimeoutFor } from "#shared/db/connection.ts";
import { createDestination } from "#shared/destinations/create.ts";
import { createMetrics, RelayMetrics, relayMetricsOptionsFromEnv } from "#shared/observe/metrics.ts";
import { serviceNameFromEnv } from "#shared/observe/settings.ts";
import type { RelaySummary } from "#shared/relay/engine.ts";
import * as invocation from "#shared/relay/invocation.ts";
import { relayConfigFromEnv } from "#shared/relay/settings.ts";

// Cold start: configuration errors fail here, naming the variable, before any event is handled. Clients are
// created once per container; the SDK reads AWS_ENDPOINT_URL, region and credentials from the environment.
const config = relayConfigFromEnv(process.env);
invocation.checkMaxDuration(config);
const logger = new Logger({ serviceName: serviceNameFromEnv(process.env, "outbox-relay") });
const metrics = createMetrics(process.env, "outbox-relay");
const metricsOptions = relayMetricsOptionsFromEnv(process.env);
const { destination } = createDestination(config.destination, invocation.destinationClientOptions(config));
// The current invocation's deadline: a checkout retrying authentication failures (a rotation's window) stops
// before it.
let currentDeadline: number | undefined;
const pool = await createDatabasePool(config.database, {
  deadline: () => currentDeadline,
  max: invocation.relaySessions(config),
  applicationName: "outbox-relay",
  // Claim, record, COMMIT and ROLLBACK each fail within this even if the network path died silently.
  queryTimeoutMs: queryTimeoutFor(config.relay.statementTimeoutMs),
  onError: (error) =>
    logger.warn("idle database connection failed; it will be replaced", { error: error.message }),
});
// Checked on the first invocation, not at init (Lambda's 10 s init limit); a check that throws is made again by
// the next invocation, so a fixed destination is picked up.
let destinationChecked = false;

/** Invoked by the EventBridge schedule; relays until the time budget ends (dwell) or nothing is left (drain). */
export async function relay(
  _event: ScheduledEvent | Record<string, never>,
  context: Context,
): Promise<RelaySummary> {
  const deadline = invocation.invocationDeadline(config, Date.now(), context.getRemainingTimeInMillis());
  currentDeadline = deadline;
  if (!destinationChecked) {
    await invocation.checkDestination(destination, logger, invocation.checkTimeoutMs(deadline));
    destinationChecked = true;
  }
  const relayMetrics = new RelayMetrics(metrics, metricsOptions);
  const onRound = relayMetrics.recordRound.bind(relayMetrics);
  const { noProgress, ...summary } = await invocation.relayInvocation(
    { pool, destination, deadline, logger, onRound },
    config,
  );
  relayMetrics.finish(summary);
  logger.info("relay finished", { summary });
  // Nothing got through although there was work: fail the invocation so Lambda's Errors metric sees it.
  if (noProgress !== undefined) throw noProgress;
  return summary;
}

export const handler = middy(relay).use(injectLambdaContext(logger)).use(logMetrics(metrics));
