import { ConfigError, errorMessage, OutboxError } from "../outbox/errors.ts";
import { DEADLINE_MARGIN_MS, fitsDeadline } from "./deadline.ts";
import { safeLogger } from "./inboxLogger.ts";
import { type InboxHandlerOptions, inboxSettings } from "./inboxOptions.ts";
import { type InboxRecord, recordId } from "./inboxRecord.ts";
import type { KinesisEvent } from "./kinesisEvent.ts";
import { publishOutcomeCounts } from "./outcomeMetrics.ts";
import type { PayloadParser } from "./payloadParser.ts";
import { newBatchState, outcomeReporter } from "./recordOutcome.ts";
import { batchProcessor } from "./recordPipeline.ts";
import { transactionRunner } from "./recordTransaction.ts";
import { eventRouter, type InboxRecordHandler, type InboxRoutes } from "./router.ts";
import type { LambdaContextLike, SqsBatchResponse, SqsEvent } from "./sqsEvent.ts";

/**
 * The consumer side of the outbox: a Lambda handler for an SQS or Kinesis event source that applies each event at
 * most once, however often it is delivered. The queue is the relay's SQS queue, a queue subscribed to its SNS topic
 * (raw or enveloped), or a queue an EventBridge rule delivers the relay's events to; the stream is the relay's
 * Kinesis stream (parseInboxEvent reads them all; a Kinesis record's group is its partition key). With a bus the inbox is what makes the
 * delivery safe: EventBridge does not deduplicate, retries a target on its own, and may deliver an event twice.
 *
 * Guarantees, per record:
 * - The inbox row (keyed by consumer and outbox id) and everything the user's handler writes through
 *   `context.client` commit in ONE transaction, or neither does; the record is reported done only if that
 *   COMMIT really committed (Postgres answers COMMIT of an aborted transaction with ROLLBACK, not an error:
 *   a handler that caught one of its own SQL errors fails its record). `context.client` refuses transaction
 *   control (transactionGuard.ts), so the handler cannot commit part of the work early. A redelivery (the
 *   relay republished after SQS's 5-minute deduplication window, this function died between commit and
 *   acknowledgement, a visibility timeout ran out) finds the id and is skipped: exactly-once effects for work
 *   done in this database.
 * - With `staleEvents: "skip"`, an event older (by outbox `seq`) than one of its aggregate this consumer
 *   already applied is acknowledged without running the handler (a DLQ or outbox redrive, a bus).
 * - Serialization failures and deadlocks (40001, 40P01) are retried in process, a bounded number of times.
 *   An outage (the database unreachable or not answering) fails the whole invocation when nothing could be
 *   done, so it shows in the function's Errors metric. Callbacks (onOutcome, the logger, metrics) never change
 *   an outcome.
 * - No record starts when the invocation's remaining time cannot fit its statement timeout: it and the rest
 *   of its group are reported failed, unprocessed, instead of being cut off by the Lambda timeout.
 * - A record that fails (its handler throws, it cannot be parsed, the database is down) is reported in
 *   `batchItemFailures`, and so is every later record of its message group in the batch, unprocessed: SQS
 *   redelivers them in order, and a message that keeps failing ends in the queue's dead-letter queue after
 *   maxReceiveCount receives without holding up other groups.
 * - Other groups go on. Groups run concurrently (up to `groupConcurrency`), each group's records one after
 *   another in the order SQS delivered them.
 * Not guaranteed: side effects outside the transaction (HTTP calls, other queues) can happen more than once.
 *
 * Why not Powertools' SqsFifoPartialProcessor(Async) with `skipGroupOnError`: it has the same group rule but
 * runs the whole batch one record at a time (its async variant too), where groups here run side by side; its
 * package has no release matching our Powertools logger (2.36.0; batch stops at 2.35.0, which would install a
 * second copy of @aws-lambda-powertools/commons); and the outcomes we need (duplicate, ignored, malformed) are
 * not its success/failure pair. The group rule itself is processByGroup.ts, forty lines.
 *
 * This module is the assembly and the invocation's verdict; the parts are their own modules: the options and
 * their checks (inboxOptions.ts), event type -> handler (router.ts), one record's transaction and the batch's
 * groups (recordPipeline.ts), the tally of outcomes (recordOutcome.ts).
 */

export type InboxLambdaHandler = (event: SqsEvent, context?: LambdaContextLike) => Promise<SqsBatchResponse>;

/**
 * The same handler given a Kinesis event source: partial batch failures have the same shape, with the record's
 * sequence number as `itemIdentifier`. A created handler is both (an `SQSHandler` and a `KinesisStreamHandler`).
 */
export type InboxStreamHandler = (
  event: KinesisEvent,
  context?: LambdaContextLike,
) => Promise<SqsBatchResponse>;

/**
 * What createInboxHandler returns: one handler for either event source. SQS's signature last: inference from an
 * overloaded function (middy's, for one) takes the last signature, and SQS is what existing code wraps.
 */
export type InboxHandler = InboxStreamHandler & InboxLambdaHandler;

/**
 * Thrown by the Lambda handler when every record failed and the inbox's database failed under at least one
 * (connecting, beginning, recording the id, committing, or any statement that timed out on the client or lost
 * its connection, the handler's own included). The whole batch comes back either way; failing the invocation
 * makes it count in the function's Errors metric, which the construct alarms on, so an outage is loud instead
 * of a quiet stream of "failed" records.
 */
export class InboxUnavailableError extends OutboxError {
  override name = "InboxUnavailableError";
}

/** The invocation cannot fit even one record's statement timeout: the function timeout is too short. */
export class InboxDeadlineError extends ConfigError {
  override name = "InboxDeadlineError";
}

/** One handler for every event; `parse` validates the payload before it runs, and types it. */
export function createInboxHandler<Payload>(
  handler: InboxRecordHandler<NoInfer<Payload>>,
  options: InboxHandlerOptions & { parse: PayloadParser<Payload> },
): InboxHandler;
/** One handler for every event, its payload typed by its annotation (`(e: InboxEvent<Order>) => ...`). */
export function createInboxHandler<Payload = unknown>(
  handler: InboxRecordHandler<Payload>,
  options: InboxHandlerOptions & { parse?: undefined },
): InboxHandler;
/** A handler per event type; each route may carry its own `parse`. */
export function createInboxHandler<Payloads extends Record<string, unknown>>(
  routes: InboxRoutes<Payloads>,
  options: InboxHandlerOptions,
): InboxHandler;
export function createInboxHandler(
  handler: InboxRecordHandler<unknown> | InboxRoutes,
  options: InboxHandlerOptions & { parse?: PayloadParser<unknown> },
): InboxHandler {
  const settings = inboxSettings(options);
  const { statementTimeoutMs } = settings;
  const transaction = transactionRunner(settings.session);
  const route = eventRouter(handler, options.unknownEventTypes ?? "fail", options.parse);
  const logger = safeLogger(options.logger);
  const report = outcomeReporter(options.onOutcome, logger);
  const processBatch = batchProcessor({ settings, transaction, route, logger, report });

  return async (event: SqsEvent | KinesisEvent, lambdaContext?: LambdaContextLike) => {
    const records: readonly InboxRecord[] = event.Records ?? [];
    const batch = newBatchState();
    try {
      const remaining = lambdaContext?.getRemainingTimeInMillis?.();
      if (records.length > 0 && !fitsDeadline(lambdaContext, statementTimeoutMs)) {
        // Not even the first record fits: every invocation would end like this one. Fail loudly.
        batch.counts.skipped += records.length;
        throw new InboxDeadlineError(
          `the invocation has ${remaining} ms left, which cannot fit statementTimeoutMs ${statementTimeoutMs} ` +
            `+ ${DEADLINE_MARGIN_MS} ms: raise the function's timeout or lower statementTimeoutMs`,
        );
      }
      const failed = await processBatch(records, lambdaContext, batch);
      if (records.length > 0 && failed.length === records.length && batch.databaseFailures.length > 0) {
        throw new InboxUnavailableError(
          `all ${records.length} records failed and the inbox database failed under ${batch.databaseFailures.length}: ` +
            `${errorMessage(batch.databaseFailures[0])}; the whole batch is retried`,
          { cause: batch.databaseFailures[0] },
        );
      }
      if (failed.length > 0) {
        logger.warn("batch done with failures; SQS redelivers the failed records", {
          records: records.length,
          failed: failed.length,
        });
      }
      return { batchItemFailures: failed.map((record) => ({ itemIdentifier: recordId(record) })) };
    } finally {
      if (options.metrics !== undefined) publishOutcomeCounts(options.metrics, batch.counts, logger);
    }
  };
}
