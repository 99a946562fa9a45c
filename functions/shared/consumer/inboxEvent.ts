import { ValidationError } from "../outbox/errors.ts";
import { STANDARD_ATTRIBUTES } from "../outbox/message.ts";
import { eventBridgeEventOf, parseEventBridgeRecord } from "./eventBridgeRecord.ts";
import { orderKey, outboxId, sequenceNumber, timestamp, traceContext } from "./eventFields.ts";
import type { SqsRecord } from "./sqsEvent.ts";

/**
 * An outbox event as a consumer sees it, parsed back from either of the relay's destinations:
 * - the SQS FIFO message the relay built (functions/shared/sqsMessage.ts: the JSON payload as the body;
 *   eventType, aggregateType, aggregateId, outboxId, createdAt and seq as string message attributes; the row's
 *   headers as further string attributes);
 * - an EventBridge event a rule delivered to an SQS queue (the event JSON as the body, the relay's envelope as
 *   its `detail`: consumer/eventBridgeRecord.ts).
 */
export interface InboxEvent<Payload = unknown> {
  /** The outbox row id: the idempotency key (also the message's deduplication id when the relay sent it). */
  id: string;
  eventType: string;
  aggregateType: string;
  aggregateId: string;
  /** When the producer's transaction wrote the event (the database's clock). */
  createdAt: Date;
  /**
   * The outbox order key: per aggregate it grows strictly in commit order (migration 0005), so a handler can
   * ignore an event older than one it already applied. Not gapless: other aggregates share the sequence.
   */
  seq: bigint;
  /**
   * SQS FIFO's sequence number, which grows with every message of a group
   * in the order the relay sent them (= outbox order, the relay's invariant 2). A 128-bit number, hence bigint.
   * Undefined when the event came through EventBridge to a standard queue, which has none (and a bus orders
   * nothing anyway: compare `seq` per aggregate to tell a late event).
   */
  sequenceNumber: bigint | undefined;
  /** The producer's headers (correlation ids, trace context): the message attributes the relay did not set. */
  headers: Record<string, string>;
  payload: Payload;
  /** Trace context to continue: X-Ray's header (SQS system attribute) and the W3C headers, when present. */
  trace: { awsTraceHeader?: string; traceparent?: string; tracestate?: string };
  /** This delivery: SQS message id and how many times SQS has handed it out (1 on the first delivery). */
  delivery: { messageId: string; receiveCount: number };
}

const STANDARD = new Set<string>(STANDARD_ATTRIBUTES);

/**
 * Parses one record. Anything the relay always sets and that is missing or malformed is a ValidationError
 * naming the field: such a message was not written by the relay (or was altered) and must not be applied.
 * A record without the relay's `outboxId` attribute whose body is an EventBridge event is read as one.
 */
export function parseInboxEvent(record: SqsRecord): InboxEvent {
  const eventBridgeEvent = eventBridgeEventOf(record);
  if (eventBridgeEvent !== undefined) return parseEventBridgeRecord(record, eventBridgeEvent);
  return parseRelayMessage(record);
}

function parseRelayMessage(record: SqsRecord): InboxEvent {
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
    if (STANDARD.has(name) || value.stringValue === undefined) continue;
    headers[name] = value.stringValue;
  }
  return {
    id,
    eventType: attribute("eventType"),
    aggregateType: attribute("aggregateType"),
    aggregateId: attribute("aggregateId"),
    createdAt,
    seq,
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
