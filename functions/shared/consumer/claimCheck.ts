import { ValidationError } from "../outbox/errors.ts";
import { asPointer, type PayloadPointer } from "../outbox/payloadPointer.ts";
import type { InboxEvent } from "./inboxEvent.ts";

/** Reads a payload's object; throws a ValidationError naming the object when it does not exist. */
export type PayloadFetch = (pointer: PayloadPointer) => Promise<string>;

/**
 * The payload of an event the relay sent through S3 (docs/large-payloads.md): when the payload is the Extended
 * Client pointer, the object's JSON replaces it, so the handler sees the payload as enqueued. Done before the
 * record's transaction begins (no row lock is held while S3 answers). A missing object (expired by the bucket's
 * lifecycle, deleted) fails the record loudly and nothing is applied. The S3 client is loaded only when a pointer
 * is met: a consumer that never receives one loads no S3 SDK.
 */
export async function resolveClaimCheck(event: InboxEvent, fetch?: PayloadFetch): Promise<InboxEvent> {
  const pointer = asPointer(event.payload);
  if (pointer === undefined) return event;
  const read = fetch ?? (await import("./s3Payloads.ts")).fetchPayloadFromS3;
  const text = await read(pointer);
  try {
    return { ...event, payload: JSON.parse(text) };
  } catch (error) {
    throw new ValidationError(
      "payload",
      `s3://${pointer.s3BucketName}/${pointer.s3Key} is not JSON: ${(error as Error).message}`,
      { cause: error },
    );
  }
}
