/**
 * The claim check's wire format, shared by the relay (which writes it) and the inbox (which resolves it): the
 * format of AWS's Extended Client Libraries, so a consumer using them reads our messages unchanged.
 * - The body is the pointer as the Java library's Jackson converter writes it, class name first:
 *   `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"…","s3Key":"…"}]`
 *   (awslabs/payload-offloading-java-common-lib, PayloadS3Pointer.java; read by
 *   awslabs/amazon-sqs-java-extended-client-lib and the Python sqs-extended-client).
 * - The message carries the Number attribute `ExtendedPayloadSize` = the payload's bytes: its presence is what
 *   tells the Extended Client a body is a pointer (SQSExtendedClientConstants.RESERVED_ATTRIBUTE_NAME, shared with
 *   the SNS Extended Client; MAX_ALLOWED_ATTRIBUTES = 10 - 1 leaves the sender 9 of SQS's 10 attributes).
 * A leaf: imports nothing, so the write API and the consumer load no AWS SDK through it.
 */
export const POINTER_CLASS = "software.amazon.payloadoffloading.PayloadS3Pointer";
export const EXTENDED_PAYLOAD_SIZE = "ExtendedPayloadSize";
/**
 * The largest payload the claim check takes: 64 MiB. Bounded because the relay loads a payload whole (one row
 * over the round's byte budget is loaded alone) and the insert trigger prints it once to size it (~35-54 MB/s).
 */
export const MAX_PAYLOAD_BYTES_LIMIT = 67_108_864;
/** What a "too large" dead letter says when the claim check could have sent it. */
export const CLAIM_CHECK_HINT =
  "larger payloads go through S3 with the claim check: OUTBOX_PAYLOAD_BUCKET, docs/large-payloads.md";
/** S3 keys are at most 1,024 bytes; the Extended Client allows prefixes of `[a-zA-Z0-9./_-]` only. */
const PREFIX = /^[A-Za-z0-9./_-]{0,900}$/;

export interface PayloadPointer {
  s3BucketName: string;
  s3Key: string;
}

/** The pointer body, compact JSON: the bucket and key are the only variable parts. */
export function pointerBody(pointer: PayloadPointer): string {
  return JSON.stringify([POINTER_CLASS, { s3BucketName: pointer.s3BucketName, s3Key: pointer.s3Key }]);
}

/**
 * The object key of an event's payload: the optional prefix and the outbox id. Derived from the id alone, so a
 * retry (after a failed send, a killed relay) overwrites the same object instead of leaving a second one.
 */
export function payloadKey(prefix: string, outboxId: string): string {
  return `${prefix}${outboxId}`;
}

export function isValidKeyPrefix(prefix: string): boolean {
  return PREFIX.test(prefix);
}

/**
 * The pointer in a parsed body, or undefined when the value is not one. Accepts exactly the Extended Client's
 * shape: a two-element array of the class name and an object with two non-empty strings.
 */
export function asPointer(value: unknown): PayloadPointer | undefined {
  if (!Array.isArray(value) || value.length !== 2 || value[0] !== POINTER_CLASS) return undefined;
  const fields = value[1] as Partial<PayloadPointer> | null;
  if (fields === null || typeof fields !== "object") return undefined;
  const { s3BucketName, s3Key } = fields;
  if (typeof s3BucketName !== "string" || typeof s3Key !== "string") return undefined;
  if (s3BucketName.length === 0 || s3Key.length === 0) return undefined;
  return { s3BucketName, s3Key };
}
