import { ValidationError } from "../outbox/errors.ts";
import { orderKey, outboxId, timestamp } from "./eventFields.ts";
import type { InboxEvent } from "./inboxEvent.ts";

/**
 * The relay's JSON envelope, read back: what destinations without message attributes carry (an EventBridge
 * event's `detail`, a Kinesis record's data; functions/shared/destinations/envelope.ts writes it),
 * `{outboxId, aggregateType, aggregateId, eventType, seq, createdAt, headers, payload}`. Every field the relay
 * always writes is checked, and a missing or malformed one is a ValidationError naming it (`at.seq`, ...): such an
 * envelope did not come from the relay, or was changed on the way, and must not be applied.
 */
export type EnvelopeFields = Pick<
  InboxEvent,
  "id" | "eventType" | "aggregateType" | "aggregateId" | "createdAt" | "seq" | "headers" | "payload"
>;

export function parseEnvelope(envelope: unknown, at: string): EnvelopeFields {
  if (typeof envelope !== "object" || envelope === null || Array.isArray(envelope)) {
    throw new ValidationError(at, `is ${describe(envelope)}; expected the relay's envelope object`);
  }
  const field = (name: string) => (envelope as Record<string, unknown>)[name];
  if (!("payload" in envelope)) {
    throw new ValidationError(`${at}.payload`, "is missing; the relay always writes the payload");
  }
  return {
    id: outboxId(`${at}.outboxId`, text(field("outboxId"), `${at}.outboxId`)),
    eventType: text(field("eventType"), `${at}.eventType`),
    aggregateType: text(field("aggregateType"), `${at}.aggregateType`),
    aggregateId: text(field("aggregateId"), `${at}.aggregateId`),
    createdAt: timestamp(`${at}.createdAt`, text(field("createdAt"), `${at}.createdAt`)),
    seq: orderKey(`${at}.seq`, text(field("seq"), `${at}.seq`)),
    headers: stringRecord(field("headers"), `${at}.headers`),
    payload: field("payload"),
  };
}

/** A non-empty string the relay always writes, or a ValidationError naming the field. */
export function text(value: unknown, field: string): string {
  if (typeof value !== "string" || value === "") {
    throw new ValidationError(field, `is ${describe(value)}; the relay always writes a non-empty string`);
  }
  return value;
}

/**
 * The body of a record that is not one of the relay's own messages (those always carry an `outboxId` message
 * attribute), when it is a JSON object: what an SNS notification or an EventBridge event is recognised by.
 */
export function foreignJsonBody(record: {
  body: string;
  messageAttributes?: Record<string, unknown>;
}): Record<string, unknown> | undefined {
  if (record.messageAttributes?.outboxId !== undefined) return undefined;
  let body: unknown;
  try {
    body = JSON.parse(record.body);
  } catch {
    return undefined;
  }
  return typeof body === "object" && body !== null && !Array.isArray(body)
    ? (body as Record<string, unknown>)
    : undefined;
}

/** JSON text, parsed; a ValidationError naming the field when it is not JSON. */
export function parseJson(value: string, field: string): unknown {
  try {
    return JSON.parse(value);
  } catch (error) {
    throw new ValidationError(field, `is not JSON: ${(error as Error).message}`, { cause: error });
  }
}

function stringRecord(value: unknown, field: string): Record<string, string> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ValidationError(field, `is ${describe(value)}; expected an object of strings`);
  }
  for (const [name, entry] of Object.entries(value)) {
    if (typeof entry !== "string") throw new ValidationError(`${field}.${name}`, `is ${describe(entry)}`);
  }
  return value as Record<string, string>;
}

export function describe(value: unknown): string {
  if (value === undefined) return "missing";
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "string" ? `the string ${JSON.stringify(value.slice(0, 40))}` : `a ${typeof value}`;
}
