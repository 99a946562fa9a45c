import http from "node:http";
import https from "node:https";
import { Logger } from "@aws-lambda-powertools/logger";
import { injectLambdaContext } from "@aws-lambda-powertools/logger/middleware";
import { logMetrics } from "@aws-lambda-powertools/metrics/middleware";
import { SQSClient } from "@aws-sdk/client-sqs";
import middy from "@middy/core";
import type { Context, ScheduledEvent } from "aws-lambda";
import { createDatabasePool, queryTimeoutFor } from "#shared/connection.ts";
import { createMetrics, RelayMetrics, relayMetricsOptionsFromEnv } from "#shared/metrics.ts";
import { listenForOutboxInserts } from "#shared/notify.ts";
import { checkQueue } from "#shared/queueCheck.ts";
import { type RelaySummary, runRelay } from "#shared/relay.ts";
import { relayConfigFromEnv } from "#shared/relayConfig.ts";
import {
  checkMaxDuration,
  FailureRecorder,
  invocationDeadline,
  noProgressError,
} from "#shared/relayInvocation.ts";

// Cold start: configuration errors fail here, naming the variable, before any event is handled.
const config = relayConfigFromEnv(process.env);
checkMaxDuration(config);
const logger = new Logger({ serviceName: process.env.POWERTOOLS_SERVICE_NAME ?? "outbox-relay" });
const metrics = createMetrics(process.env, "outbox-relay");
const metricsOptions = relayMetricsOptionsFromEnv(process.env);
// The SDK reads AWS_ENDPOINT_URL / region / credentials from the environment as usual. Its own retries are
// kept short: the relay's backoff, not the SDK's, decides when a failed row is tried again. The agent gets a
// socket per concurrent request: RELAY_CONCURRENCY per round times RELAY_PARALLEL_ROUNDS (fewer sockets would
// leave requests queued for one inside the publish timeout; the SDK's default of 50 would cap the product), and
// the per-body MD5 check is off: TLS already guarantees integrity, and it cost ~5-8 us of the relay's ~55 us
// of CPU per event (bench, docs/benchmarks.md).
const sqsSockets = config.relay.concurrency * config.relay.parallelRounds;
const sqs = new SQSClient({
  maxAttempts: 3,
  md5: false,
  requestHandler: {
    connectionTimeout: 3_000,
    requestTimeout: config.relay.publishTimeoutMs,
    httpsAgent: new https.Agent({ keepAlive: true, maxSockets: sqsSockets }),
    httpAgent: new http.Agent({ keepAlive: true, maxSockets: sqsSockets }),
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

/**
 * Once per container, on the first invocation (a check at init would count against Lambda's 10 s init limit):
 * a queue that cannot take the relay's messages fails every invocation, naming what is wrong, instead of turning
 * the backlog into dead letters. Only a verified (or unverifiable: no sqs:GetQueueAttributes) queue is
 * remembered, so a fixed queue is picked up by the next invocation.
 */
let queueChecked = false;
async function checkQueueOnce(deadline: number) {
  if (queueChecked) return;
  // Within the invocation's budget: an unreachable SQS fails the invocation before Lambda's timeout does.
  const timeoutMs = Math.max(1_000, Math.min(15_000, deadline - Date.now()));
  const check = await checkQueue(
    sqs,
    config.relay.queueUrl,
    config.relay.maxMessageBytes,
    undefined,
    timeoutMs,
  );
  if (!check.verified) logger.warn("queue not verified; relaying anyway", { reason: check.reason });
  queueChecked = true;
}

/** Invoked by the EventBridge schedule; relays until the time budget ends (dwell) or nothing is left (drain). */
export async function relay(
  _event: ScheduledEvent | Record<string, never>,
  context: Context,
): Promise<RelaySummary> {
  const deadline = invocationDeadline(config, Date.now(), context.getRemainingTimeInMillis());
  await checkQueueOnce(deadline);
  // LISTEN per invocation: a session kept across frozen invocations would likely be dead on the next one.
  const wakeUp = config.listen ? await listenForOutboxInserts(pool, config.relay) : undefined;
  const relayMetrics = new RelayMetrics(metrics, metricsOptions);
  const onRound = relayMetrics.recordRound.bind(relayMetrics);
  const failures = new FailureRecorder(logger);
  const summary = await runRelay(
    { pool, sqs, deadline, logger: failures, wakeUp, onRound },
    config.relay,
  ).finally(() => wakeUp?.close());
  relayMetrics.finish();
  logger.info("relay finished", { summary });
  // Nothing got through although there was work (database or SQS unreachable): fail the invocation so Lambda's
  // Errors metric and its alarm see it.
  const stuck = noProgressError(summary, failures.lastPublishError);
  if (stuck !== undefined) throw stuck;
  return summary;
}

export const handler = middy(relay).use(injectLambdaContext(logger)).use(logMetrics(metrics));
