import type {
  EventBridgeClient,
  PutEventsRequestEntry,
  PutEventsResultEntry,
} from "@aws-sdk/client-eventbridge";
import { errorMessage, ValidationError } from "../../outbox/errors.ts";
import { checkTimestamp } from "../../outbox/message.ts";
import type { ClaimedRow } from "../../outbox/row.ts";
import { messageTrace } from "../../outbox/traceContext.ts";
import { onFirstUse } from "../../util/awsClient.ts";
import {
  type Destination,
  type LoadedRow,
  type Prepared,
  type PublishResult,
  requestFailed,
} from "../destination.ts";
import { detailEnvelope, stringHeaders } from "../envelope.ts";

export { detailEnvelope };

/**
 * PutEvents limits, from the EventBridge API reference and user guide:
 * - at most 10 entries per request;
 * - "the total entry size must be less than 1MB": the PutEvents API documentation as the installed SDK's model
 *   carries it (@aws-sdk/client-eventbridge 3.1169), since AWS raised EventBridge events from 256 KB to 1 MB in
 *   January 2026 (the user guide's entry-size page still says 256KB; the API is what the service enforces).
 *   1 MB as 256 KB was, in binary units: a request carries at most 1,048,575 bytes, counted as the user
 *   guide's "Calculating PutEvents event entry size" says: UTF-8 bytes of Source, DetailType, Detail and each
 *   Resources entry, plus 14 bytes when Time is set. EventBusName and TraceHeader are not counted.
 * - DetailType is free-form, at most 128 characters.
 */
export const EVENTBRIDGE_MAX_BATCH_ENTRIES = 10;
export const EVENTBRIDGE_MAX_REQUEST_BYTES = 1_048_575;
/**
 * The limit before the raise, "less than 256KB", which the partitions the raise has not been announced for
 * (China, GovCloud, the isolated ones) still document: assumed there until their documentation says otherwise.
 */
export const EVENTBRIDGE_MAX_REQUEST_BYTES_256KB = 262_143;

/**
 * The PutEvents request limit where the bus is: 1 MB in the `aws` partition, 256 KB in the others. The partition
 * comes from the bus's ARN when it is one, else from the region (cn-*, us-gov-*, us-iso*, eu-isoe-*, ...).
 */
export function eventBridgeMaxRequestBytes(eventBusName: string, region: string | undefined): number {
  const partition = eventBusName.startsWith("arn:")
    ? eventBusName.split(":")[1]
    : region === undefined
      ? "aws"
      : /^cn-/.test(region)
        ? "aws-cn"
        : /^us-gov-/.test(region)
          ? "aws-us-gov"
          : /-iso[a-z]*-/.test(region)
            ? "aws-iso"
            : "aws";
  return partition === "aws" ? EVENTBRIDGE_MAX_REQUEST_BYTES : EVENTBRIDGE_MAX_REQUEST_BYTES_256KB;
}
export const EVENTBRIDGE_MAX_DETAIL_TYPE_LENGTH = 128;
export const EVENTBRIDGE_MAX_SOURCE_LENGTH = 256;
const TIME_BYTES = 14;

export interface EventBridgeOptions {
  /** The bus's name or ARN (`arn:aws:events:<region>:<account>:event-bus/<name>`, for another account's bus). */
  eventBusName: string;
  /** Every event's `source`; rules match on it. Not `aws.`-prefixed (reserved for AWS services). */
  source: string;
  /** The request limit where the bus is (eventBridgeMaxRequestBytes); default the `aws` partition's 1 MB. */
  maxRequestBytes?: number;
}

export const DEFAULT_EVENT_SOURCE = "outbox-relay";

/**
 * Entry error codes that are not the message's fault: the bus is throttling or failing, or the relay lacks a
 * permission. The row is retried after backoff and never dead-lettered for them (an outage or a missing grant
 * must not turn the backlog into dead letters); the failure metrics and alarms make them loud.
 */
const NOT_THE_MESSAGE =
  /^(ThrottlingException|InternalFailure|InternalException|ServiceUnavailable|AccessDeniedException|NotAuthorizedForSourceException|NotAuthorizedForDetailTypeException|InvalidAccountIdException|ResourceNotFoundException|KMS.*)$/;
/** Entry error codes no retry can fix: the entry itself is invalid. */
const PERMANENT = /^(InvalidArgument|MalformedDetail|ValidationException)$/;

/**
 * Publishes to an EventBridge bus with PutEvents. Each event is:
 * - `Source`: the configured source; `DetailType`: the row's event_type; `Time`: the row's created_at;
 * - `Detail`: the envelope `{"outboxId", "aggregateType", "aggregateId", "eventType", "seq", "createdAt",
 *   "headers", "payload"}`, where payload is the row's JSON as stored (text, so big numbers keep precision);
 * - `TraceHeader`: the X-Ray trace header: the row's trace context (migration 0013) converted, else an
 *   `X-Amzn-Trace-Id` header or a W3C `traceparent` header (outbox/traceContext.ts), so X-Ray follows the event
 *   through the bus to its targets (an SQS target receives it as the AWSTraceHeader system attribute).
 * A classic bus neither deduplicates nor orders: the relay still sends one aggregate's events one after
 * another, but a consumer must deduplicate by `detail.outboxId` and not rely on arrival order.
 */
export function eventBridgeDestination(
  client: EventBridgeClient,
  options: EventBridgeOptions,
): Destination<PutEventsRequestEntry> {
  checkSource(options.source);
  const maxRequestBytes = options.maxRequestBytes ?? EVENTBRIDGE_MAX_REQUEST_BYTES;
  return {
    kind: "eventbridge",
    target: options.eventBusName,
    maxBatchEntries: EVENTBRIDGE_MAX_BATCH_ENTRIES,
    maxBatchBytes: maxRequestBytes,
    maxMessageBytes: maxRequestBytes,
    prepare: (row) => prepareEvent(row, options),
    send: (batch, signal) => sendEvents(client, batch, signal),
  };
}

export function checkSource(source: string): void {
  if (source.length === 0 || source.length > EVENTBRIDGE_MAX_SOURCE_LENGTH) {
    throw new ValidationError(
      "source",
      `is ${source.length} characters; an EventBridge source takes 1-${EVENTBRIDGE_MAX_SOURCE_LENGTH}`,
    );
  }
  if (/^aws\./i.test(source)) {
    throw new ValidationError(
      "source",
      `${JSON.stringify(source)}: the aws. prefix is reserved for AWS services`,
    );
  }
}

/**
 * Builds the PutEvents entry, refusing rows EventBridge would reject (too long an event type, too big an
 * event). Returns the reason as text for any row it cannot turn into an event, whatever was thrown.
 */
export function prepareEvent(
  row: LoadedRow,
  options: EventBridgeOptions,
): Prepared<PutEventsRequestEntry> | string {
  try {
    return buildEvent(row, options);
  } catch (error) {
    if (error instanceof ValidationError) return error.message;
    return `cannot build the event: ${errorMessage(error)}`;
  }
}

function buildEvent(row: LoadedRow, options: EventBridgeOptions): Prepared<PutEventsRequestEntry> {
  if (row.event_type.length === 0 || row.event_type.length > EVENTBRIDGE_MAX_DETAIL_TYPE_LENGTH) {
    throw new ValidationError(
      "event_type",
      `is ${row.event_type.length} characters; it becomes the EventBridge detail-type, which takes 1-${EVENTBRIDGE_MAX_DETAIL_TYPE_LENGTH}`,
    );
  }
  const createdAt = checkTimestamp("created_at", row.created_at);
  const headers = stringHeaders(row.headers);
  const trace = messageTrace(row, headers);
  const detail = detailEnvelope(row, createdAt, headers, trace.context);
  const size =
    TIME_BYTES +
    Buffer.byteLength(options.source) +
    Buffer.byteLength(row.event_type) +
    Buffer.byteLength(detail);
  const limit = options.maxRequestBytes ?? EVENTBRIDGE_MAX_REQUEST_BYTES;
  if (size > limit) {
    throw new ValidationError(
      "payload",
      `event is ${size} bytes as EventBridge counts it (source, detail-type, detail with the envelope, time), over the limit of ${limit}`,
    );
  }
  return {
    row,
    size,
    message: {
      EventBusName: options.eventBusName,
      Source: options.source,
      DetailType: row.event_type,
      Detail: detail,
      Time: createdAt,
      ...(trace.xray === undefined ? {} : { TraceHeader: trace.xray }),
    },
  };
}

/** The EventBridge SDK, at the first send: importing the relay's entry point loads no SDK. */
const eventBridgeSdk = onFirstUse(() => import("./sdkExports.ts"));

/** One PutEvents request; every entry's result read, whatever FailedEntryCount says. */
async function sendEvents(
  client: EventBridgeClient,
  batch: readonly Prepared<PutEventsRequestEntry>[],
  signal: AbortSignal | undefined,
): Promise<PublishResult[]> {
  const { PutEventsCommand } = await eventBridgeSdk();
  try {
    const response = await client.send(
      new PutEventsCommand({ Entries: batch.map((event) => event.message) }),
      signal ? { abortSignal: signal } : {},
    );
    const entries = response.Entries ?? [];
    // Results are positional ("the index of the response element is the same as the index in the request").
    return batch.map((event, index) => entryResult(event.row, entries[index]));
  } catch (error) {
    // A ValidationException means one entry made the whole request invalid.
    const byContent = (error as { name?: string }).name === "ValidationException";
    return requestFailed(batch, error, byContent, (single) => sendEvents(client, single, signal), signal);
  }
}

function entryResult(row: ClaimedRow, entry: PutEventsResultEntry | undefined): PublishResult {
  if (entry === undefined) {
    return { row, status: "uncertain", error: "EventBridge returned no result for this entry" };
  }
  if (entry.ErrorCode === undefined && entry.EventId !== undefined) return { row, status: "published" };
  const code = entry.ErrorCode ?? "UnknownError";
  const error = `EventBridge refused the event: ${code}: ${entry.ErrorMessage ?? ""}`.trim();
  if (NOT_THE_MESSAGE.test(code)) return { row, status: "unsent", error };
  return { row, status: "rejected", error, permanent: PERMANENT.test(code) };
}
