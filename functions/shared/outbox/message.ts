import { stringifyWithoutRecursion } from "./deepJson.ts";
import { ValidationError } from "./errors.ts";
import { EXTENDED_PAYLOAD_SIZE } from "./payloadPointer.ts";
import type { TraceContext } from "./traceContext.ts";

/**
 * The event contract: what an outbox event is allowed to be, so the write API rejects before commit what the
 * relay could never send anywhere. The rules are the strictest destination's, SQS's (developer guide: quotas for
 * messages, FIFO ids, message attributes); a destination's own limits live in its folder (destinations/sqs/).
 */
/** The write API's default ceiling for one message (payload + attributes): SQS's maximum since 2025, 1 MiB. */
export const DEFAULT_MAX_MESSAGE_BYTES = 1_048_576;
/** Message attributes per message: SQS's limit, the tightest of the destinations that carry attributes. */
export const MAX_MESSAGE_ATTRIBUTES = 10;
/** aggregate_id becomes the FIFO MessageGroupId (SQS, SNS FIFO): 1-128 characters. */
export const MAX_GROUP_ID_LENGTH = 128;
export const MAX_NAME_LENGTH = 256;
/**
 * The longest delay an event may ask for (available_at ahead of now): 365 days. Beyond it the relay takes the row
 * as malformed and dead-letters it, naming the field, instead of letting 'infinity' or a typo of a year block its
 * group forever with no signal; the write API refuses it before commit. Backoff never reaches it (a day at most).
 */
export const MAX_DELAY_MS = 365 * 86_400_000;

/** Letters, digits and ASCII punctuation: the MessageGroupId alphabet. */
const GROUP_ID = /^[A-Za-z0-9!"#$%&'()*+,\-./:;<=>?@[\\\]^_`{|}~]+$/;
/** Message attribute names: alphanumerics, `-`, `_`, `.`; not AWS./Amazon.; no leading, trailing or double dot. */
const ATTRIBUTE_NAME = /^(?!aws\.|amazon\.)(?!\.)(?!.*\.\.)[A-Za-z0-9_.-]+(?<!\.)$/i;
/** Characters SQS allows in bodies and string attributes: #x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD and astral. */
const SQS_FORBIDDEN_CHAR = /[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u;

/** The attributes the relay sets on every message; headers may not reuse these names. */
export const STANDARD_ATTRIBUTES = [
  "eventType",
  "aggregateType",
  "aggregateId",
  "outboxId",
  "createdAt",
  // The outbox order key: per aggregate it grows in commit order (migration 0005), so a consumer can tell an
  // older event from a newer one by itself, across redeliveries and beyond SQS's 5-minute deduplication.
  "seq",
] as const;
export const MAX_HEADERS = MAX_MESSAGE_ATTRIBUTES - STANDARD_ATTRIBUTES.length;
const RESERVED = new Set(STANDARD_ATTRIBUTES.map((name) => name.toLowerCase()));

export interface MessageFields {
  id: string;
  aggregateType: string;
  aggregateId: string;
  eventType: string;
  createdAt: Date;
  /** The outbox row's seq (bigint as decimal text). */
  seq: string;
  headers: Record<string, string>;
  /** The JSON text sent as the body. */
  body: string;
  /** The producer's trace context (the row's traceparent/tracestate columns), sent in the attribute slots left. */
  trace?: TraceContext | undefined;
  /**
   * Set when the body is a claim-check pointer (payloadPointer.ts): the payload's bytes in S3, sent as the
   * Number attribute ExtendedPayloadSize that AWS's Extended Clients look for.
   */
  extendedPayloadSize?: number;
}

export type StringAttributes = Record<string, { DataType: "String" | "Number"; StringValue: string }>;

export function messageAttributes(fields: MessageFields): StringAttributes {
  const attributes: StringAttributes = {};
  const put = (name: string, value: string) => {
    attributes[name] = { DataType: "String", StringValue: value };
  };
  for (const [name, value] of Object.entries(fields.headers)) put(name, value);
  put("eventType", fields.eventType);
  put("aggregateType", fields.aggregateType);
  put("aggregateId", fields.aggregateId);
  put("outboxId", fields.id);
  put("createdAt", fields.createdAt.toISOString());
  put("seq", fields.seq);
  if (fields.extendedPayloadSize !== undefined) {
    attributes[EXTENDED_PAYLOAD_SIZE] = {
      DataType: "Number",
      StringValue: String(fields.extendedPayloadSize),
    };
  }
  // The trace context takes the slots the caller's headers (and ExtendedPayloadSize) left (SQS allows 10
  // attributes, the relay's six plus at most 4 headers): with 4 headers there is no room and only the AWSTraceHeader system attribute, which
  // uses no slot, carries it; with 3 there is room for traceparent but not tracestate. A header of the same name
  // (the caller passing traceparent itself, as before the column existed) is kept as the caller wrote it.
  for (const [name, value] of [
    ["traceparent", fields.trace?.traceparent],
    ["tracestate", fields.trace?.tracestate],
  ] as const) {
    if (value === undefined || name in attributes) continue;
    if (Object.keys(attributes).length >= MAX_MESSAGE_ATTRIBUTES) break;
    put(name, value);
  }
  return attributes;
}

/** Size as SQS counts it: body bytes plus, per attribute, name + data type + value bytes. */
export function messageSize(body: string, attributes: StringAttributes): number {
  let size = Buffer.byteLength(body);
  for (const [name, { DataType, StringValue }] of Object.entries(attributes)) {
    size += Buffer.byteLength(name) + Buffer.byteLength(DataType) + Buffer.byteLength(StringValue);
  }
  return size;
}

export function checkName(field: string, value: unknown): string {
  if (typeof value !== "string") throw new ValidationError(field, `must be a string, got ${typeOf(value)}`);
  if (value.length === 0) throw new ValidationError(field, "must not be empty (1-256 characters)");
  if (value.length > MAX_NAME_LENGTH) {
    throw new ValidationError(field, `is ${value.length} characters, the limit is ${MAX_NAME_LENGTH}`);
  }
  checkSqsText(field, value);
  return value;
}

/**
 * A time that can be sent as an ISO 8601 attribute. Postgres accepts 'infinity' and years up to 294276, which
 * node-postgres hands over as a number (Infinity) or an invalid Date; neither has an ISO form.
 */
export function checkTimestamp(field: string, value: unknown): Date {
  if (!(value instanceof Date) || Number.isNaN(value.getTime())) {
    const shown = value instanceof Date ? "beyond the range of a JavaScript Date" : String(value);
    throw new ValidationError(field, `is ${shown}, which cannot be sent as an ISO 8601 time`);
  }
  return value;
}

export function checkGroupId(field: string, value: unknown): string {
  if (typeof value !== "string") throw new ValidationError(field, `must be a string, got ${typeOf(value)}`);
  if (value.length === 0 || value.length > MAX_GROUP_ID_LENGTH) {
    throw new ValidationError(
      field,
      `is ${value.length} characters; it becomes the SQS MessageGroupId, which takes 1-${MAX_GROUP_ID_LENGTH}`,
    );
  }
  if (!GROUP_ID.test(value)) {
    const bad = [...value].find((char) => !GROUP_ID.test(char));
    throw new ValidationError(
      field,
      `contains ${JSON.stringify(bad)}; an SQS MessageGroupId takes only letters, digits and ASCII punctuation`,
    );
  }
  return value;
}

export function checkHeaders(field: string, value: unknown): Record<string, string> {
  if (value === undefined) return {};
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new ValidationError(field, `must be an object of string values, got ${typeOf(value)}`);
  }
  const entries = Object.entries(value);
  if (entries.length > MAX_HEADERS) {
    throw new ValidationError(
      field,
      `has ${entries.length} entries, the limit is ${MAX_HEADERS} (SQS allows ${MAX_MESSAGE_ATTRIBUTES} message ` +
        `attributes and the relay uses ${STANDARD_ATTRIBUTES.length})`,
    );
  }
  for (const [name, headerValue] of entries) {
    const at = `${field}.${name}`;
    if (!ATTRIBUTE_NAME.test(name) || name.length > MAX_NAME_LENGTH) {
      throw new ValidationError(
        at,
        "is not a valid SQS message attribute name (1-256 of A-Z a-z 0-9 _ - .; no AWS./Amazon. prefix; " +
          "no leading, trailing or repeated dot)",
      );
    }
    if (RESERVED.has(name.toLowerCase())) {
      throw new ValidationError(at, `is reserved for the relay (${STANDARD_ATTRIBUTES.join(", ")})`);
    }
    if (typeof headerValue !== "string") {
      throw new ValidationError(at, `must be a string, got ${typeOf(headerValue)}`);
    }
    if (headerValue.length === 0)
      throw new ValidationError(at, "must not be empty (SQS refuses empty attributes)");
    checkSqsText(at, headerValue);
  }
  return value as Record<string, string>;
}

/**
 * Serializes a payload the way the relay will send it, refusing what JSON or Postgres's jsonb would silently
 * change or reject: cycles and BigInt (JSON.stringify throws), a top-level undefined/function/symbol (no JSON
 * at all), NaN/Infinity (would become null), NUL characters and lone surrogates (jsonb rejects them).
 */
export function serializePayload(field: string, value: unknown): string {
  let json: string | undefined;
  const checkValue = (key: string, item: unknown) => {
    const at = key === "" ? field : `${field} key ${JSON.stringify(key)}`;
    if (typeof item === "number" && !Number.isFinite(item)) {
      throw new ValidationError(at, `is ${item}, which JSON cannot represent`);
    }
    if (typeof item === "string") checkJsonbText(at, item);
    if (typeof key === "string") checkJsonbText(`${field} key`, key);
    return item;
  };
  try {
    try {
      json = JSON.stringify(value, checkValue);
    } catch (error) {
      // Native JSON.stringify recurses per level and overflows the stack at a few thousand; jsonb takes more.
      if (!(error instanceof RangeError)) throw error;
      json = stringifyWithoutRecursion(value, checkValue);
    }
  } catch (error) {
    if (error instanceof ValidationError) throw error;
    throw new ValidationError(field, `is not JSON-serializable: ${(error as Error).message}`, {
      cause: error,
    });
  }
  if (json === undefined) {
    throw new ValidationError(field, `is not JSON-serializable: ${typeOf(value)} has no JSON representation`);
  }
  return json;
}

function checkJsonbText(field: string, value: string) {
  if (value.includes("\u0000"))
    throw new ValidationError(field, "contains a NUL character, which jsonb rejects");
  if (!value.isWellFormed())
    throw new ValidationError(field, "contains a lone UTF-16 surrogate, which jsonb rejects");
}

/** A body or string attribute must use only characters SQS accepts (JSON escapes control codes, not U+FFFF). */
export function checkSqsText(field: string, value: string) {
  const match = SQS_FORBIDDEN_CHAR.exec(value);
  if (match !== null) {
    const code = match[0].codePointAt(0)?.toString(16).padStart(4, "0");
    throw new ValidationError(field, `contains U+${code}, a character SQS refuses`);
  }
}

function typeOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  return typeof value;
}
