import { ValidationError } from "../outbox/errors.ts";
import { foreignJsonBody, parseEnvelope, text } from "./envelopeFields.ts";
import { sequenceNumber, traceContext } from "./eventFields.ts";
import type { InboxEvent } from "./inboxEvent.ts";
import type { SqsRecord } from "./sqsEvent.ts";

/**
 * An outbox event that reached the queue through an EventBridge rule: the body is the event as EventBridge
 * delivers it to an SQS target (`{version, id, "detail-type", source, account, time, region, resources,
 * detail}`), and `detail` is the relay's envelope (functions/shared/destinations/eventBridge.ts,
 * docs/eventbridge.md): `{outboxId, aggregateType, aggregateId, eventType, seq, createdAt, headers, payload}`.
 */
type EventBridgeEvent = Record<string, unknown> & { detail: unknown };

/**
 * Whether a record is an EventBridge delivery rather than one of the relay's own SQS messages. Unambiguous: the
 * relay's SQS messages always carry an `outboxId` message attribute and EventBridge never sets message
 * attributes; and the body must be an object with `detail-type`, `source` and `detail`, the fields every
 * EventBridge event has. Returns the parsed body, or undefined for anything else (which then fails as an SQS
 * message, naming the missing attribute).
 */
export function eventBridgeEventOf(record: SqsRecord): EventBridgeEvent | undefined {
  const body = foreignJsonBody(record);
  return body !== undefined && "detail-type" in body && "source" in body && "detail" in body
    ? (body as EventBridgeEvent)
    : undefined;
}

/**
 * The InboxEvent in an EventBridge event. Every field the relay always writes is checked (envelopeFields.ts), and a
 * missing or malformed one is a ValidationError naming it (`body.detail.seq`, ...): such an event did not come from
 * the relay, or was changed on the way (an input transformer on the rule), and must not be applied.
 * `sequenceNumber` is undefined on a standard queue: the bus orders nothing, so neither can its target.
 */
export function parseEventBridgeRecord(record: SqsRecord, event: EventBridgeEvent): InboxEvent {
  const detailType = text(event["detail-type"], "body.detail-type");
  const source = text(event.source, "body.source");
  const fields = parseEnvelope(event.detail, "body.detail");
  if (fields.eventType !== detailType) {
    throw new ValidationError(
      "body.detail.eventType",
      `${JSON.stringify(fields.eventType)} differs from detail-type ${JSON.stringify(detailType)}; the relay writes the same`,
    );
  }
  return {
    ...fields,
    // Every relay publishing to a bus has its `source` (rules match on it): it names the outbox.
    origin: source,
    sequenceNumber: sequenceNumber(record.attributes?.SequenceNumber),
    // EventBridge passes an event's TraceHeader on to an SQS target as the AWSTraceHeader system attribute.
    trace: traceContext(record.attributes?.AWSTraceHeader, fields.headers),
    delivery: {
      messageId: record.messageId,
      receiveCount: Number(record.attributes?.ApproximateReceiveCount),
    },
  };
}
