/**
 * An outbox event as a consumer sees it, parsed back from either of the relay's destinations:
 * - the SQS FIFO message the relay built (functions/shared/outbox/message.ts: the JSON payload as the body;
 *   eventType, aggregateType, aggregateId, outboxId, createdAt and seq as string message attributes; the row's
 *   headers as further string attributes);
 * - an EventBridge event a rule delivered to an SQS queue (the event JSON as the body, the relay's envelope as
 *   its `detail`: consumer/eventBridgeRecord.ts);
 * - the relay's SNS message, raw or in SNS's notification envelope (consumer/snsRecord.ts);
 * - a Kinesis record whose data is the same envelope (consumer/kinesisRecord.ts).
 * The type alone, a leaf: both parsers (relayRecord.ts, eventBridgeRecord.ts) build one, and parseInboxEvent.ts,
 * which picks between them, imports both; with the type beside that choice, they imported each other.
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
   * Which outbox assigned `seq` (a seq compares only with the seqs of its own outbox): the EventBridge event's
   * `source` (the relay's `source` setting) for an event that came through a bus; the ARN of the queue the
   * record was read from (`eventSourceARN`) for the relay's own SQS message (or SNS's, raw or enveloped); the
   * stream's ARN for a Kinesis record. The stale-event mark is kept per
   * origin. Nothing new on the wire: both are sent already, and SQS allows only 10 message attributes.
   */
  origin: string;
  /**
   * SQS FIFO's sequence number, which grows with every message of a group
   * in the order the relay sent them (= outbox order, the relay's invariant 2). A 128-bit number, hence bigint.
   * For a Kinesis record, its sequence number (grows per shard, and an aggregate's records share one).
   * Undefined on a standard queue (an `sqs` or `sns` route, or EventBridge), which has none and orders nothing:
   * compare `seq` per aggregate to tell a late event.
   */
  sequenceNumber: bigint | undefined;
  /** The producer's headers (correlation ids, trace context): the message attributes the relay did not set. */
  headers: Record<string, string>;
  payload: Payload;
  /** Trace context to continue: X-Ray's header (SQS system attribute) and the W3C headers, when present. */
  trace: { awsTraceHeader?: string; traceparent?: string; tracestate?: string };
  /**
   * This delivery: SQS message id and how many times SQS has handed it out (1 on the first delivery); for a
   * Kinesis record its sequence number and 0 (Kinesis counts no deliveries).
   */
  delivery: { messageId: string; receiveCount: number };
}
