import type { SQSClient } from "@aws-sdk/client-sqs";
import { errorMessage, ValidationError } from "../../outbox/errors.ts";
import { messageSize } from "../../outbox/message.ts";
import { CLAIM_CHECK_HINT } from "../../outbox/payloadPointer.ts";
import {
  batchEntryResults,
  type Destination,
  type LoadedRow,
  type Prepared,
  type PublishResult,
  requestFailed,
} from "../destination.ts";
import { sendMessageBatchCommand } from "./batchBody.ts";
import { SQS_MAX_BATCH_BYTES, SQS_MAX_BATCH_ENTRIES, SQS_MAX_MESSAGE_BYTES } from "./limits.ts";
import { checkQueue } from "./queueCheck.ts";
import { type SqsMessage, sqsMessage } from "./sqsMessage.ts";

export interface SqsFifoOptions {
  queueUrl: string;
  /** The queue's MaximumMessageSize (default 1 MiB, SQS's maximum). */
  maxMessageBytes?: number;
  /** The endpoint the client was given, if any: named when the queue cannot be reached. */
  endpoint?: string;
}

/** Every value a string: what lets the relay write the request's JSON itself (batchBody.ts). */
type Entry = SqsMessage;

/** Entry error codes that no retry can fix: the message itself is unacceptable. */
const PERMANENT_CODES = /InvalidParameterValue|InvalidMessageContents|MessageTooLong|InvalidAttribute/i;
/**
 * Entry errors that are the account's or the service's doing, not the message's, whatever SenderFault says: a
 * disabled or denied KMS key, a denied permission, a missing queue, throttling. Counting them towards
 * RELAY_MAX_ATTEMPTS would turn a configuration fault (which the publish-failure alarm reports) into dead letters
 * and, in the default mode, let an aggregate's later events overtake them.
 */
const NOT_THE_MESSAGE_CODES =
  /^Kms|AccessDenied|NonExistentQueue|QueueDoesNotExist|Throttl|RequestThrottled/i;
/** Whole-request errors caused by one entry's content: retry entries one by one to isolate the poison. */
const CONTENT_CODES =
  /InvalidParameterValue|InvalidMessageContents|BatchRequestTooLong|MessageTooLong|InvalidAttribute|BatchEntryIdsNotDistinct|InvalidBatchEntryId/i;

/**
 * Publishes to an SQS FIFO queue: MessageGroupId = aggregate_id (SQS delivers a group strictly in order),
 * MessageDeduplicationId = outbox id (SQS drops a resend within its 5-minute window), body = the payload JSON,
 * attributes eventType, aggregateType, aggregateId, outboxId, createdAt plus the row's headers.
 */
export function sqsFifoDestination(sqs: SQSClient, options: SqsFifoOptions): Destination<Entry> {
  return sqsQueueDestination(sqs, options, true);
}

/**
 * Publishes to an SQS standard queue: the same body and attributes as the FIFO queue's, without
 * MessageGroupId and MessageDeduplicationId (SQS rejects a deduplication id on a standard queue: "Amazon SQS
 * Developer Guide, SendMessageBatchRequestEntry": "MessageDeduplicationId ... applies only to FIFO queues"). A
 * standard queue delivers at least once and in no particular order: consumers deduplicate by the `outboxId`
 * attribute and order by `seq`. The relay still sends one aggregate's events one after another.
 */
export function sqsStandardDestination(sqs: SQSClient, options: SqsFifoOptions): Destination<Entry> {
  return sqsQueueDestination(sqs, options, false);
}

function sqsQueueDestination(sqs: SQSClient, options: SqsFifoOptions, fifo: boolean): Destination<Entry> {
  const maxMessageBytes = options.maxMessageBytes ?? SQS_MAX_MESSAGE_BYTES;
  const send = async (batch: readonly Prepared<Entry>[], signal?: AbortSignal): Promise<PublishResult[]> => {
    const entries = batch.map((message, index) => ({ ...message.message, Id: String(index) }));
    try {
      const response = await sqs.send(
        await sendMessageBatchCommand(options.queueUrl, entries),
        signal ? { abortSignal: signal } : {},
      );
      return batchEntryResults(batch, response, {
        name: "SQS",
        serverFault: "failed the entry on its side",
        notTheMessage: NOT_THE_MESSAGE_CODES,
        permanent: PERMANENT_CODES,
      });
    } catch (error) {
      const name = (error as { name?: string }).name ?? "";
      return requestFailed(batch, error, CONTENT_CODES.test(name), (single) => send(single, signal), signal);
    }
  };
  return {
    kind: fifo ? "sqs-fifo" : "sqs",
    target: options.queueUrl,
    maxBatchEntries: SQS_MAX_BATCH_ENTRIES,
    maxBatchBytes: SQS_MAX_BATCH_BYTES,
    maxMessageBytes,
    prepare: (row) => prepareMessage(row, maxMessageBytes, fifo),
    send,
    check: (timeoutMs) =>
      checkQueue(sqs, options.queueUrl, maxMessageBytes, options.endpoint, timeoutMs, fifo),
  };
}

/**
 * Builds the SQS entry, refusing rows SQS would reject (a hand-inserted bad group id, an oversized body, an
 * infinite created_at). Returns the reason as text for any row it cannot turn into a message, whatever was
 * thrown: one malformed row must be dead-lettered on its own, never fail the round (and, being the oldest
 * pending row, every round after it).
 */
function prepareMessage(row: LoadedRow, maxMessageBytes: number, fifo: boolean): Prepared<Entry> | string {
  try {
    const message = sqsMessage(row, fifo);
    // The traceparent/tracestate attributes count; AWSTraceHeader does not ("The size of a message system
    // attribute doesn't count towards the total size of a message": SQS API Reference, SendMessageBatchRequestEntry,
    // MessageSystemAttributes, where AWSTraceHeader is "currently, the only supported message system attribute").
    const size = messageSize(message.MessageBody, message.MessageAttributes);
    if (size > maxMessageBytes) {
      throw new ValidationError(
        "payload",
        `message is ${size} bytes, over the queue's limit of ${maxMessageBytes} (${CLAIM_CHECK_HINT})`,
      );
    }
    return { row, size, message };
  } catch (error) {
    if (error instanceof ValidationError) return error.message;
    return `cannot build the message: ${errorMessage(error)}`;
  }
}
