import { ValidationError } from "../outbox/errors.ts";
import { compactJsonbText } from "../outbox/jsonbText.ts";
import type { TraceContext } from "../outbox/traceContext.ts";
import type { LoadedRow } from "./destination.ts";

/**
 * The JSON envelope for destinations that carry no message attributes (an EventBridge event's `detail`, a
 * Kinesis record's data): what SQS and SNS put in attributes goes into the envelope beside the payload,
 * `{"outboxId", "aggregateType", "aggregateId", "eventType", "seq", "createdAt", "headers", "payload"}`.
 *
 * Built as text: the payload is spliced in as stored (compacted jsonb text), never parsed and re-serialized, so
 * a 20-digit number reaches the consumer as written. The payload may be any JSON value; the envelope is always
 * an object (EventBridge requires one). The row's trace context joins `headers` as `traceparent`/`tracestate`
 * (where SQS carries them as attributes; a header of the same name is kept as the caller wrote it).
 * A payload sent through S3 is the pointer `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName",
 * "s3Key"}]` beside `"extendedPayloadSize": <bytes>` (docs/large-payloads.md).
 */
export function detailEnvelope(
  row: LoadedRow,
  createdAt: Date,
  headers: Record<string, string>,
  trace?: TraceContext,
): string {
  const fields = {
    outboxId: row.id,
    aggregateType: row.aggregate_type,
    aggregateId: row.aggregate_id,
    eventType: row.event_type,
    seq: String(row.seq),
    createdAt: createdAt.toISOString(),
    headers: trace === undefined ? headers : { ...trace, ...headers },
    // A claim check (claimCheck/claimCheck.ts): `payload` is then the Extended Client pointer, and this its size.
    ...(row.extendedPayloadSize === undefined ? {} : { extendedPayloadSize: row.extendedPayloadSize }),
  };
  return `${JSON.stringify(fields).slice(0, -1)},"payload":${compactJsonbText(row.payload)}}`;
}

/** Headers go into the envelope as they are; they must be an object of strings (the write API checks it too). */
export function stringHeaders(headers: unknown): Record<string, string> {
  if (headers === null || headers === undefined) return {};
  if (typeof headers !== "object" || Array.isArray(headers)) {
    throw new ValidationError("headers", "must be an object of string values");
  }
  for (const [name, value] of Object.entries(headers)) {
    if (typeof value !== "string") {
      throw new ValidationError(`headers.${name}`, `must be a string, got ${typeof value}`);
    }
  }
  return headers as Record<string, string>;
}
