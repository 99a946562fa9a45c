import { ValidationError } from "../outbox/errors.ts";
import { parseEnvelope, parseJson } from "./envelopeFields.ts";
import { traceContext } from "./eventFields.ts";
import type { InboxEvent } from "./inboxEvent.ts";
import type { KinesisRecord } from "./kinesisEvent.ts";

/**
 * An outbox event the relay wrote to a Kinesis stream (functions/shared/destinations/kinesis/kinesis.ts): the
 * record's data is the relay's JSON envelope as UTF-8, the one an EventBridge event's `detail` carries
 * (envelopeFields.ts), and the partition key is the aggregate id. Lambda hands the data over base64-encoded.
 */
export function parseKinesisRecord(record: KinesisRecord): InboxEvent {
  const { sequenceNumber, partitionKey, data } = record.kinesis;
  if (!/^\d+$/.test(sequenceNumber ?? "")) {
    throw new ValidationError("kinesis.sequenceNumber", `is not a number: ${JSON.stringify(sequenceNumber)}`);
  }
  const fields = parseEnvelope(
    parseJson(Buffer.from(data ?? "", "base64").toString("utf8"), "kinesis.data"),
    "kinesis.data",
  );
  // The relay writes PartitionKey = aggregate_id: a record whose key differs was not written by the relay, and
  // would break the per-key order the inbox runs a batch by.
  if (fields.aggregateId !== partitionKey) {
    throw new ValidationError(
      "kinesis.partitionKey",
      `${JSON.stringify(partitionKey)} differs from the envelope's aggregateId ${JSON.stringify(fields.aggregateId)}; the relay writes the same`,
    );
  }
  return {
    ...fields,
    // The relay publishes one outbox to a stream: the stream names the outbox.
    origin: record.eventSourceARN ?? "",
    // Grows per shard in write order, and a key's records share a shard: per aggregate, the relay's order.
    sequenceNumber: BigInt(sequenceNumber),
    trace: traceContext(undefined, fields.headers),
    // Kinesis counts no deliveries: a record is read again after a failure or a restart from a checkpoint.
    delivery: { messageId: sequenceNumber, receiveCount: 0 },
  };
}
