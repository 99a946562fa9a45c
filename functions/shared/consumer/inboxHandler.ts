import type { Queryable, SessionClient, SessionPool } from "../db.ts";
import { withTransaction } from "../db.ts";
import { checkIntegerOption } from "../env.ts";
import { ConfigError, errorMessage, OutboxError } from "../errors.ts";
import { type InboxEvent, parseInboxEvent } from "./inboxEvent.ts";
import { type InboxLocation, inboxNames } from "./inboxTable.ts";
import { processByGroup } from "./processByGroup.ts";
import { recordInbox } from "./sql/recordInbox.ts";
import type { LambdaContextLike, SqsBatchResponse, SqsEvent, SqsRecord } from "./sqsEvent.ts";

/**
 * The consumer side of the outbox: a Lambda handler for an SQS event source that applies each event at
 * most once, however often SQS delivers it. The queue is the relay's SQS FIFO queue, or a queue an EventBridge
 * rule delivers the relay's events to (parseInboxEvent reads both). With a bus the inbox is what makes the
 * delivery safe: EventBridge does not deduplicate, retries a target on its own, and may deliver an event twice.
 *
 * Guarantees, per record:
 * - The inbox row (keyed by the outbox id) and everything the user's handler writes through `context.client`
 *   commit in ONE transaction, or neither does. A redelivery (the relay republished after SQS's 5-minute
 *   deduplication window, this function died between commit and acknowledgement, a visibility timeout ran
 *   out) finds the id and is skipped: exactly-once effects for work done in this database.
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
  /** The record's transaction: write through it so the writes commit with the inbox row. */
  client: Queryable;
  record: SqsRecord;
  lambdaContext: LambdaContextLike | undefined;
}

export type InboxRecordHandler<Payload = unknown> = (
  event: InboxEvent<Payload>,
  context: InboxHandlerContext,
) => Promise<void> | void;

/** Handlers by event type, for `createInboxHandler(routes, ...)`. */
export type InboxRoutes = Record<string, InboxRecordHandler>;

export interface InboxLogger {
  info(message: string, fields: Record<string, unknown>): void;
  warn(message: string, fields: Record<string, unknown>): void;
  error(message: string, fields: Record<string, unknown>): void;
}

/** What became of one record; `onOutcome` receives each, for metrics or tests. */
export type RecordOutcome =
  | { status: "processed"; messageId: string; event: InboxEvent }
  /** The inbox already had the outbox id: nothing was run. */
  | { status: "duplicate"; messageId: string; event: InboxEvent }
  /** Routes had no handler for its event type and `unknownEventTypes` is "ignore": recorded, nothing run. */
  | { status: "ignored"; messageId: string; event: InboxEvent }
  /** Parsing, the handler or the database failed: rolled back, reported for redelivery. */
  | { status: "failed"; messageId: string; event: InboxEvent | undefined; error: unknown }
  /** An earlier record of its message group failed in this batch: not run, reported for redelivery. */
  | { status: "skipped"; messageId: string; groupId: string };

export interface InboxHandlerOptions extends InboxLocation {
  /** The consumer's database (a pg.Pool fits). One of `pool` or `withClient`. */
  pool?: SessionPool;
  /** Lends a session for `work` and takes it back (e.g. an RDS Proxy pool of your own). */
  withClient?: <T>(work: (client: SessionClient) => Promise<T>) => Promise<T>;
  logger?: InboxLogger;
  /** Message groups processed at the same time; each takes one database session. Default 4 (1-10). */
  groupConcurrency?: number;
  /** statement_timeout and idle_in_transaction_session_timeout of each record's transaction. Default 30,000 ms. */
  statementTimeoutMs?: number;
  /** With routes: an event type without a route fails its record (default) or is recorded and skipped. */
  unknownEventTypes?: "fail" | "ignore";
  onOutcome?: (outcome: RecordOutcome) => void;
}

export type InboxLambdaHandler = (event: SqsEvent, context?: LambdaContextLike) => Promise<SqsBatchResponse>;

export const DEFAULT_GROUP_CONCURRENCY = 4;
export const DEFAULT_INBOX_STATEMENT_TIMEOUT_MS = 30_000;

/**
 * Thrown by the Lambda handler when every record failed and the inbox's database failed under at least one
 * (connecting, beginning, recording the id, committing: before or after the user's handler, not in it). The
 * whole batch comes back either way; failing the invocation makes it count in the function's Errors metric,
 * which the construct alarms on, so an outage is loud instead of a quiet stream of "failed" records.
 */
export class InboxUnavailableError extends OutboxError {
  override name = "InboxUnavailableError";
}

/** Thrown for an event type that has no route (with `unknownEventTypes: "fail"`). */
export class UnroutedEventError extends ConfigError {
  override name = "UnroutedEventError";
}

export function createInboxHandler(
  handler: InboxRecordHandler | InboxRoutes,
  options: InboxHandlerOptions,
): InboxLambdaHandler {
  const names = inboxNames(options);
  const groupConcurrency = options.groupConcurrency ?? DEFAULT_GROUP_CONCURRENCY;
  const statementTimeoutMs = options.statementTimeoutMs ?? DEFAULT_INBOX_STATEMENT_TIMEOUT_MS;
  // Ten is the most a FIFO event source hands over in one batch: more could never run.
  checkIntegerOption("groupConcurrency", groupConcurrency, 1, 10);
  checkIntegerOption("statementTimeoutMs", statementTimeoutMs, 100, 900_000);
  const transaction = transactionRunner(options);
  const route = router(handler, options.unknownEventTypes ?? "fail");
  const logger = options.logger;
  const report = options.onOutcome ?? (() => {});

  const processRecord = async (
    record: SqsRecord,
    lambdaContext: LambdaContextLike | undefined,
    databaseFailures: unknown[],
  ) => {
    let event: InboxEvent | undefined;
    let inUserHandler = false;
    try {
      event = parseInboxEvent(record);
      const parsed = event;
      const run = route(parsed);
      const status = await transaction(async (client) => {
        await client.query(
          `select set_config('statement_timeout', $1, true),
                  set_config('idle_in_transaction_session_timeout', $1, true)`,
          [String(statementTimeoutMs)],
        );
        if (!(await recordInbox(client, names, parsed))) return "duplicate" as const;
        if (run === undefined) return "ignored" as const;
        inUserHandler = true;
        await run(parsed, { client, record, lambdaContext });
        inUserHandler = false;
        return "processed" as const;
      });
      if (status === "duplicate") {
        logger?.info(
          "duplicate delivery skipped: the inbox already has this outbox id",
          fields(record, parsed),
        );
      } else if (status === "ignored") {
        logger?.info("no route for this event type; recorded and skipped", fields(record, parsed));
      }
      report({ status, messageId: record.messageId, event: parsed });
      return true;
    } catch (error) {
      if (event !== undefined && !inUserHandler && !(error instanceof OutboxError))
        databaseFailures.push(error);
      logger?.error(
        event === undefined
          ? "message is not an outbox event; it and the rest of its group are redelivered"
          : "event failed; rolled back, it and the rest of its group are redelivered",
        { ...fields(record, event), error: errorMessage(error) },
      );
      report({ status: "failed", messageId: record.messageId, event, error });
      return false;
    }
  };

  return async (sqsEvent, lambdaContext) => {
    const records = sqsEvent.Records ?? [];
    const databaseFailures: unknown[] = [];
    const failed = await processByGroup(records, {
      concurrency: groupConcurrency,
      process: (record) => processRecord(record, lambdaContext, databaseFailures),
      onSkipped: (record, groupId) => {
        report({ status: "skipped", messageId: record.messageId, groupId });
      },
    });
    if (records.length > 0 && failed.length === records.length && databaseFailures.length > 0) {
      throw new InboxUnavailableError(
        `all ${records.length} records failed and the inbox database failed under ${databaseFailures.length}: ` +
          `${errorMessage(databaseFailures[0])}; the whole batch is retried`,
        { cause: databaseFailures[0] },
      );
    }
    if (failed.length > 0) {
      logger?.warn("batch done with failures; SQS redelivers the failed records", {
        records: sqsEvent.Records.length,
        failed: failed.length,
      });
    }
    return { batchItemFailures: failed.map((record) => ({ itemIdentifier: record.messageId })) };
  };
}

function transactionRunner(
  options: InboxHandlerOptions,
): <T>(work: (client: SessionClient) => Promise<T>) => Promise<T> {
  const { pool, withClient } = options;
  if ((pool === undefined) === (withClient === undefined)) {
    throw new ConfigError("createInboxHandler: pass exactly one of options.pool and options.withClient");
  }
  if (pool !== undefined) return (work) => withTransaction(pool, work);
  const lend = withClient as NonNullable<InboxHandlerOptions["withClient"]>;
  return (work) =>
    lend(async (client) => {
      await client.query("begin");
      try {
        const result = await work(client);
        await client.query("commit");
        return result;
      } catch (error) {
        await client.query("rollback").catch(() => {});
        throw error;
      }
    });
}

function router(
  handler: InboxRecordHandler | InboxRoutes,
  unknown: "fail" | "ignore",
): (event: InboxEvent) => InboxRecordHandler | undefined {
  if (typeof handler === "function") return () => handler;
  const routes = new Map(Object.entries(handler));
  for (const [eventType, route] of routes) {
    if (typeof route !== "function") {
      throw new ConfigError(
        `createInboxHandler: the route for ${JSON.stringify(eventType)} is not a function`,
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
        }),
  };
}
