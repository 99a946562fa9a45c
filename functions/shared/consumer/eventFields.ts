import { ValidationError } from "../outbox/errors.ts";

/**
 * Checks of the fields every outbox event carries, whichever way it arrived (the relay's SQS message attributes
 * or the detail of an EventBridge event); `field` is where the value was found, so an error names it.
 */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function outboxId(field: string, value: string): string {
  if (!UUID.test(value)) throw new ValidationError(field, `is not a uuid: ${JSON.stringify(value)}`);
  return value.toLowerCase();
}

export function timestamp(field: string, value: string): Date {
  const date = new Date(value);
  if (Number.isNaN(date.getTime()))
    throw new ValidationError(field, `is not a timestamp: ${JSON.stringify(value)}`);
  return date;
}

/** The outbox order key: a bigint column, so at most 19 digits. */
export function orderKey(field: string, value: string): bigint {
  if (!/^\d{1,19}$/.test(value))
    throw new ValidationError(field, `is not an order key: ${JSON.stringify(value)}`);
  return BigInt(value);
}

/** SQS FIFO's SequenceNumber (128 bits) when the queue has one; undefined on a standard queue. */
export function sequenceNumber(value: string | undefined): bigint | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value))
    throw new ValidationError("attributes.SequenceNumber", `is not a number: ${JSON.stringify(value)}`);
  return BigInt(value);
}

/** X-Ray's header (the AWSTraceHeader system attribute) and the W3C headers among the producer's headers. */
export function traceContext(
  awsTraceHeader: string | undefined,
  headers: Record<string, string>,
): { awsTraceHeader?: string; traceparent?: string; tracestate?: string } {
  const trace: { awsTraceHeader?: string; traceparent?: string; tracestate?: string } = {};
  if (awsTraceHeader !== undefined) trace.awsTraceHeader = awsTraceHeader;
  if (headers.traceparent !== undefined) trace.traceparent = headers.traceparent;
  if (headers.tracestate !== undefined) trace.tracestate = headers.tracestate;
  return trace;
}
