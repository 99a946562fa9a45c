import { createHash } from "node:crypto";
import type { SqsMessageAttribute, SqsRecord } from "../consumer/sqsEvent.ts";
import type { LoadedRow } from "../destinations/destination.ts";
import { detailEnvelope, stringHeaders } from "../destinations/envelope.ts";
import { sqsMessage } from "../destinations/sqs/sqsMessage.ts";

/**
 * Builds the Lambda SQS records the inbox reads, for users' consumer tests: what the relay sends, as Lambda hands
 * it over. The message comes from the relay's own builder (destinations/sqs/sqsMessage.ts), so the attributes
 * cannot drift from what the relay publishes; what SQS and Lambda add on delivery (message id, sequence number,
 * receive count, the queue's ARN) are made-up values that options can set. No AWS SDK is imported.
 */

/** An outbox row as `select * from outbox_events` returns it through node-postgres (payload and headers parsed). */
export interface OutboxRowLike {
  id: string;
  aggregate_type: string;
  aggregate_id: string;
  event_type: string;
  payload: unknown;
  headers?: Record<string, string> | null;
  created_at: Date;
  seq: string | number | bigint;
}

/** The event you passed to `enqueue()` with what it returned (`{ ...event, ...enqueued }`). */
export interface EnqueuedEventLike {
  id: string;
  seq: string | number | bigint;
  aggregateType: string;
  aggregateId: string;
  eventType: string;
  payload: unknown;
  headers?: Record<string, string>;
}

export interface SqsRecordOptions {
  /** The queue the record came from; it is the inbox's `origin`. Default a made-up FIFO queue's ARN. */
  queueArn?: string;
  /** Default a fresh random UUID. */
  messageId?: string;
  /** ApproximateReceiveCount; default 1. A retry test sets 2 or more. */
  receiveCount?: number;
  /** The FIFO queue's SequenceNumber; default the row's seq, padded as SQS's are (20 digits). */
  sequenceNumber?: string;
  /** The row's created_at, for an enqueued event (enqueue() does not return it). Default now. */
  createdAt?: Date;
  /** SentTimestamp; default now. */
  sentAt?: Date;
  /** The X-Ray trace header SQS passes as the AWSTraceHeader system attribute. */
  awsTraceHeader?: string;
}

/**
 * A record as Lambda delivers it: the inbox's SqsRecord with every field `@types/aws-lambda`'s SQSRecord requires
 * (SenderId, ApproximateFirstReceiveTimestamp, md5OfBody), so a built record is an `SQSRecord` and a built event an
 * `SQSEvent`: a handler typed `SQSHandler` takes them without a cast.
 */
export interface LambdaSqsRecord extends SqsRecord {
  attributes: SqsRecord["attributes"] & { SenderId: string; ApproximateFirstReceiveTimestamp: string };
  md5OfBody: string;
}

/** The event Lambda passes to the handler, of records built here (an `SQSEvent` of `@types/aws-lambda`). */
export interface LambdaSqsEvent<Record extends SqsRecord = LambdaSqsRecord> {
  Records: Record[];
}

/** Who sent a built record: a made-up IAM role id, as SQS gives the sender's (the relay's role in production). */
export const DEFAULT_TEST_SENDER_ID = "AROAEXAMPLEOUTBOXRELAY:outbox-relay";

export const DEFAULT_TEST_QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:outbox-test.fifo";

/** The Lambda record of the message the relay sends for an outbox row or an enqueued event. */
export function sqsRecordOf(
  event: OutboxRowLike | EnqueuedEventLike,
  options: SqsRecordOptions = {},
): LambdaSqsRecord {
  const row = loadedRow(event, options);
  const message = sqsMessage(row, true);
  return sqsRecordFromMessage(
    {
      MessageId: options.messageId ?? crypto.randomUUID(),
      Body: message.MessageBody,
      Attributes: {
        SequenceNumber: options.sequenceNumber ?? String(row.seq).padStart(20, "0"),
        MessageGroupId: message.MessageGroupId as string,
        MessageDeduplicationId: message.MessageDeduplicationId as string,
        ...(message.MessageSystemAttributes === undefined
          ? {}
          : { AWSTraceHeader: message.MessageSystemAttributes.AWSTraceHeader.StringValue }),
      },
      MessageAttributes: message.MessageAttributes,
    },
    options,
  );
}

export interface EventBridgeRecordOptions extends SqsRecordOptions {
  /** The relay's `source` (OUTBOX_EVENT_SOURCE), which the inbox takes as the event's `origin`. */
  source: string;
}

/**
 * The Lambda record of the same event routed through an EventBridge bus to an SQS queue: the body is the event as
 * EventBridge delivers it to an SQS target, its `detail` the relay's envelope (destinations/envelope.ts, the
 * builder the relay's EventBridge destination uses). No message attributes: EventBridge sets none.
 */
export function eventBridgeRecordOf(
  event: OutboxRowLike | EnqueuedEventLike,
  options: EventBridgeRecordOptions,
): LambdaSqsRecord {
  const row = loadedRow(event, options);
  const createdAt = row.created_at as Date;
  const detail = detailEnvelope(row, createdAt, stringHeaders(row.headers));
  const queueArn = options.queueArn ?? DEFAULT_TEST_QUEUE_ARN;
  const [, , , region = "us-east-1", account = "123456789012"] = queueArn.split(":");
  const envelope = {
    version: "0",
    id: crypto.randomUUID(),
    "detail-type": row.event_type,
    source: options.source,
    account,
    time: createdAt.toISOString().replace(/\.\d{3}Z$/, "Z"),
    region,
    resources: [],
  };
  return sqsRecordFromMessage(
    {
      MessageId: options.messageId ?? crypto.randomUUID(),
      Body: `${JSON.stringify(envelope).slice(0, -1)},"detail":${detail}}`,
      Attributes: queueArn.endsWith(".fifo")
        ? {
            SequenceNumber: options.sequenceNumber ?? row.seq.padStart(20, "0"),
            MessageGroupId: row.aggregate_id,
          }
        : {},
    },
    options,
  );
}

/** A message as SQS's ReceiveMessage returns it (the SDK's `Message`, with the attributes you asked for). */
export interface ReceivedSqsMessage {
  MessageId?: string | undefined;
  ReceiptHandle?: string | undefined;
  Body?: string | undefined;
  MD5OfBody?: string | undefined;
  Attributes?: Partial<Record<string, string>> | undefined;
  MessageAttributes?:
    | Record<string, { DataType?: string | undefined; StringValue?: string | undefined }>
    | undefined;
}

/**
 * The Lambda record of a message received from a queue (for example one the relay published to a local SQS in an
 * end-to-end test): Lambda's field names and its string attributes. Receive it with `AttributeNames: ["All"]`
 * and `MessageAttributeNames: ["All"]`, or the record lacks what the inbox checks.
 */
export function sqsRecordFromMessage(
  message: ReceivedSqsMessage,
  options: SqsRecordOptions = {},
): LambdaSqsRecord {
  const attributes = message.Attributes ?? {};
  const messageAttributes: Record<string, SqsMessageAttribute> = {};
  for (const [name, value] of Object.entries(message.MessageAttributes ?? {})) {
    messageAttributes[name] = { dataType: value.DataType ?? "String", stringValue: value.StringValue };
  }
  const messageId = message.MessageId ?? options.messageId ?? crypto.randomUUID();
  const trace = options.awsTraceHeader ?? attributes.AWSTraceHeader;
  const body = message.Body ?? "";
  const sentTimestamp = attributes.SentTimestamp ?? String((options.sentAt ?? new Date()).getTime());
  return {
    messageId,
    receiptHandle: message.ReceiptHandle ?? `test-receipt-${messageId}`,
    body,
    attributes: {
      ...attributes,
      ApproximateReceiveCount: String(options.receiveCount ?? attributes.ApproximateReceiveCount ?? 1),
      SentTimestamp: sentTimestamp,
      SenderId: attributes.SenderId ?? DEFAULT_TEST_SENDER_ID,
      ApproximateFirstReceiveTimestamp: attributes.ApproximateFirstReceiveTimestamp ?? sentTimestamp,
      ...(trace === undefined ? {} : { AWSTraceHeader: trace }),
    },
    messageAttributes,
    // What SQS reports: the MD5 of the body (SQS Developer Guide, "Message metadata": MD5OfBody).
    md5OfBody: message.MD5OfBody ?? createHash("md5").update(body).digest("hex"),
    eventSource: "aws:sqs",
    eventSourceARN: options.queueArn ?? DEFAULT_TEST_QUEUE_ARN,
    awsRegion: (options.queueArn ?? DEFAULT_TEST_QUEUE_ARN).split(":")[3] ?? "us-east-1",
  };
}

/** The event Lambda passes to the handler: `handler(sqsEventOf(record), context)`. */
export function sqsEventOf<Record extends SqsRecord = LambdaSqsRecord>(
  ...records: Record[]
): LambdaSqsEvent<Record> {
  return { Records: records };
}

/** The row as the relay loads it (sql/loadPayloads.ts): payload as JSON text, seq as decimal text. */
function loadedRow(event: OutboxRowLike | EnqueuedEventLike, options: SqsRecordOptions): LoadedRow {
  const row = "aggregate_id" in event ? event : rowOfEnqueued(event, options.createdAt ?? new Date());
  return {
    id: row.id,
    seq: String(row.seq),
    aggregate_type: row.aggregate_type,
    aggregate_id: row.aggregate_id,
    event_type: row.event_type,
    created_at: row.created_at,
    payload: JSON.stringify(row.payload),
    headers: row.headers ?? {},
    attempts: 0,
    transient_failures: 0,
  };
}

function rowOfEnqueued(event: EnqueuedEventLike, createdAt: Date): OutboxRowLike {
  return {
    id: event.id,
    seq: event.seq,
    aggregate_type: event.aggregateType,
    aggregate_id: event.aggregateId,
    event_type: event.eventType,
    payload: event.payload,
    headers: event.headers ?? {},
    created_at: createdAt,
  };
}
