import { ValidationError } from "./errors.ts";

/**
 * Trace context as an outbox event carries it: the W3C Trace Context (`traceparent`, `tracestate`) of the
 * producer's span, and its X-Ray form for the AWS services that speak only X-Ray (SQS's `AWSTraceHeader` message
 * system attribute, EventBridge's `TraceHeader`). A leaf: the write API, the destinations and the consumer share
 * these rules, and the table's trigger (migration 0013) checks the same shapes for rows written by plain SQL.
 */
export interface TraceContext {
  /** `00-<32 hex trace id>-<16 hex parent span id>-<2 hex flags>` (W3C Trace Context, version 00). */
  traceparent: string;
  /** The vendors' list (`key=value,...`), when the producer's context had one. */
  tracestate?: string;
}

/**
 * The longest tracestate the outbox keeps: 512 characters, W3C Trace Context's "at least 512 characters"
 * that every platform must propagate (section 3.3.1.5); a longer list may be truncated by any hop anyway.
 */
export const MAX_TRACESTATE_LENGTH = 512;

/** Version 00 only: a later version may add fields (the spec lets a parser read its first four), never needed here. */
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const INVALID_TRACE_ID = "0".repeat(32);
const INVALID_SPAN_ID = "0".repeat(16);
/** One list member: `key=value`; key of lowercase letters, digits and `_-*` `/` `@`; value of printable ASCII but `,` `=`. */
const TRACESTATE_MEMBER =
  /^[a-z0-9][a-z0-9_\-*/@]{0,255}=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$/;
/** X-Ray's trace header: `Root=1-<8 hex>-<24 hex>`, then `Parent=<16 hex>` and `Sampled=0|1|?` in any order. */
const XRAY_ROOT = /^1-([0-9a-f]{8})-([0-9a-f]{24})$/;

export function checkTraceparent(field: string, value: unknown): string {
  if (typeof value !== "string") throw new ValidationError(field, `must be a string, got ${typeof value}`);
  const match = TRACEPARENT.exec(value);
  if (match === null) {
    throw new ValidationError(
      field,
      `${JSON.stringify(value.slice(0, 80))} is not a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>, lowercase)`,
    );
  }
  if (match[1] === INVALID_TRACE_ID || match[2] === INVALID_SPAN_ID) {
    throw new ValidationError(
      field,
      "has an all-zero trace or span id, which W3C Trace Context declares invalid",
    );
  }
  return value;
}

export function checkTracestate(field: string, value: unknown): string {
  if (typeof value !== "string") throw new ValidationError(field, `must be a string, got ${typeof value}`);
  if (value.length > MAX_TRACESTATE_LENGTH) {
    throw new ValidationError(field, `is ${value.length} characters, the limit is ${MAX_TRACESTATE_LENGTH}`);
  }
  const members = value.split(",").map((member) => member.trim());
  if (members.length > 32 || members.some((member) => !TRACESTATE_MEMBER.test(member))) {
    throw new ValidationError(field, "is not a W3C tracestate (1-32 comma-separated key=value members)");
  }
  return value;
}

/**
 * The X-Ray header for a W3C traceparent. X-Ray reads a W3C trace id as its own: `1-` + the first 8 hex digits
 * (X-Ray's epoch field) + `-` + the other 24 (AWS X-Ray Developer Guide, "Tracing header" and "Using W3C trace
 * IDs": X-Ray accepts any 32-hex id split that way, not only ids whose first part is a time); the parent span id
 * is the segment id as is, and the W3C `sampled` flag (bit 0 of the flags) becomes `Sampled=1|0`.
 */
export function xrayFromTraceparent(traceparent: string): string | undefined {
  const match = TRACEPARENT.exec(traceparent.trim().toLowerCase());
  if (match === null) return undefined;
  const [, traceId = "", parent, flags = "00"] = match;
  const sampled = Number.parseInt(flags, 16) & 1;
  return `Root=1-${traceId.slice(0, 8)}-${traceId.slice(8)};Parent=${parent};Sampled=${sampled}`;
}

/**
 * The W3C traceparent for an X-Ray header, when it names a root and a parent (a header without `Parent` has no
 * span to continue). `Sampled=?` (the decision deferred) reads as not sampled, as the W3C flag has no "undecided".
 */
export function traceparentFromXray(header: string): string | undefined {
  const fields = xrayFields(header);
  const root = XRAY_ROOT.exec(fields.get("Root") ?? "");
  const parent = fields.get("Parent") ?? "";
  if (root === null || !/^[0-9a-f]{16}$/.test(parent)) return undefined;
  const traceId = `${root[1]}${root[2]}`;
  if (traceId === INVALID_TRACE_ID || parent === INVALID_SPAN_ID) return undefined;
  return `00-${traceId}-${parent}-${fields.get("Sampled") === "1" ? "01" : "00"}`;
}

/** An X-Ray header SQS takes as AWSTraceHeader: one with a well-formed root (Parent and Sampled are optional). */
export function isXrayHeader(header: string): boolean {
  return XRAY_ROOT.test(xrayFields(header).get("Root") ?? "");
}

function xrayFields(header: string): Map<string, string> {
  const fields = new Map<string, string>();
  for (const part of header.split(";")) {
    const at = part.indexOf("=");
    if (at > 0)
      fields.set(
        part.slice(0, at).trim(),
        part
          .slice(at + 1)
          .trim()
          .toLowerCase(),
      );
  }
  return fields;
}

/** What one message carries of its producer's trace: the W3C context, and the X-Ray header for AWS's services. */
export interface MessageTrace {
  context?: TraceContext;
  /** For SQS's AWSTraceHeader system attribute and EventBridge's TraceHeader. */
  xray?: string;
}

/**
 * The trace a row's message carries. The row's own context (the traceparent/tracestate columns: what `enqueue`
 * captured, or plain SQL wrote, checked by migration 0013's trigger) comes first, so AWSTraceHeader and the
 * traceparent attribute always name the same trace. Without it, the caller's headers as before the columns
 * existed: an `X-Amzn-Trace-Id` header (used as is when it names a root) and a `traceparent` / `tracestate`.
 * A header that is not a valid trace header is left alone (sent as a header, never as a trace: SQS refuses a
 * malformed AWSTraceHeader, which would turn the event into a dead letter).
 */
export function messageTrace(
  row: { traceparent?: string | null; tracestate?: string | null },
  headers: Record<string, string>,
): MessageTrace {
  if (typeof row.traceparent === "string" && TRACEPARENT.test(row.traceparent)) {
    const context: TraceContext = { traceparent: row.traceparent };
    if (typeof row.tracestate === "string" && row.tracestate !== "") context.tracestate = row.tracestate;
    return withXray(context, xrayFromTraceparent(row.traceparent));
  }
  let traceparent: string | undefined;
  let tracestate: string | undefined;
  let xray: string | undefined;
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (lower === "traceparent") traceparent = value.trim().toLowerCase();
    if (lower === "tracestate") tracestate = value;
    if (lower === "x-amzn-trace-id" && isXrayHeader(value)) xray = value.trim();
  }
  const context =
    traceparent !== undefined && TRACEPARENT.test(traceparent)
      ? tracestate === undefined
        ? { traceparent }
        : { traceparent, tracestate }
      : undefined;
  return withXray(
    context,
    xray ?? (context === undefined ? undefined : xrayFromTraceparent(context.traceparent)),
  );
}

function withXray(context: TraceContext | undefined, xray: string | undefined): MessageTrace {
  const trace: MessageTrace = {};
  if (context !== undefined) trace.context = context;
  if (xray !== undefined) trace.xray = xray;
  return trace;
}
