import { eventBridgeEventOf, parseEventBridgeRecord } from "./eventBridgeRecord.ts";
import type { InboxEvent } from "./inboxEvent.ts";
import { parseRelayRecord } from "./relayRecord.ts";
import type { SqsRecord } from "./sqsEvent.ts";

/**
 * Parses one record. Anything the relay always sets and that is missing or malformed is a ValidationError
 * naming the field: such a message was not written by the relay (or was altered) and must not be applied.
 * A record without the relay's `outboxId` attribute whose body is an EventBridge event is read as one.
 */
export function parseInboxEvent(record: SqsRecord): InboxEvent {
  const eventBridgeEvent = eventBridgeEventOf(record);
  if (eventBridgeEvent !== undefined) return parseEventBridgeRecord(record, eventBridgeEvent);
  return parseRelayRecord(record);
}
