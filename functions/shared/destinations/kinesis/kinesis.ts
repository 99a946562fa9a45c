import {
  type KinesisClient,
  PutRecordsCommand,
  type PutRecordsRequestEntry,
  type PutRecordsResultEntry,
} from "@aws-sdk/client-kinesis";
import { errorMessage, ValidationError } from "../../outbox/errors.ts";
import { checkTimestamp } from "../../outbox/message.ts";
import type { ClaimedRow } from "../../outbox/row.ts";
import { messageTrace } from "../../outbox/traceContext.ts";
import { endpointInUse } from "../../util/awsClient.ts";
import {
  type Destination,
  type LoadedRow,
  type Prepared,
  type PublishResult,
  requestFailed,
} from "../destination.ts";
import { detailEnvelope, stringHeaders } from "../envelope.ts";
import { checkStream } from "./streamCheck.ts";

/**
 * PutRecords limits (Amazon Kinesis Data Streams API Reference, "PutRecords" and "PutRecordsRequestEntry"):
 * - "Each PutRecords request can support up to 500 records";
 * - "Each record in the request can be as large as 1 MiB, up to a limit of 5 MiB for the entire request,
 *   including partition keys", and "the record size limit applies to the total size of the partition key and
 *   data blob". Since 2025 a stream's MaxRecordSizeInKiB can be raised to 10 MiB (UpdateMaxRecordSize); the
 *   relay keeps to the 1 MiB every stream has by default.
 * - "Partition keys are Unicode strings with a maximum length limit of 256 characters".
 * - Per record, "ErrorCodes can be either ProvisionedThroughputExceededException or InternalFailure", and a
 *   failed record does not stop the others of its request ("a PutRecords request can result in a combination of
 *   successful and unsuccessful records"): the publisher's one record per aggregate per request keeps order.
 */
export const KINESIS_MAX_BATCH_ENTRIES = 500;
export const KINESIS_MAX_BATCH_BYTES = 5 * 1_048_576;
export const KINESIS_MAX_RECORD_BYTES = 1_048_576;
export const KINESIS_MAX_PARTITION_KEY_LENGTH = 256;

export interface KinesisOptions {
  /** The stream's ARN (recommended by AWS, and needed for another account's stream) or its name. */
  stream: { streamArn: string } | { streamName: string };
  /** An emulator's URL, named when the start check cannot reach Kinesis. */
  endpoint?: string;
}

/**
 * Per-record codes (both documented ones) and whole-request errors that are not the record's fault: the shard
 * is over its throughput, Kinesis failed, the stream is missing or being updated, the relay is not allowed, a
 * KMS key is disabled or denied. Retried after backoff without limit, never dead-lettered.
 */
const NOT_THE_MESSAGE =
  /^(ProvisionedThroughputExceeded|InternalFailure|ServiceUnavailable|ResourceNotFound|ResourceInUse|LimitExceeded|AccessDenied|KMS|Throttl)/i;
/** Whole-request errors one record's content can cause: resend each alone to isolate it. */
const CONTENT = /^(InvalidArgumentException|ValidationException)$/;

/**
 * Publishes to a Kinesis data stream with PutRecords. PartitionKey = aggregate_id, so one aggregate's records land
 * on one shard, where Kinesis orders them by sequence number. Kinesis has no message attributes, so the data is
 * the same JSON envelope an EventBridge event's detail carries (envelope.ts): `{"outboxId", "aggregateType",
 * "aggregateId", "eventType", "seq", "createdAt", "headers", "payload"}` as UTF-8. Kinesis neither deduplicates
 * nor rejects a resend: a consumer deduplicates by `outboxId` (a record can also be read twice after a consumer
 * restarts from a checkpoint).
 */
export function kinesisDestination(
  client: KinesisClient,
  options: KinesisOptions,
): Destination<PutRecordsRequestEntry> {
  const stream =
    "streamArn" in options.stream
      ? { StreamARN: options.stream.streamArn }
      : { StreamName: options.stream.streamName };
  const send = async (
    batch: readonly Prepared<PutRecordsRequestEntry>[],
    signal?: AbortSignal,
  ): Promise<PublishResult[]> => {
    try {
      const response = await client.send(
        new PutRecordsCommand({ ...stream, Records: batch.map((record) => record.message) }),
        signal ? { abortSignal: signal } : {},
      );
      const records = response.Records ?? [];
      // Results are positional: "the response Records array includes both successfully and unsuccessfully
      // processed records ... in the same order as in the request".
      return batch.map((record, index) => recordResult(record.row, records[index]));
    } catch (error) {
      const name = (error as { name?: string }).name ?? "";
      return requestFailed(batch, error, CONTENT.test(name), (single) => send(single, signal), signal);
    }
  };
  return {
    kind: "kinesis",
    target: "streamArn" in options.stream ? options.stream.streamArn : options.stream.streamName,
    maxBatchEntries: KINESIS_MAX_BATCH_ENTRIES,
    maxBatchBytes: KINESIS_MAX_BATCH_BYTES,
    maxMessageBytes: KINESIS_MAX_RECORD_BYTES,
    prepare: (row) => prepareRecord(row),
    send,
    check: (timeoutMs) =>
      checkStream(
        client,
        options.stream,
        endpointInUse(
          options.endpoint,
          "KINESIS",
          "streamArn" in options.stream
            ? `https://kinesis.${options.stream.streamArn.split(":")[3]}.amazonaws.com`
            : "Kinesis's endpoint in AWS_REGION",
        ),
        timeoutMs,
      ),
  };
}

function prepareRecord(row: LoadedRow): Prepared<PutRecordsRequestEntry> | string {
  try {
    const key = row.aggregate_id;
    if (typeof key !== "string" || key.length === 0 || key.length > KINESIS_MAX_PARTITION_KEY_LENGTH) {
      throw new ValidationError(
        "aggregate_id",
        `is ${typeof key === "string" ? key.length : 0} characters; it becomes the Kinesis partition key, which takes 1-${KINESIS_MAX_PARTITION_KEY_LENGTH}`,
      );
    }
    const createdAt = checkTimestamp("created_at", row.created_at);
    const headers = stringHeaders(row.headers);
    // Kinesis has no attributes: the trace context travels in the envelope's headers (envelope.ts).
    const data = Buffer.from(detailEnvelope(row, createdAt, headers, messageTrace(row, headers).context));
    const size = data.byteLength + Buffer.byteLength(key);
    if (size > KINESIS_MAX_RECORD_BYTES) {
      throw new ValidationError(
        "payload",
        `record is ${size} bytes (the envelope and the partition key), over Kinesis's limit of ${KINESIS_MAX_RECORD_BYTES}`,
      );
    }
    return { row, size, message: { Data: data, PartitionKey: key } };
  } catch (error) {
    if (error instanceof ValidationError) return error.message;
    return `cannot build the record: ${errorMessage(error)}`;
  }
}

function recordResult(row: ClaimedRow, record: PutRecordsResultEntry | undefined): PublishResult {
  if (record === undefined) {
    return { row, status: "uncertain", error: "Kinesis returned no result for this record" };
  }
  if (record.ErrorCode === undefined && record.SequenceNumber !== undefined) {
    return { row, status: "published" };
  }
  const code = record.ErrorCode ?? "UnknownError";
  const error = `Kinesis did not take the record: ${code}: ${record.ErrorMessage ?? ""}`.trim();
  // The documented per-record codes are both Kinesis's side; an unknown one is read the same way rather than
  // risk dead-lettering a healthy event (it is retried and stays loud in the failure metrics).
  if (NOT_THE_MESSAGE.test(code) || !CONTENT.test(code)) return { row, status: "unsent", error };
  return { row, status: "rejected", error, permanent: true };
}
