import { randomUUID } from "node:crypto";
import {
  ChangeMessageVisibilityBatchCommand,
  type Message,
  SendMessageCommand,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import type pg from "pg";
import type { InboxLogger, RecordOutcome, SqsRecord } from "../../functions/shared/consumer/index.ts";
import { migrateInbox } from "../../functions/shared/consumer/index.ts";
import { messageAttributes, type StringAttributes } from "../../functions/shared/outbox/message.ts";

/** The consumer's side of a test database: the inbox and one table of effects, in a schema of their own. */
export const CONSUMER_SCHEMA = "consumer";

export async function createConsumerTables(pool: pg.Pool): Promise<void> {
  await migrateInbox(pool, { schema: CONSUMER_SCHEMA });
  await pool.query(
    `create table if not exists ${CONSUMER_SCHEMA}.effects (
       outbox_id uuid not null, aggregate_id text not null, event_type text not null,
       applied_at timestamptz not null default clock_timestamp())`,
  );
}

/** The effects the handlers wrote, by outbox id, in commit order. */
export async function effects(pool: pg.Pool): Promise<string[]> {
  const { rows } = await pool.query<{ outbox_id: string }>(
    `select outbox_id from ${CONSUMER_SCHEMA}.effects order by applied_at, outbox_id`,
  );
  return rows.map((row) => row.outbox_id);
}

export async function inboxIds(pool: pg.Pool): Promise<string[]> {
  const { rows } = await pool.query<{ outbox_id: string }>(
    `select outbox_id from ${CONSUMER_SCHEMA}.inbox order by outbox_id`,
  );
  return rows.map((row) => row.outbox_id);
}

export function outboxIdOf(message: Message): string {
  return message.MessageAttributes?.outboxId?.StringValue ?? "";
}

/** Sends a received message again as a new message: the relay republishing after SQS's dedup window. */
export async function sendAgain(sqs: SQSClient, queueUrl: string, message: Message): Promise<void> {
  await sqs.send(
    new SendMessageCommand({
      QueueUrl: queueUrl,
      MessageBody: message.Body,
      MessageAttributes: message.MessageAttributes,
      MessageGroupId: message.Attributes?.MessageGroupId,
      MessageDeduplicationId: `${outboxIdOf(message)}-after-the-window`,
    }),
  );
}

/** What a consumer that crashed before acknowledging leaves behind: the messages visible again at once. */
export async function makeVisibleAgain(sqs: SQSClient, queueUrl: string, messages: Message[]): Promise<void> {
  await sqs.send(
    new ChangeMessageVisibilityBatchCommand({
      QueueUrl: queueUrl,
      Entries: messages.map((message, index) => ({
        Id: String(index),
        ReceiptHandle: message.ReceiptHandle,
        VisibilityTimeout: 0,
      })),
    }),
  );
}

export interface Recorder {
  outcomes: RecordOutcome[];
  logs: { level: string; message: string; fields: Record<string, unknown> }[];
  logger: InboxLogger;
  onOutcome(outcome: RecordOutcome): void;
  statuses(): Record<string, string>;
}

export function recorder(): Recorder {
  const outcomes: RecordOutcome[] = [];
  const logs: Recorder["logs"] = [];
  const log = (level: string) => (message: string, fields: Record<string, unknown>) =>
    void logs.push({ level, message, fields });
  return {
    outcomes,
    logs,
    logger: { info: log("info"), warn: log("warn"), error: log("error") },
    onOutcome: (outcome) => void outcomes.push(outcome),
    statuses: () => Object.fromEntries(outcomes.map((outcome) => [outcome.messageId, outcome.status])),
  };
}

let nextMessage = 0;

/**
 * A record as Lambda hands over one of the relay's messages (attributes from the relay's own builder), for
 * tests that need exact control over ids, seq and groups without a queue in between.
 */
export function relayRecord(fields: {
  id?: string;
  aggregateId: string;
  aggregateType?: string;
  eventType?: string;
  seq: bigint | number;
  payload?: unknown;
  groupId?: string;
}): SqsRecord {
  const body = JSON.stringify(fields.payload ?? { n: Number(fields.seq) });
  const messageId = `m-${++nextMessage}`;
  const attributes = messageAttributes({
    id: fields.id ?? randomUUID(),
    aggregateType: fields.aggregateType ?? "order",
    aggregateId: fields.aggregateId,
    eventType: fields.eventType ?? "order.placed",
    createdAt: new Date(),
    seq: String(fields.seq),
    headers: {},
    body,
  });
  return {
    messageId,
    receiptHandle: messageId,
    body,
    attributes: {
      ApproximateReceiveCount: "1",
      SentTimestamp: String(Date.now()),
      SequenceNumber: String(1_000_000 + nextMessage),
      MessageGroupId: fields.groupId ?? fields.aggregateId,
    },
    messageAttributes: lambdaMessageAttributes(attributes),
    eventSource: "aws:sqs",
    eventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:orders.fifo",
    awsRegion: "eu-west-1",
  };
}

/** Message attributes as SQS sends them (SendMessage's `DataType`/`StringValue`), as Lambda's SQS event carries them. */
export function lambdaMessageAttributes(attributes: StringAttributes): SqsRecord["messageAttributes"] {
  return Object.fromEntries(
    Object.entries(attributes).map(([name, value]) => [
      name,
      { dataType: value.DataType, stringValue: value.StringValue },
    ]),
  );
}

/** The Lambda context's deadline part, with a remaining time the test decides. */
export function lambdaContextWithRemaining(remaining: () => number) {
  return { awsRequestId: "test-request", getRemainingTimeInMillis: remaining };
}
