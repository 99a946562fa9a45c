import { ValidationError } from "../outbox/errors.ts";
import { describe, foreignJsonBody, text } from "./envelopeFields.ts";
import type { InboxEvent } from "./inboxEvent.ts";
import { parseRelayMessage } from "./relayRecord.ts";
import type { SqsRecord } from "./sqsEvent.ts";

/**
 * An outbox event that reached the queue through the relay's SNS topic without raw message delivery: SNS wraps
 * the message in its JSON notification (Amazon SNS Developer Guide, "Amazon SNS message and JSON formats"):
 * `{"Type": "Notification", "MessageId", "TopicArn", "Message", "Timestamp", "MessageAttributes": {"name":
 * {"Type": "String", "Value": "..."}}, ...}`, and `Message` is the relay's message body (the payload JSON). With
 * raw delivery the record is the relay's SQS message as it is (relayRecord.ts).
 */
type SnsNotification = Record<string, unknown>;

/**
 * Whether a record is an SNS notification rather than one of the relay's own messages: the relay's messages (raw
 * delivery included) always carry an `outboxId` message attribute, SNS's envelope none; and the body must be an
 * object with `"Type": "Notification"` and `TopicArn`, which every notification has. Returns the parsed body.
 */
export function snsNotificationOf(record: SqsRecord): SnsNotification | undefined {
  const body = foreignJsonBody(record);
  return body?.Type === "Notification" && "TopicArn" in body ? body : undefined;
}

/**
 * The InboxEvent in an SNS notification: the relay's message from `Message` and the string `MessageAttributes`
 * (`Type` "String" or "Number"; a "Binary" one is none of the relay's and is left out, as relayRecord.ts leaves out
 * an SQS binary attribute). A malformed envelope is a ValidationError naming the field (`body.Message`,
 * `body.MessageAttributes.seq.Value`, ...), before anything is applied.
 */
export function parseSnsRecord(record: SqsRecord, notification: SnsNotification): InboxEvent {
  const message = text(notification.Message, "body.Message");
  const raw = notification.MessageAttributes ?? {};
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw new ValidationError("body.MessageAttributes", `is ${describe(raw)}; expected an object`);
  }
  const attributes: Record<string, string> = {};
  for (const [name, attribute] of Object.entries(raw)) {
    const at = `body.MessageAttributes.${name}`;
    if (typeof attribute !== "object" || attribute === null) {
      throw new ValidationError(at, `is ${describe(attribute)}; expected {"Type", "Value"}`);
    }
    const { Type: type, Value: value } = attribute as { Type?: unknown; Value?: unknown };
    if (type === "Binary") continue;
    if (typeof value !== "string") throw new ValidationError(`${at}.Value`, `is ${describe(value)}`);
    attributes[name] = value;
  }
  return parseRelayMessage(
    { body: message, attributes, where: { body: "body.Message", attributes: "body.MessageAttributes" } },
    record,
  );
}
