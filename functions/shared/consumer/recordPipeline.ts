import { inboxMigrateHint, withMigrateHint } from "../db/notMigrated.ts";
import { isConflict } from "../db/sqlstate.ts";
import { inSpan, openTelemetry, remoteSpanContext } from "../observe/tracing.ts";
import { errorMessage } from "../outbox/errors.ts";
import { sleep } from "../util/sleep.ts";
import { resolveClaimCheck } from "./claimCheck.ts";
import { fitsDeadline } from "./deadline.ts";
import type { InboxEvent } from "./inboxEvent.ts";
import type { InboxLogger } from "./inboxLogger.ts";
import type { InboxSettings } from "./inboxOptions.ts";
import { groupOf, type InboxRecord, recordId } from "./inboxRecord.ts";
import { parseInboxEvent } from "./parseInboxEvent.ts";
import { processByGroup } from "./processByGroup.ts";
import type { BatchState, ReportOutcome } from "./recordOutcome.ts";
import { backoffMs, isOutage, type TransactionRunner } from "./recordTransaction.ts";
import type { EventRouter } from "./router.ts";
import { advancePosition } from "./sql/advancePosition.ts";
import { recordInbox } from "./sql/recordInbox.ts";
import { confirmSameTransaction } from "./sql/sameTransaction.ts";
import type { LambdaContextLike } from "./sqsEvent.ts";
import { guardClient } from "./transactionGuard.ts";

/**
 * A batch's records, each in a transaction of its own: parse, then begin, the inbox row, the stale check, the
 * handler through the guarded client, commit; a conflict retried, a failure told once. The records go through
 * processByGroup, so one message group's records run in order and a failure fails the rest of its group only.
 * Everything a record needs is settled before the batch (settings, route table, transaction runner), so this
 * module decides nothing about configuration, and the invocation (inboxHandler.ts) only judges the result.
 */

export interface RecordPipeline {
  settings: InboxSettings;
  transaction: TransactionRunner;
  route: EventRouter;
  logger: InboxLogger;
  report: ReportOutcome;
}

/** Runs a batch's records; resolves to the records to report in `batchItemFailures`, in delivery order. */
export type BatchProcessor = (
  records: readonly InboxRecord[],
  lambdaContext: LambdaContextLike | undefined,
  batch: BatchState,
) => Promise<InboxRecord[]>;

export function batchProcessor(pipeline: RecordPipeline): BatchProcessor {
  const processRecord = recordProcessor(pipeline);
  return (records, lambdaContext, batch) =>
    processByGroup(records, {
      concurrency: pipeline.settings.groupConcurrency,
      process: (record) => processRecord(record, lambdaContext, batch),
      onSkipped: (record, groupId) => {
        pipeline.report(batch, { status: "skipped", messageId: recordId(record), groupId, reason: "group" });
      },
    });
}

/** One record, start to outcome: true when it is done (acknowledged), false when SQS must redeliver it. */
function recordProcessor({ settings, transaction, route, logger, report }: RecordPipeline) {
  const { names, consumer, skipStale, statementTimeoutMs, maxAttempts } = settings;
  const migrateHint = inboxMigrateHint(names);
  // The idle bound ends the session (and releases the inbox row's lock) if this process freezes mid-record.
  // `read write` whatever the session's default; after a commit the session's settings are reset, so one a
  // handler changed (through a function: the guard refuses `set`) never reaches the next record.
  const bounds = {
    statementTimeoutMs,
    idleInTransactionMs: statementTimeoutMs,
    readWrite: true,
    resetSession: true,
  };
  return async (
    record: InboxRecord,
    lambdaContext: LambdaContextLike | undefined,
    batch: BatchState,
  ): Promise<boolean> => {
    let event: InboxEvent | undefined;
    let inUserHandler = false;
    try {
      event = parseInboxEvent(record);
      // A payload sent through S3 is read before the transaction; a missing object fails the record here.
      event = await resolveClaimCheck(event);
      const parsed = event;
      const run = route(parsed);
      type Status = "processed" | "duplicate" | "stale" | "ignored" | "deadline";
      // The record's span continues the producer's trace (its traceparent, else AWSTraceHeader: docs/tracing.md);
      // the handler's own spans become its children. Nothing without OpenTelemetry (observe/tracing.ts).
      const api = await openTelemetry();
      const span = {
        kind: "consumer" as const,
        parent: api === undefined ? undefined : remoteSpanContext(api, parsed.trace),
        attributes: {
          "messaging.operation.type": "process",
          "messaging.message.id": parsed.id,
          "messaging.destination.name": parsed.origin,
          "outbox.event_type": parsed.eventType,
        },
      };
      const status = await inSpan(api, `process ${parsed.eventType}`, span, async (): Promise<Status> => {
        let status: Status | undefined;
        for (let attempt = 1; status === undefined; attempt++) {
          if (!fitsDeadline(lambdaContext, statementTimeoutMs)) {
            status = "deadline";
            break;
          }
          try {
            status = await transaction(async (session) => {
              const xid = await recordInbox(session, names, consumer, parsed);
              if (xid === undefined) return "duplicate" as const;
              const applied = await (async () => {
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
                return "processed" as const;
              })();
              // Every commit of a transaction that wrote an inbox row is marked as the pipeline's here (inbox
              // migration 0005 refuses any other), after the check that it is still the row's transaction.
              await confirmSameTransaction(session, xid);
              inUserHandler = false;
              return applied;
            }, bounds);
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
        return status;
      });
      if (status === "deadline") {
        const groupId = groupOf(record);
        logger.warn(
          "too little time left in the invocation to start this record; it and the rest of its group are redelivered",
          { ...fields(record, parsed), remainingMs: lambdaContext?.getRemainingTimeInMillis?.() },
        );
        report(batch, { status: "skipped", messageId: recordId(record), groupId, reason: "deadline" });
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
      report(batch, { status, messageId: recordId(record), event: parsed });
      return true;
    } catch (caught) {
      // The inbox's own statements name only its tables: 42P01 there means its migrations have not run.
      const error = inUserHandler ? caught : withMigrateHint(caught, migrateHint);
      if (event !== undefined && isOutage(error, inUserHandler)) batch.databaseFailures.push(error);
      logger.error(
        event === undefined
          ? "message is not an outbox event; it and the rest of its group are redelivered"
          : "event failed; rolled back, it and the rest of its group are redelivered",
        { ...fields(record, event), error: errorMessage(error) },
      );
      report(batch, { status: "failed", messageId: recordId(record), event, error });
      return false;
    }
  };
}

function fields(record: InboxRecord, event: InboxEvent | undefined): Record<string, unknown> {
  return {
    ...("kinesis" in record
      ? { sequenceNumber: record.kinesis.sequenceNumber, partitionKey: record.kinesis.partitionKey }
      : {
          messageId: record.messageId,
          messageGroupId: record.attributes?.MessageGroupId,
          receiveCount: record.attributes?.ApproximateReceiveCount,
        }),
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
