import { ValidationError } from "../outbox/errors.ts";
import { STANDARD_ATTRIBUTES } from "../outbox/message.ts";
import { EXTENDED_PAYLOAD_SIZE } from "../outbox/payloadPointer.ts";
import { parseJson } from "./envelopeFields.ts";
import { orderKey, outboxId, sequenceNumber, timestamp, traceContext } from "./eventFields.ts";
import type { InboxEvent } from "./inboxEvent.ts";
import type { SqsRecord } from "./sqsEvent.ts";

const STANDARD = new Set<string>(STANDARD_ATTRIBUTES);

/**
 * A relay message: the JSON payload as the body; eventType, aggregateType, aggregateId, outboxId, createdAt and
 * seq as string attributes; the row's headers as the further string attributes (functions/shared/outbox/message.ts
 * builds it, for SQS and SNS alike). `where` names the fields for errors: an SQS record's own, or the SNS
 * notification's inside the body.
 */
export interface RelayMessage {
  body: string;
  attributes: Record<string, string>;
  where: { body: string; attributes: string };
}

/**
 * An outbox event as the relay sent it to SQS (FIFO or standard), or to SNS with raw message delivery to an SQS
 * subscriber (SNS passes the attributes on as SQS message attributes).
 */
export function parseRelayRecord(record: SqsRecord): InboxEvent {
  const attributes: Record<string, string> = {};
  for (const [name, value] of Object.entries(record.messageAttributes ?? {})) {
    if (value.stringValue !== undefined) attributes[name] = value.stringValue;
  }
  return parseRelayMessage(
    { body: record.body, attributes, where: { body: "body", attributes: "messageAttributes" } },
    record,
  );
}

/**
 * The InboxEvent in a relay message delivered by `record`. `sequenceNumber` is the queue's: undefined on a standard
 * queue (a route of kind `sqs` or `sns`), which orders nothing; a handler tells a late event by `seq`.
 */
export function parseRelayMessage(message: RelayMessage, record: SqsRecord): InboxEvent {
  const attribute = (name: string) => {
    const value = message.attributes[name];
    if (value === undefined || value === "") {
      throw new ValidationError(
        `${message.where.attributes}.${name}`,
        "is missing: not a message the outbox relay sent",
      );
    }
    return value;
  };
  const id = outboxId(`${message.where.attributes}.outboxId`, attribute("outboxId"));
  const createdAt = timestamp(`${message.where.attributes}.createdAt`, attribute("createdAt"));
  const seq = orderKey(`${message.where.attributes}.seq`, attribute("seq"));
  const payload = parseJson(message.body, message.where.body);
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(message.attributes)) {
    if (!STANDARD.has(name) && name !== EXTENDED_PAYLOAD_SIZE) headers[name] = value;
  }
  return {
    id,
    eventType: attribute("eventType"),
    aggregateType: attribute("aggregateType"),
    aggregateId: attribute("aggregateId"),
    createdAt,
    seq,
    // The relay publishes one outbox to a queue (or to a topic the queue subscribes to): the queue names the
    // outbox. A DLQ redrive moves messages back to the queue they came from, so a redriven message keeps its origin.
    origin: record.eventSourceARN ?? "",
    sequenceNumber: sequenceNumber(record.attributes?.SequenceNumber),
    headers,
    payload,
    trace: traceContext(record.attributes?.AWSTraceHeader, headers),
    delivery: {
      messageId: record.messageId,
      receiveCount: Number(record.attributes?.ApproximateReceiveCount),
    },
  };
}
