import http from "node:http";
import https from "node:https";
import { Logger } from "@aws-lambda-powertools/logger";
import { injectLambdaContext } from "@aws-lambda-powertools/logger/middleware";
import { logMetrics } from "@aws-lambda-powertools/metrics/middleware";
import { SQSClient } from "@aws-sdk/client-sqs";
import middy from "@middy/core";
import type { Context, ScheduledEvent } from "aws-lambda";
import { createDatabasePool, queryTimeoutFor } from "#shared/connection.ts";
import { createMetrics, RelayMetrics } from "#shared/metrics.ts";
import { listenForOutboxInserts } from "#shared/notify.ts";
import { type RelaySummary, runRelay } from "#shared/relay.ts";
import { relayConfigFromEnv } from "#shared/relayConfig.ts";

// Cold start: configuration errors fail here, naming the variable, before any event is handled.
const config = relayConfigFromEnv(process.env);
const logger = new Logger({ serviceName: process.env.POWERTOOLS_SERVICE_NAME ?? "outbox-relay" });
const metrics = createMetrics(process.env, "outbox-relay");
// The SDK reads AWS_ENDPOINT_URL / region / credentials from the environment as usual. Its own retries are
// kept short: the relay's backoff, not the SDK's, decides when a failed row is tried again. The agent gets a
// socket per concurrent request (the SDK's default of 50 would silently queue RELAY_CONCURRENCY above it), and
// the per-body MD5 check is off: TLS already guarantees integrity, and it cost ~5-8 us of the relay's ~55 us
// of CPU per event (bench, docs/benchmarks.md).
const sqs = new SQSClient({
  maxAttempts: 3,
  md5: false,
  requestHandler: {
    connectionTimeout: 3_000,
    requestTimeout: config.relay.publishTimeoutMs,
    httpsAgent: new https.Agent({ keepAlive: true, maxSockets: config.relay.concurrency }),
    httpAgent: new http.Agent({ keepAlive: true, maxSockets: config.relay.concurrency }),
  },
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

/** Invoked by the EventBridge schedule; relays until the time budget ends (dwell) or nothing is left (drain). */
export async function relay(
  _event: ScheduledEvent | Record<string, never>,
  context: Context,
): Promise<RelaySummary> {
  const now = Date.now();
  const budgetEnd = now + context.getRemainingTimeInMillis() - config.budgetMarginMs;
  const deadline =
    config.maxDurationMs === undefined ? budgetEnd : Math.min(budgetEnd, now + config.maxDurationMs);
  // LISTEN per invocation: a session kept across frozen invocations would likely be dead on the next one.
  const wakeUp = config.listen ? await listenForOutboxInserts(pool, config.relay) : undefined;
  const relayMetrics = new RelayMetrics(metrics);
  const onRound = relayMetrics.recordRound.bind(relayMetrics);
  const summary = await runRelay({ pool, sqs, deadline, logger, wakeUp, onRound }, config.relay).finally(() =>
    wakeUp?.close(),
  );
  relayMetrics.finish();
  logger.info("relay finished", { summary });
  if (summary.rounds === 0 && summary.failedRounds > 0) {
    // Nothing worked in this invocation (database unreachable?): fail it so Lambda's Errors metric and alarm see it.
    throw new Error(`relay made no progress: ${summary.lastError}`);
  }
  return summary;
}

export const handler = middy(relay).use(injectLambdaContext(logger)).use(logMetrics(metrics));
