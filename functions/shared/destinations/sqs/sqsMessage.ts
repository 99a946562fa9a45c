import { compactJsonbText } from "../../outbox/jsonbText.ts";
import {
  checkGroupId,
  checkHeaders,
  checkName,
  checkSqsText,
  checkTimestamp,
  messageAttributes,
  type StringAttributes,
} from "../../outbox/message.ts";
import { messageTrace } from "../../outbox/traceContext.ts";
import type { LoadedRow } from "../destination.ts";

/** One SendMessage(Batch) entry as the relay sends it, in the SDK's field names. */
export interface SqsMessage {
  MessageBody: string;
  MessageAttributes: StringAttributes;
  /** FIFO queues only: the aggregate (SQS delivers a group strictly in order). */
  MessageGroupId?: string;
  /** FIFO queues only: the outbox id (SQS drops a resend within its 5-minute window). */
  MessageDeduplicationId?: string;
  /** The producer's trace in X-Ray form, when the row carries one (AWSTraceHeader: docs/tracing.md). */
  MessageSystemAttributes?: { AWSTraceHeader: { DataType: "String"; StringValue: string } };
}

/**
 * The message the relay sends for a row, refusing (ValidationError) what SQS would reject: a hand-inserted bad
 * group id or name, a character SQS refuses, an infinite created_at. No AWS SDK here: the testing helper
 * (aws-outbox-relay/testing) builds its records with this same function, so they cannot drift from the relay's.
 */
export function sqsMessage(row: LoadedRow, fifo: boolean): SqsMessage {
  const body = compactJsonbText(row.payload);
  checkSqsText("payload", body);
  const headers = checkHeaders("headers", row.headers);
  const trace = messageTrace(row, headers);
  const attributes = messageAttributes({
    id: row.id,
    aggregateType: checkName("aggregate_type", row.aggregate_type),
    aggregateId: checkGroupId("aggregate_id", row.aggregate_id),
    eventType: checkName("event_type", row.event_type),
    headers,
    createdAt: checkTimestamp("created_at", row.created_at),
    seq: row.seq,
    body,
    trace: trace.context,
    ...(row.extendedPayloadSize === undefined ? {} : { extendedPayloadSize: row.extendedPayloadSize }),
  });
  const message: SqsMessage = fifo
    ? {
        MessageBody: body,
        MessageGroupId: row.aggregate_id,
        MessageDeduplicationId: row.id,
        MessageAttributes: attributes,
      }
    : { MessageBody: body, MessageAttributes: attributes };
  if (trace.xray !== undefined) {
    message.MessageSystemAttributes = { AWSTraceHeader: { DataType: "String", StringValue: trace.xray } };
  }
  return message;
}
