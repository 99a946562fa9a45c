import { ValidationError } from "../errors.ts";
import { STANDARD_ATTRIBUTES } from "../sqsMessage.ts";
import type { SqsRecord } from "./sqsEvent.ts";

/**
 * An outbox event as a consumer sees it, parsed back from the message the relay built (functions/shared/
 * sqsMessage.ts: the JSON payload as the body; eventType, aggregateType, aggregateId, outboxId, createdAt and seq
 * as string message attributes; the row's headers as further string attributes).
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
   */
  sequenceNumber: bigint;
  /** The producer's headers (correlation ids, trace context): the message attributes the relay did not set. */
  headers: Record<string, string>;
  payload: Payload;
  /** Trace context to continue: X-Ray's header (SQS system attribute) and the W3C headers, when present. */
  trace: { awsTraceHeader?: string; traceparent?: string; tracestate?: string };
  /** This delivery: SQS message id and how many times SQS has handed it out (1 on the first delivery). */
  delivery: { messageId: string; receiveCount: number };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const STANDARD = new Set<string>(STANDARD_ATTRIBUTES);

/**
 * Parses one record. Anything the relay always sets and that is missing or malformed is a ValidationError
 * naming the field: such a message was not written by the relay (or was altered) and must not be applied.
 */
export function parseInboxEvent(record: SqsRecord): InboxEvent {
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
  const id = attribute("outboxId");
  if (!UUID.test(id))
    throw new ValidationError("messageAttributes.outboxId", `is not a uuid: ${JSON.stringify(id)}`);
  const createdAtText = attribute("createdAt");
  const createdAt = new Date(createdAtText);
  if (Number.isNaN(createdAt.getTime())) {
    throw new ValidationError(
      "messageAttributes.createdAt",
      `is not a timestamp: ${JSON.stringify(createdAtText)}`,
    );
  }
  const seqText = attribute("seq");
  if (!/^\d{1,19}$/.test(seqText)) {
    throw new ValidationError("messageAttributes.seq", `is not an order key: ${JSON.stringify(seqText)}`);
  }
  const sequenceText = record.attributes?.SequenceNumber;
  if (sequenceText === undefined || !/^\d+$/.test(sequenceText)) {
    throw new ValidationError(
      "attributes.SequenceNumber",
      "is missing or not a number: the inbox handler reads SQS FIFO queues only",
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
  const trace: InboxEvent["trace"] = {};
  if (record.attributes.AWSTraceHeader !== undefined) trace.awsTraceHeader = record.attributes.AWSTraceHeader;
  if (headers.traceparent !== undefined) trace.traceparent = headers.traceparent;
  if (headers.tracestate !== undefined) trace.tracestate = headers.tracestate;
  return {
    id: id.toLowerCase(),
    eventType: attribute("eventType"),
    aggregateType: attribute("aggregateType"),
    aggregateId: attribute("aggregateId"),
    createdAt,
    seq: BigInt(seqText),
    sequenceNumber: BigInt(sequenceText),
    headers,
    payload,
    trace,
    delivery: {
      messageId: record.messageId,
      receiveCount: Number(record.attributes.ApproximateReceiveCount),
    },
  };
}
