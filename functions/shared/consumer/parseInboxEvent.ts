import { eventBridgeEventOf, parseEventBridgeRecord } from "./eventBridgeRecord.ts";
import type { InboxEvent } from "./inboxEvent.ts";
import { type InboxRecord, isKinesisRecord } from "./inboxRecord.ts";
import { parseKinesisRecord } from "./kinesisRecord.ts";
import { parseRelayRecord } from "./relayRecord.ts";
import { parseSnsRecord, snsNotificationOf } from "./snsRecord.ts";

/**
 * Parses one record. Anything the relay always sets and that is missing or malformed is a ValidationError
 * naming the field: such a message was not written by the relay (or was altered) and must not be applied.
 * A Kinesis record carries the relay's envelope; an SQS record without the relay's `outboxId` attribute whose body
 * is an SNS notification or an EventBridge event is read as one; any other SQS record is the relay's own message
 * (from its queue, or from its topic with raw message delivery).
 */
export function parseInboxEvent(record: InboxRecord): InboxEvent {
  if (isKinesisRecord(record)) return parseKinesisRecord(record);
  const notification = snsNotificationOf(record);
  if (notification !== undefined) return parseSnsRecord(record, notification);
  const eventBridgeEvent = eventBridgeEventOf(record);
  if (eventBridgeEvent !== undefined) return parseEventBridgeRecord(record, eventBridgeEvent);
  return parseRelayRecord(record);
}
