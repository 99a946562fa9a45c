import { Logger } from "@aws-lambda-powertools/logger";
import { injectLambdaContext } from "@aws-lambda-powertools/logger/middleware";
import { logMetrics } from "@aws-lambda-powertools/metrics/middleware";
import middy from "@middy/core";
import type { Context, ScheduledEvent } from "aws-lambda";
import { createDestination } from "../shared/destinations/create.ts";
import { createMetrics, RelayMetrics, relayMetricsOptionsFromEnv } from "../shared/observe/metrics.ts";
import { serviceNameFromEnv } from "../shared/observe/settings.ts";
import type { RelaySummary } from "../shared/relay/engine.ts";
import { type RelayTick, relaySlotOf } from "../shared/relay/handover.ts";
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
// The current invocation's deadline, which a checkout retrying authentication failures stops before.
let currentDeadline: number | undefined;
const pool = await invocation.relayPool(config, destination, logger, () => currentDeadline);
const checkDestinationOnce = invocation.destinationCheckOnce(destination, logger);

/** Each tick: relays until the budget ends, a successor takes over (dwell) or nothing is left (drain). */
export async function relay(
  event: ScheduledEvent | RelayTick | Record<string, never>,
  context: Context,
): Promise<RelaySummary> {
  const handover = { slot: relaySlotOf(event), startedAt: Date.now() };
  const { noProgress, ...summary } = await new RelayMetrics(metrics, metricsOptions).observe(
    async (observer) => {
      const deadline = invocation.invocationDeadline(
        config,
        handover.startedAt,
        context.getRemainingTimeInMillis(),
        destination.maxMessageBytes,
      );
      currentDeadline = deadline;
      // The first invocation checks the destination, before relaying or, for a route table, beside it.
      return checkDestinationOnce(deadline, (signal) =>
        invocation.relayInvocation(
          { pool, destination, deadline, logger, handover, ...observer, ...(signal ? { signal } : {}) },
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
