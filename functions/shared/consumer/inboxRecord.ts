import type { KinesisRecord } from "./kinesisEvent.ts";
import type { SqsRecord } from "./sqsEvent.ts";

/**
 * One delivered record, whichever event source delivered it: an SQS message (the relay's SQS queue, a queue
 * subscribed to its SNS topic, a queue an EventBridge rule targets) or a Kinesis record. The pipeline asks a
 * record only for its id and its group; the parsers (parseInboxEvent.ts) read the rest.
 */
export type InboxRecord = SqsRecord | KinesisRecord;

export function isKinesisRecord(record: InboxRecord): record is KinesisRecord {
  return "kinesis" in record;
}

/**
 * What `batchItemFailures` names to redeliver the record: the SQS message id; for Kinesis the sequence number
 * ("itemIdentifier ... the sequence number of the record", Lambda, "Configuring partial batch response with
 * Kinesis": Lambda restarts the shard from the lowest one reported).
 */
export function recordId(record: InboxRecord): string {
  return isKinesisRecord(record) ? record.kinesis.sequenceNumber : record.messageId;
}

/**
 * The unit of order within a batch: the SQS message group (SQS FIFO delivers a group in order); the partition key
 * for Kinesis, whose shard orders a key's records by sequence number (and the relay writes one aggregate per key).
 * A record of a standard queue has no group: it is a group of its own.
 */
export function groupOf(record: InboxRecord): string {
  if (isKinesisRecord(record)) return record.kinesis.partitionKey;
  return record.attributes?.MessageGroupId ?? `message:${record.messageId}`;
}
