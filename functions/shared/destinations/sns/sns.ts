import type { PublishBatchRequestEntry, SNSClient } from "@aws-sdk/client-sns";
import { errorMessage, ValidationError } from "../../outbox/errors.ts";
import { compactJsonbText } from "../../outbox/jsonbText.ts";
import {
  checkGroupId,
  checkHeaders,
  checkName,
  checkSqsText,
  checkTimestamp,
  messageAttributes,
  messageSize,
} from "../../outbox/message.ts";
import { CLAIM_CHECK_HINT } from "../../outbox/payloadPointer.ts";
import { messageTrace } from "../../outbox/traceContext.ts";
import { endpointInUse } from "../../util/awsClient.ts";
import {
  batchEntryResults,
  type Destination,
  type LoadedRow,
  type Prepared,
  type PublishResult,
  requestFailed,
} from "../destination.ts";
import { snsSdk } from "./sdk.ts";
import { checkTopic } from "./topicCheck.ts";

/**
 * PublishBatch limits (Amazon SNS API Reference, "PublishBatch"):
 * - at most 10 entries per request ("If you try to send more than 10 messages in a single batch request, you
 *   will receive a TooManyEntriesInBatchRequest exception");
 * - "the maximum allowed individual message size and the maximum total payload size (the sum of the individual
 *   lengths of all of the batched messages) are both 256 KiB (262,144 bytes)" by default; a message's size
 *   counts its body and its attributes' names, types and values (Amazon SNS Developer Guide, "Amazon SNS message
 *   attributes": "All parts of the message attribute, including name, type, and value, are included in the
 *   message size restriction"). A topic may raise its MaximumMessageSize to 1 MiB; the relay keeps to the default
 *   a topic has unless told otherwise (`maxMessageBytes`).
 * - FIFO topics take MessageGroupId (1-128 of letters, digits, punctuation, as SQS's) and MessageDeduplicationId,
 *   deduplicate for 5 minutes, and "multiple messages within a single batch are published in the order they are
 *   sent"; they deliver to SQS FIFO queue subscribers in order per group. Standard topics refuse a
 *   MessageDeduplicationId, so the relay sends neither id to them.
 */
export const SNS_MAX_BATCH_ENTRIES = 10;
export const SNS_MAX_MESSAGE_BYTES = 262_144;
export const SNS_MAX_TOPIC_MESSAGE_BYTES = 1_048_576;

export interface SnsOptions {
  topicArn: string;
  /** A FIFO topic (`.fifo`): group and deduplication ids are set. */
  fifo: boolean;
  /** The topic's MaximumMessageSize (default 262,144, SNS's default; at most 1 MiB). */
  maxMessageBytes?: number;
  /** An emulator's URL, named when the start check cannot reach SNS. */
  endpoint?: string;
}

type Entry = Omit<PublishBatchRequestEntry, "Id">;

/**
 * Entry or request failures that are not the message's fault: throttling, SNS's internal errors, the topic
 * missing or the relay not allowed, a KMS key disabled or denied. Retried after backoff without limit, never
 * dead-lettered (the publish-failure alarm makes them loud).
 */
const NOT_THE_MESSAGE =
  /^KMS|AuthorizationError|NotFound|Throttl|InternalError|ServiceUnavailable|EndpointDisabled|PlatformApplicationDisabled|InvalidSecurity|ConcurrentAccess|InvalidState/i;
/** Failures no retry can fix: the entry is invalid. */
const PERMANENT = /InvalidParameter|ParameterValueInvalid|ValidationException|MessageTooLong|TooLong/i;
/** Whole-request errors one entry's content can cause: resend each alone to isolate it. */
const CONTENT_CODES = /InvalidParameter|ValidationException|BatchRequestTooLong/i;

/**
 * Publishes to an SNS topic with PublishBatch. Message = the payload JSON (compact), attributes = the SQS path's
 * (eventType, aggregateType, aggregateId, outboxId, createdAt, seq, plus the row's headers), so an SQS queue
 * subscribed with raw message delivery receives the same message the SQS destination sends. On a FIFO topic,
 * MessageGroupId = aggregate_id and MessageDeduplicationId = outbox id.
 */
export function snsDestination(client: SNSClient, options: SnsOptions): Destination<Entry> {
  const maxMessageBytes = options.maxMessageBytes ?? SNS_MAX_MESSAGE_BYTES;
  const send = async (batch: readonly Prepared<Entry>[], signal?: AbortSignal): Promise<PublishResult[]> => {
    const { PublishBatchCommand } = await snsSdk();
    try {
      const response = await client.send(
        new PublishBatchCommand({
          TopicArn: options.topicArn,
          PublishBatchRequestEntries: batch.map((entry, index) => ({ ...entry.message, Id: String(index) })),
        }),
        signal ? { abortSignal: signal } : {},
      );
      return batchEntryResults(batch, response, {
        name: "SNS",
        serverFault: "could not take the entry",
        notTheMessage: NOT_THE_MESSAGE,
        permanent: PERMANENT,
      });
    } catch (error) {
      const name = (error as { name?: string }).name ?? "";
      const content = CONTENT_CODES.test(name) && !NOT_THE_MESSAGE.test(name);
      return requestFailed(batch, error, content, (single) => send(single, signal), signal);
    }
  };
  return {
    kind: options.fifo ? "sns-fifo" : "sns",
    target: options.topicArn,
    maxBatchEntries: SNS_MAX_BATCH_ENTRIES,
    // The sum of the messages' sizes; never more than the topic's message limit allows in one request.
    maxBatchBytes: maxMessageBytes,
    maxMessageBytes,
    prepare: (row) => prepareMessage(row, maxMessageBytes, options.fifo),
    send,
    check: (timeoutMs) =>
      checkTopic(
        client,
        options.topicArn,
        options.fifo,
        endpointInUse(options.endpoint, "SNS", `https://sns.${options.topicArn.split(":")[3]}.amazonaws.com`),
        timeoutMs,
      ),
  };
}

function prepareMessage(row: LoadedRow, maxMessageBytes: number, fifo: boolean): Prepared<Entry> | string {
  try {
    const body = compactJsonbText(row.payload);
    // What SNS forwards to SQS subscribers must be text SQS accepts.
    checkSqsText("payload", body);
    const headers = checkHeaders("headers", row.headers);
    const attributes = messageAttributes({
      id: row.id,
      aggregateType: checkName("aggregate_type", row.aggregate_type),
      aggregateId: fifo ? checkGroupId("aggregate_id", row.aggregate_id) : row.aggregate_id,
      eventType: checkName("event_type", row.event_type),
      headers,
      createdAt: checkTimestamp("created_at", row.created_at),
      seq: row.seq,
      body,
      // SNS has no AWSTraceHeader to set (X-Ray's active tracing on a topic traces the topic's own hop): the
      // context goes as traceparent/tracestate attributes, which SNS passes on to subscribers.
      trace: messageTrace(row, headers).context,
      ...(row.extendedPayloadSize === undefined ? {} : { extendedPayloadSize: row.extendedPayloadSize }),
    });
    if (!fifo) checkName("aggregate_id", row.aggregate_id);
    const size = messageSize(body, attributes);
    if (size > maxMessageBytes) {
      throw new ValidationError(
        "payload",
        `message is ${size} bytes, over the SNS topic's limit of ${maxMessageBytes} (${CLAIM_CHECK_HINT})`,
      );
    }
    const message: Entry = { Message: body, MessageAttributes: attributes };
    if (fifo) {
      message.MessageGroupId = row.aggregate_id;
      message.MessageDeduplicationId = row.id;
    }
    return { row, size, message };
  } catch (error) {
    if (error instanceof ValidationError) return error.message;
    return `cannot build the message: ${errorMessage(error)}`;
  }
}
