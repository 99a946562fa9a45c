import { errorMessage } from "../../outbox/errors.ts";
import { compactJsonbText } from "../../outbox/jsonbText.ts";
import { MAX_HEADERS } from "../../outbox/message.ts";
import { payloadKey, pointerBody } from "../../outbox/payloadPointer.ts";
import type { Destination, LoadedRow, Prepared, PublishResult } from "../destination.ts";

/** Where payloads go: one bucket. `put` resolves once S3 has stored the object and throws otherwise. */
export interface PayloadStore {
  readonly bucket: string;
  put(key: string, body: string, signal?: AbortSignal): Promise<void>;
}

export interface ClaimCheckOptions {
  /** Prepended to the outbox id to make the object key (`""`, or e.g. `outbox/`). */
  prefix: string;
  /**
   * Payloads whose compact JSON is over this many bytes always go through S3. Unset: only those whose message
   * would not fit the destination.
   */
  thresholdBytes?: number;
  /** The largest payload accepted at all (OUTBOX_MAX_PAYLOAD_BYTES); a bigger one is dead-lettered. */
  maxPayloadBytes: number;
}

/** A prepared message whose payload must be in S3 before the pointer is sent. */
interface Offloaded<Message> extends Prepared<Message> {
  upload: { key: string; body: string };
}

/**
 * The claim check, around any destination: a payload whose message would not fit (or over the threshold) is
 * written to S3 under `prefix + outbox id` and the message carries the Extended Client pointer instead
 * (outbox/payloadPointer.ts), with ExtendedPayloadSize as an attribute (SQS, SNS) or an envelope field
 * (EventBridge, Kinesis). Everything else passes through unchanged.
 *
 * What it keeps:
 * - Order and dedup: the upload happens inside send(), before the entry's request, so the publisher's waves (one
 *   entry per group per request, a group's requests one after another, later events held after a failure) are
 *   unchanged, and the message's dedup id is still the outbox id.
 * - Idempotence: the key is derived from the outbox id alone, so a retry overwrites the same object.
 * - Outage, not poison: an upload that fails (S3 unreachable, throttled, denied, 5xx) leaves its entry `unsent`,
 *   which backs off and retries without limit and never counts towards dead-lettering; its group waits.
 * - Memory: the payload is the row's text as loaded within the round's byte budget plus its compact copy; the
 *   pointer message is small, so the request packing and its byte limits see only pointers.
 */
export function claimCheckDestination<Message>(
  inner: Destination<Message>,
  store: PayloadStore,
  options: ClaimCheckOptions,
): Destination<Message> {
  const threshold = options.thresholdBytes ?? inner.maxMessageBytes;

  const offload = (row: LoadedRow, body: string, bytes: number): Prepared<Message> | string => {
    const headerCount = countHeaders(row.headers);
    if (headerCount >= MAX_HEADERS) {
      return (
        `headers: has ${headerCount} entries; a payload of ${bytes} bytes goes through S3 and its message carries ` +
        `the ExtendedPayloadSize attribute, which leaves room for ${MAX_HEADERS - 1}`
      );
    }
    const key = payloadKey(options.prefix, row.id);
    const pointer = pointerBody({ s3BucketName: store.bucket, s3Key: key });
    const prepared = inner.prepare({ ...row, payload: pointer, extendedPayloadSize: bytes });
    if (typeof prepared === "string") return prepared;
    const offloaded: Offloaded<Message> = { ...prepared, upload: { key, body } };
    return offloaded;
  };

  const prepare = (row: LoadedRow): Prepared<Message> | string => {
    let body: string;
    try {
      body = compactJsonbText(row.payload);
    } catch (error) {
      return `cannot build the message: ${errorMessage(error)}`;
    }
    const bytes = Buffer.byteLength(body);
    if (bytes > options.maxPayloadBytes) {
      return (
        `payload: its JSON is ${bytes} bytes, over the claim check's limit of ${options.maxPayloadBytes} ` +
        "(OUTBOX_MAX_PAYLOAD_BYTES)"
      );
    }
    if (bytes <= threshold) {
      const direct = inner.prepare(row);
      if (typeof direct !== "string") return direct;
      // Too big with its attributes, or unsendable as a body: as a pointer it may go; if not, the first reason.
      const viaS3 = offload(row, body, bytes);
      return typeof viaS3 === "string" ? direct : viaS3;
    }
    return offload(row, body, bytes);
  };

  const send = async (
    batch: readonly Prepared<Message>[],
    signal?: AbortSignal,
  ): Promise<PublishResult[]> => {
    const failed = new Map<Prepared<Message>, string>();
    await Promise.all(
      batch.filter(isOffloaded).map(async (entry) => {
        try {
          await store.put(entry.upload.key, entry.upload.body, signal);
        } catch (error) {
          failed.set(
            entry,
            `S3 PutObject s3://${store.bucket}/${entry.upload.key} failed: ${errorMessage(error)}`,
          );
        }
      }),
    );
    const ready = batch.filter((entry) => !failed.has(entry));
    const sent = ready.length === 0 ? [] : await inner.send(ready, signal);
    let next = 0;
    return batch.map((entry): PublishResult => {
      const error = failed.get(entry);
      if (error !== undefined) return { row: entry.row, status: "unsent", error };
      return (
        sent[next++] ?? { row: entry.row, status: "uncertain", error: "the destination returned no result" }
      );
    });
  };

  const destination: Destination<Message> = {
    kind: inner.kind,
    target: inner.target,
    maxBatchEntries: inner.maxBatchEntries,
    maxBatchBytes: inner.maxBatchBytes,
    // What the relay loads: payloads up to the claim check's limit are sendable (as pointers).
    maxMessageBytes: Math.max(inner.maxMessageBytes, options.maxPayloadBytes),
    prepare,
    send,
  };
  if (inner.check) destination.check = inner.check.bind(inner);
  if (inner.channelOf) destination.channelOf = inner.channelOf.bind(inner);
  if (inner.destinationOf) destination.destinationOf = inner.destinationOf.bind(inner);
  return destination;
}

function isOffloaded<Message>(entry: Prepared<Message>): entry is Offloaded<Message> {
  return (entry as Partial<Offloaded<Message>>).upload !== undefined;
}

function countHeaders(headers: unknown): number {
  return headers !== null && typeof headers === "object" ? Object.keys(headers).length : 0;
}
