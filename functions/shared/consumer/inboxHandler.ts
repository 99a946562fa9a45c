import type { Queryable, SessionClient, SessionPool } from "../db/session.ts";
import { ConfigError, errorMessage, OutboxError } from "../outbox/errors.ts";
import { checkIntegerOption } from "../util/env.ts";
import type { InboxEvent } from "./inboxEvent.ts";
import { type InboxLogger, safeLogger } from "./inboxLogger.ts";
import { type InboxLocation, inboxNames } from "./inboxTable.ts";
import { type InboxMetrics, type OutcomeStatus, publishOutcomeCounts } from "./outcomeMetrics.ts";
import { parseInboxEvent } from "./parseInboxEvent.ts";
import { isPayloadParser, type PayloadParser, parsePayload } from "./payloadParser.ts";
import { processByGroup } from "./processByGroup.ts";
import { backoffMs, isConflict, isOutage, transactionRunner } from "./recordTransaction.ts";
import { advancePosition } from "./sql/advancePosition.ts";
import { recordInbox } from "./sql/recordInbox.ts";
import type { LambdaContextLike, SqsBatchResponse, SqsEvent, SqsRecord } from "./sqsEvent.ts";
import { guardClient } from "./transactionGuard.ts";

/**
 * The consumer side of the outbox: a Lambda handler for an SQS event source that applies each event at
 * most once, however often SQS delivers it. The queue is the relay's SQS FIFO queue, or a queue an EventBridge
 * rule delivers the relay's events to (parseInboxEvent reads both). With a bus the inbox is what makes the
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
 */

export interface InboxHandlerContext {
  /**
   * The record's transaction: write through it so the writes commit with the inbox row. Transaction control
   * (begin, commit, rollback, end, abort, set transaction, prepare transaction) is refused; savepoints of your
   * own are fine. Do not keep it: it refuses everything once the handler has returned.
   */
  client: Queryable;
  record: SqsRecord;
  lambdaContext: LambdaContextLike | undefined;
}

export type InboxRecordHandler<Payload = unknown> = (
  event: InboxEvent<Payload>,
  context: InboxHandlerContext,
) => Promise<void> | void;

/** A route: a handler, or a handler with a `parse` hook that validates (and types) the payload first. */
export type InboxRoute<Payload = unknown> =
  | InboxRecordHandler<Payload>
  | { parse: PayloadParser<Payload>; handle: InboxRecordHandler<Payload> };

/**
 * Handlers by event type, for `createInboxHandler(routes, ...)`. Each route's payload type is its own:
 * `{ "order.placed": (e: InboxEvent<Order>) => ..., "order.paid": { parse: paidSchema, handle } }`.
 */
export type InboxRoutes<Payloads extends Record<string, unknown> = Record<string, unknown>> = {
  [EventType in keyof Payloads]: InboxRoute<Payloads[EventType]>;
};

/**
 * A route with a `parse` hook, its handler's payload typed by what the hook returns (TypeScript cannot infer
 * that inside a routes object on its own): `"order.placed": inboxRoute({ parse: orderSchema, handle })`.
 */
export function inboxRoute<Payload>(route: {
  parse: PayloadParser<Payload>;
  handle: InboxRecordHandler<Payload>;
}): InboxRoute<Payload> {
  return route;
}

/** What became of one record; `onOutcome` receives each, for metrics or tests. */
export type RecordOutcome =
  | { status: "processed"; messageId: string; event: InboxEvent }
  /** This consumer's inbox already had the outbox id: nothing was run. */
  | { status: "duplicate"; messageId: string; event: InboxEvent }
  /**
   * `staleEvents: "skip"`: this consumer already applied an event of the aggregate with a higher (or this)
   * `seq`; acknowledged, nothing run.
   */
  | { status: "stale"; messageId: string; event: InboxEvent }
  /** Routes had no handler for its event type and `unknownEventTypes` is "ignore": recorded, nothing run. */
  | { status: "ignored"; messageId: string; event: InboxEvent }
  /** Parsing, the handler or the database failed: rolled back, reported for redelivery. */
  | { status: "failed"; messageId: string; event: InboxEvent | undefined; error: unknown }
  /**
   * Not run, reported for redelivery: an earlier record of its message group failed in this batch ("group"),
   * or the invocation had too little time left to start it ("deadline").
   */
  | { status: "skipped"; messageId: string; groupId: string; reason: "group" | "deadline" };

export interface InboxHandlerOptions extends InboxLocation {
  /** The consumer's database (a pg.Pool fits). One of `pool` or `withClient`. */
  pool?: SessionPool;
  /** Lends a session for `work` and takes it back (e.g. an RDS Proxy pool of your own). */
  withClient?: <T>(work: (client: SessionClient) => Promise<T>) => Promise<T>;
  /**
   * This consumer's name: it keys the deduplication and the stale-event mark, so several consumers can share
   * one database and inbox table. Default "default" (what the rows of an inbox created before names existed
   * belong to). 1-100 characters.
   */
  consumer?: string;
  /**
   * "apply" (default) runs every new event; "skip" acknowledges without running an event whose outbox `seq`
   * is lower than the highest this consumer applied for its aggregate (outcome "stale").
   */
  staleEvents?: "apply" | "skip";
  logger?: InboxLogger;
  /**
   * A Powertools Metrics instance (or anything with addMetric and publishStoredMetrics): each invocation adds
   * one count per outcome (InboxRecordsProcessed, ...Duplicate, ...Stale, ...Ignored, ...Failed, ...Skipped)
   * and publishes the stored metrics (yours too) as EMF when it ends.
   */
  metrics?: InboxMetrics;
  /** Message groups processed at the same time; each takes one database session. Default 4 (1-10). */
  groupConcurrency?: number;
  /**
   * statement_timeout and idle_in_transaction_session_timeout of each record's transaction. Default 10,000 ms.
   * A record starts only while the invocation has this long plus one second left.
   */
  statementTimeoutMs?: number;
  /** Attempts of a record whose transaction fails with 40001 or 40P01. Default 3 (1-10). */
  maxAttempts?: number;
  /** With routes: an event type without a route fails its record (default) or is recorded and skipped. */
  unknownEventTypes?: "fail" | "ignore";
  onOutcome?: (outcome: RecordOutcome) => void;
}

export type InboxLambdaHandler = (event: SqsEvent, context?: LambdaContextLike) => Promise<SqsBatchResponse>;

export const DEFAULT_GROUP_CONCURRENCY = 4;
export const DEFAULT_INBOX_STATEMENT_TIMEOUT_MS = 10_000;
export const DEFAULT_CONSUMER = "default";
export const DEFAULT_MAX_ATTEMPTS = 3;
/** Kept free after a record's statement timeout: its COMMIT and the response to Lambda. */
export const DEADLINE_MARGIN_MS = 1_000;

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

/** Thrown for an event type that has no route (with `unknownEventTypes: "fail"`). */
export class UnroutedEventError extends ConfigError {
  override name = "UnroutedEventError";
}

/** The invocation cannot fit even one record's statement timeout: the function timeout is too short. */
export class InboxDeadlineError extends ConfigError {
  override name = "InboxDeadlineError";
}

/** One handler for every event; `parse` validates the payload before it runs, and types it. */
export function createInboxHandler<Payload>(
  handler: InboxRecordHandler<NoInfer<Payload>>,
  options: InboxHandlerOptions & { parse: PayloadParser<Payload> },
): InboxLambdaHandler;
/** One handler for every event, its payload typed by its annotation (`(e: InboxEvent<Order>) => ...`). */
export function createInboxHandler<Payload = unknown>(
  handler: InboxRecordHandler<Payload>,
  options: InboxHandlerOptions & { parse?: undefined },
): InboxLambdaHandler;
/** A handler per event type; each route may carry its own `parse`. */
export function createInboxHandler<Payloads extends Record<string, unknown>>(
  routes: InboxRoutes<Payloads>,
  options: InboxHandlerOptions,
): InboxLambdaHandler;
export function createInboxHandler(
  handler: InboxRecordHandler<unknown> | InboxRoutes,
  options: InboxHandlerOptions & { parse?: PayloadParser<unknown> },
): InboxLambdaHandler {
  const names = inboxNames(options);
  const groupConcurrency = options.groupConcurrency ?? DEFAULT_GROUP_CONCURRENCY;
  const statementTimeoutMs = options.statementTimeoutMs ?? DEFAULT_INBOX_STATEMENT_TIMEOUT_MS;
  const maxAttempts = options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
  const consumer = options.consumer ?? DEFAULT_CONSUMER;
  const skipStale = checkChoice("staleEvents", options.staleEvents ?? "apply", ["apply", "skip"]) === "skip";
  // Ten is the most a FIFO event source hands over in one batch: more could never run.
  checkIntegerOption("groupConcurrency", groupConcurrency, 1, 10);
  checkIntegerOption("statementTimeoutMs", statementTimeoutMs, 100, 900_000);
  checkIntegerOption("maxAttempts", maxAttempts, 1, 10);
  if (typeof consumer !== "string" || consumer.length < 1 || consumer.length > 100) {
    throw new ConfigError(
      `createInboxHandler: consumer must be a string of 1 to 100 characters, got ${JSON.stringify(consumer)}`,
    );
  }
  if (options.parse !== undefined && !isPayloadParser(options.parse)) {
    throw new ConfigError("createInboxHandler: parse must be a Standard Schema (~standard) or a function");
  }
  const transaction = transactionRunner(options);
  const route = router(handler, options.unknownEventTypes ?? "fail", options.parse);
  const logger = safeLogger(options.logger);
  const onOutcome = options.onOutcome;
  const fitsDeadline = (lambdaContext: LambdaContextLike | undefined) => {
    const remaining = lambdaContext?.getRemainingTimeInMillis?.();
    return remaining === undefined || remaining >= statementTimeoutMs + DEADLINE_MARGIN_MS;
  };

  const processRecord = async (
    record: SqsRecord,
    lambdaContext: LambdaContextLike | undefined,
    batch: BatchState,
  ) => {
    let event: InboxEvent | undefined;
    let inUserHandler = false;
    try {
      event = parseInboxEvent(record);
      const parsed = event;
      const run = route(parsed);
      let status: "processed" | "duplicate" | "stale" | "ignored" | "deadline" | undefined;
      for (let attempt = 1; status === undefined; attempt++) {
        if (!fitsDeadline(lambdaContext)) {
          status = "deadline";
          break;
        }
        try {
          status = await transaction(async (session) => {
            await session.query(
              `select set_config('statement_timeout', $1, true),
                      set_config('idle_in_transaction_session_timeout', $1, true)`,
              [String(statementTimeoutMs)],
            );
            if (!(await recordInbox(session, names, consumer, parsed))) return "duplicate" as const;
            if (skipStale && !(await advancePosition(session, names, consumer, parsed)))
              return "stale" as const;
            if (run === undefined) return "ignored" as const;
            const guard = guardClient(session);
            inUserHandler = true;
            try {
              await run(parsed, { client: guard.client, record, lambdaContext });
            } finally {
              guard.close();
            }
            const refused = guard.refused();
            if (refused !== undefined) throw refused;
            inUserHandler = false;
            return "processed" as const;
          });
        } catch (error) {
          if (attempt >= maxAttempts || !isConflict(error)) throw error;
          logger.warn("serialization failure or deadlock; the record's transaction is retried", {
            ...fields(record, parsed),
            attempt,
            error: errorMessage(error),
          });
          inUserHandler = false;
          await sleep(backoffMs(attempt));
        }
      }
      if (status === "deadline") {
        const groupId = record.attributes?.MessageGroupId ?? `message:${record.messageId}`;
        logger.warn(
          "too little time left in the invocation to start this record; it and the rest of its group are redelivered",
          { ...fields(record, parsed), remainingMs: lambdaContext?.getRemainingTimeInMillis?.() },
        );
        report(batch, { status: "skipped", messageId: record.messageId, groupId, reason: "deadline" });
        return false;
      }
      if (status === "duplicate") {
        logger.info(
          "duplicate delivery skipped: the inbox already has this outbox id",
          fields(record, parsed),
        );
      } else if (status === "stale") {
        logger.info(
          "stale event skipped: this consumer already applied a later event of the aggregate",
          fields(record, parsed),
        );
      } else if (status === "ignored") {
        logger.info("no route for this event type; recorded and skipped", fields(record, parsed));
      }
      report(batch, { status, messageId: record.messageId, event: parsed });
      return true;
    } catch (error) {
      if (event !== undefined && isOutage(error, inUserHandler)) batch.databaseFailures.push(error);
      logger.error(
        event === undefined
          ? "message is not an outbox event; it and the rest of its group are redelivered"
          : "event failed; rolled back, it and the rest of its group are redelivered",
        { ...fields(record, event), error: errorMessage(error) },
      );
      report(batch, { status: "failed", messageId: record.messageId, event, error });
      return false;
    }
  };

  const report = (batch: BatchState, outcome: RecordOutcome) => {
    batch.counts[outcome.status]++;
    if (onOutcome === undefined) return;
    try {
      onOutcome(outcome);
    } catch (error) {
      logger.error("onOutcome threw; the record's outcome stands", {
        messageId: outcome.messageId,
        status: outcome.status,
        error: errorMessage(error),
      });
    }
  };

  return async (sqsEvent, lambdaContext) => {
    const records = sqsEvent.Records ?? [];
    const batch: BatchState = {
      databaseFailures: [],
      counts: { processed: 0, duplicate: 0, stale: 0, ignored: 0, failed: 0, skipped: 0 },
    };
    try {
      const remaining = lambdaContext?.getRemainingTimeInMillis?.();
      if (records.length > 0 && !fitsDeadline(lambdaContext)) {
        // Not even the first record fits: every invocation would end like this one. Fail loudly.
        batch.counts.skipped += records.length;
        throw new InboxDeadlineError(
          `the invocation has ${remaining} ms left, which cannot fit statementTimeoutMs ${statementTimeoutMs} ` +
            `+ ${DEADLINE_MARGIN_MS} ms: raise the function's timeout or lower statementTimeoutMs`,
        );
      }
      const failed = await processByGroup(records, {
        concurrency: groupConcurrency,
        process: (record) => processRecord(record, lambdaContext, batch),
        onSkipped: (record, groupId) => {
          report(batch, { status: "skipped", messageId: record.messageId, groupId, reason: "group" });
        },
      });
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
      return { batchItemFailures: failed.map((record) => ({ itemIdentifier: record.messageId })) };
    } finally {
      if (options.metrics !== undefined) publishOutcomeCounts(options.metrics, batch.counts, logger);
    }
  };
}

interface BatchState {
  databaseFailures: unknown[];
  counts: Record<OutcomeStatus, number>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function checkChoice<T extends string>(name: string, value: T, choices: readonly T[]): T {
  if (!choices.includes(value)) {
    throw new ConfigError(
      `createInboxHandler: ${name} must be one of ${choices.map((c) => JSON.stringify(c)).join(", ")}, got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

function router(
  handler: InboxRecordHandler<unknown> | InboxRoutes,
  unknown: "fail" | "ignore",
  parse: PayloadParser<unknown> | undefined,
): (event: InboxEvent) => InboxRecordHandler<unknown> | undefined {
  if (typeof handler === "function") return () => withParse(handler, parse);
  const routes = new Map<string, InboxRecordHandler<unknown>>();
  for (const [eventType, route] of Object.entries(handler as InboxRoutes)) {
    if (typeof route === "function") {
      routes.set(eventType, route);
    } else if (
      typeof route === "object" &&
      route !== null &&
      typeof route.handle === "function" &&
      isPayloadParser(route.parse)
    ) {
      routes.set(eventType, withParse(route.handle, route.parse));
    } else {
      throw new ConfigError(
        `createInboxHandler: the route for ${JSON.stringify(eventType)} is not a function or { parse, handle }`,
      );
    }
  }
  return (event) => {
    const route = routes.get(event.eventType);
    if (route === undefined && unknown === "fail") {
      throw new UnroutedEventError(
        `no handler for event type ${JSON.stringify(event.eventType)} (routes: ${[...routes.keys()].join(", ")}); ` +
          'add one, or pass unknownEventTypes: "ignore"',
      );
    }
    return route;
  };
}

function withParse(
  handle: InboxRecordHandler<unknown>,
  parse: PayloadParser<unknown> | undefined,
): InboxRecordHandler<unknown> {
  if (parse === undefined) return handle;
  return async (event, context) => handle(await parsePayload(parse, event), context);
}
function fields(record: SqsRecord, event: InboxEvent | undefined): Record<string, unknown> {
  return {
    messageId: record.messageId,
    messageGroupId: record.attributes?.MessageGroupId,
    receiveCount: record.attributes?.ApproximateReceiveCount,
    ...(event === undefined
      ? {}
      : {
          outboxId: event.id,
          eventType: event.eventType,
          aggregateType: event.aggregateType,
          aggregateId: event.aggregateId,
          // A string: a bigint does not serialize to JSON (and a stale event's log needs it).
          seq: event.seq.toString(),
        }),
  };
}
