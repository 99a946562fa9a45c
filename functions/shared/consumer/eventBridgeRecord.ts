import { ValidationError } from "../outbox/errors.ts";
import { orderKey, outboxId, sequenceNumber, timestamp, traceContext } from "./eventFields.ts";
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
  if (record.messageAttributes?.outboxId !== undefined) return undefined;
  let body: unknown;
  try {
    body = JSON.parse(record.body);
  } catch {
    return undefined;
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) return undefined;
  return "detail-type" in body && "source" in body && "detail" in body
    ? (body as EventBridgeEvent)
    : undefined;
}

/**
 * The InboxEvent in an EventBridge event. Every field the relay always writes is checked, and a missing or
 * malformed one is a ValidationError naming it (`body.detail.seq`, ...): such an event did not come from the
 * relay, or was changed on the way (an input transformer on the rule), and must not be applied.
 * `sequenceNumber` is undefined on a standard queue: the bus orders nothing, so neither can its target.
 */
export function parseEventBridgeRecord(record: SqsRecord, event: EventBridgeEvent): InboxEvent {
  const text = (value: unknown, field: string): string => {
    if (typeof value !== "string" || value === "") {
      throw new ValidationError(field, `is ${describe(value)}; the relay always writes a non-empty string`);
    }
    return value;
  };
  const detailType = text(event["detail-type"], "body.detail-type");
  const source = text(event.source, "body.source");
  const detail = event.detail;
  if (typeof detail !== "object" || detail === null || Array.isArray(detail)) {
    throw new ValidationError("body.detail", `is ${describe(detail)}; expected the relay's envelope object`);
  }
  const field = (name: string) => (detail as Record<string, unknown>)[name];
  const eventType = text(field("eventType"), "body.detail.eventType");
  if (eventType !== detailType) {
    throw new ValidationError(
      "body.detail.eventType",
      `${JSON.stringify(eventType)} differs from detail-type ${JSON.stringify(detailType)}; the relay writes the same`,
    );
  }
  const headers = stringRecord(field("headers"), "body.detail.headers");
  if (!("payload" in detail)) {
    throw new ValidationError("body.detail.payload", "is missing; the relay always writes the payload");
  }
  return {
    id: outboxId("body.detail.outboxId", text(field("outboxId"), "body.detail.outboxId")),
    eventType,
    aggregateType: text(field("aggregateType"), "body.detail.aggregateType"),
    aggregateId: text(field("aggregateId"), "body.detail.aggregateId"),
    createdAt: timestamp("body.detail.createdAt", text(field("createdAt"), "body.detail.createdAt")),
    seq: orderKey("body.detail.seq", text(field("seq"), "body.detail.seq")),
    // Every relay publishing to a bus has its `source` (rules match on it): it names the outbox.
    origin: source,
    sequenceNumber: sequenceNumber(record.attributes?.SequenceNumber),
    headers,
    payload: field("payload"),
    // EventBridge passes an event's TraceHeader on to an SQS target as the AWSTraceHeader system attribute.
    trace: traceContext(record.attributes?.AWSTraceHeader, headers),
    delivery: {
      messageId: record.messageId,
      receiveCount: Number(record.attributes?.ApproximateReceiveCount),
    },
  };
}

function stringRecord(value: unknown, field: string): Record<string, string> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ValidationError(field, `is ${describe(value)}; expected an object of strings`);
  }
  for (const [name, entry] of Object.entries(value)) {
    if (typeof entry !== "string") throw new ValidationError(`${field}.${name}`, `is ${describe(entry)}`);
  }
  return value as Record<string, string>;
}

function describe(value: unknown): string {
  if (value === undefined) return "missing";
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "string" ? `the string ${JSON.stringify(value.slice(0, 40))}` : `a ${typeof value}`;
}
