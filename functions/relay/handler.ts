import { Logger } from "@aws-lambda-powertools/logger";
import { injectLambdaContext } from "@aws-lambda-powertools/logger/middleware";
import { logMetrics } from "@aws-lambda-powertools/metrics/middleware";
import middy from "@middy/core";
import type { Context, ScheduledEvent } from "aws-lambda";
import { createDatabasePool, queryTimeoutFor } from "#shared/db/connection.ts";
import { withTransaction } from "#shared/db/session.ts";
import { createDestination } from "#shared/destinations/create.ts";
import { createMetrics, RelayMetrics, relayMetricsOptionsFromEnv } from "#shared/observe/metrics.ts";
import { outboxNames } from "#shared/outbox/names.ts";
import { type RelaySummary, runRelay } from "#shared/relay/engine.ts";
import {
  checkMaxDuration,
  FailureRecorder,
  invocationDeadline,
  noProgressError,
} from "#shared/relay/invocation.ts";
import { checkOrderKeyBeforeRelaying } from "#shared/relay/orderKey.ts";
import { relayConfigFromEnv } from "#shared/relay/settings.ts";
import { hasPendingEvents } from "#shared/relay/sql/pendingEvents.ts";
import { listenForOutboxInserts } from "#shared/relay/wakeUp.ts";

// Cold start: configuration errors fail here, naming the variable, before any event is handled.
const config = relayConfigFromEnv(process.env);
checkMaxDuration(config);
const logger = new Logger({ serviceName: process.env.POWERTOOLS_SERVICE_NAME ?? "outbox-relay" });
const metrics = createMetrics(process.env, "outbox-relay");
const metricsOptions = relayMetricsOptionsFromEnv(process.env);
// The SQS FIFO queue or the EventBridge bus, whichever the configuration names; its client is created here, once
// per container (destinations/create.ts: short SDK retries, a socket per request in flight). The SDK reads
// AWS_ENDPOINT_URL / region / credentials from the environment as usual.
const { destination } = createDestination(config.destination, {
  sockets: config.relay.concurrency * config.relay.parallelRounds,
  requestTimeoutMs: config.relay.publishTimeoutMs,
});
const pool = await createDatabasePool(config.database, {
  // A session per parallel round, plus the LISTEN session.
  max: config.relay.parallelRounds + (config.listen ? 1 : 0),
  applicationName: "outbox-relay",
  // Claim, record, COMMIT and ROLLBACK each fail within this even if the network path died silently.
  queryTimeoutMs: queryTimeoutFor(config.relay.statementTimeoutMs),
  onError: (error) =>
    logger.warn("idle database connection failed; it will be replaced", { error: error.message }),
});

/**
 * Once per container, on the first invocation (a check at init would count against Lambda's 10 s init limit):
 * a destination that cannot take the relay's messages (a queue that does not exist, is not FIFO, or takes smaller
 * messages) fails every invocation, naming what is wrong, instead of turning the backlog into dead letters. Only
 * a verified (or unverifiable: no permission to ask) destination is remembered, so a fixed one is picked up by
 * the next invocation. A bus has no such check: PutEvents failures are retried, never dead-lettered.
 */
let destinationChecked = false;
async function checkDestinationOnce(deadline: number) {
  if (destinationChecked) return;
  // Within the invocation's budget: an unreachable endpoint fails the invocation before Lambda's timeout does.
  const timeoutMs = Math.max(1_000, Math.min(15_000, deadline - Date.now()));
  const check = (await destination.check?.(timeoutMs)) ?? { verified: true };
  if (!check.verified) logger.warn("destination not verified; relaying anyway", { reason: check.reason });
  destinationChecked = true;
}

/** Invoked by the EventBridge schedule; relays until the time budget ends (dwell) or nothing is left (drain). */
export async function relay(
  _event: ScheduledEvent | Record<string, never>,
  context: Context,
): Promise<RelaySummary> {
  const deadline = invocationDeadline(config, Date.now(), context.getRemainingTimeInMillis());
  await checkDestinationOnce(deadline);
  await checkOrderKeyBeforeRelaying(pool, outboxNames(config.relay), config.relay.statementTimeoutMs);
  // LISTEN per invocation: a session kept across frozen invocations would likely be dead on the next one.
  const wakeUp = config.listen ? await listenForOutboxInserts(pool, config.relay) : undefined;
  const relayMetrics = new RelayMetrics(metrics, metricsOptions);
  const onRound = relayMetrics.recordRound.bind(relayMetrics);
  const failures = new FailureRecorder(logger);
  const summary = await runRelay(
    { pool, destination, deadline, logger: failures, wakeUp, onRound },
    config.relay,
  ).finally(() => wakeUp?.close());
  relayMetrics.finish(summary);
  logger.info("relay finished", { summary });
  // Nothing got through although there was work (database, queue or bus unreachable, a statement stuck holding
  // the claim's locks): fail the invocation so Lambda's Errors metric and its alarm see it.
  const pending =
    summary.published === 0 && summary.failedRounds > 0 && summary.rounds > 0
      ? await withTransaction(pool, async (client) => {
          await client.query("select set_config('statement_timeout', $1, true)", [
            String(config.relay.statementTimeoutMs),
          ]);
          return hasPendingEvents(client, outboxNames(config.relay));
        }).catch(() => undefined)
      : undefined;
  const stuck = noProgressError(summary, failures.lastPublishError, pending);
  if (stuck !== undefined) throw stuck;
  return summary;
}

export const handler = middy(relay).use(injectLambdaContext(logger)).use(logMetrics(metrics));
