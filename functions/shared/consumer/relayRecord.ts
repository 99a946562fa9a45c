import { ValidationError } from "../outbox/errors.ts";
import { STANDARD_ATTRIBUTES } from "../outbox/message.ts";
import { EXTENDED_PAYLOAD_SIZE } from "../outbox/payloadPointer.ts";
import { orderKey, outboxId, sequenceNumber, timestamp, traceContext } from "./eventFields.ts";
import type { InboxEvent } from "./inboxEvent.ts";
import type { SqsRecord } from "./sqsEvent.ts";

const STANDARD = new Set<string>(STANDARD_ATTRIBUTES);

/**
 * An outbox event as the relay sent it to SQS FIFO (functions/shared/outbox/message.ts builds it): the JSON
 * payload as the body; eventType, aggregateType, aggregateId, outboxId, createdAt and seq as string message
 * attributes; the row's headers as the further string attributes.
 */
export function parseRelayRecord(record: SqsRecord): InboxEvent {
  const attribute = (name: string) => {
    const value = record.messageAttributes?.[name]?.stringValue;
    if (value === undefined || value === "") {
      throw new ValidationError(
        `messageAttributes.${name}`,
        "is missing: not a message the outbox relay sent",
      );
    }
    return value;
  };
  const id = outboxId("messageAttributes.outboxId", attribute("outboxId"));
  const createdAt = timestamp("messageAttributes.createdAt", attribute("createdAt"));
  const seq = orderKey("messageAttributes.seq", attribute("seq"));
  // The relay sends its own messages to FIFO queues only: one without a sequence number was not delivered
  // by the queue the relay publishes to.
  if (record.attributes?.SequenceNumber === undefined) {
    throw new ValidationError(
      "attributes.SequenceNumber",
      "is missing: the relay's own messages are read from SQS FIFO queues only (through EventBridge, the " +
        "event is the body)",
    );
  }
  let payload: unknown;
  try {
    payload = JSON.parse(record.body);
  } catch (error) {
    throw new ValidationError("body", `is not JSON: ${(error as Error).message}`, { cause: error });
  }
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(record.messageAttributes ?? {})) {
    if (STANDARD.has(name) || name === EXTENDED_PAYLOAD_SIZE || value.stringValue === undefined) continue;
    headers[name] = value.stringValue;
  }
  return {
    id,
    eventType: attribute("eventType"),
    aggregateType: attribute("aggregateType"),
    aggregateId: attribute("aggregateId"),
    createdAt,
    seq,
    // The relay publishes one outbox to a queue: the queue names the outbox. A DLQ redrive moves messages back
    // to the queue they came from, so a redriven message keeps its origin.
    origin: record.eventSourceARN ?? "",
    sequenceNumber: sequenceNumber(record.attributes.SequenceNumber),
    headers,
    payload,
    trace: traceContext(record.attributes.AWSTraceHeader, headers),
    delivery: {
      messageId: record.messageId,
      receiveCount: Number(record.attributes.ApproximateReceiveCount),
    },
  };
}
