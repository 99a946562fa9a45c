/**
 * What SQS accepts, checked as SQS checks it before anything reaches a queue: message bodies and attributes
 * (characters, names, types, sizes), FIFO group and deduplication ids (content-based deduplication included),
 * delays, batch entries (count, ids, total size), integer parameters, queue names and queue attributes,
 * receipt handles. Each failure is the SqsError real SQS answers with, so the SDK raises the same exception.
 */
import { createHash } from "node:crypto";
import type { Attribute, Queue, QueueAttributes } from "./sqsQueue.ts";
import { invalid, md5OfAttributes, missing, type SendEntry, SqsError } from "./sqsWire.ts";

const MAX_BATCH_ENTRIES = 10;
const MAX_BATCH_BYTES = 1_048_576;
const MAX_MESSAGE_ATTRIBUTES = 10;

/** Characters SQS allows in a body and in string attribute values. */
const INVALID_CHARACTER = /[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u;
/** Group and deduplication ids: 1-128 alphanumerics and punctuation, i.e. printable ASCII without space. */
const FIFO_ID = /^[\u0021-\u007E]{1,128}$/;
const BATCH_ENTRY_ID = /^[A-Za-z0-9_-]{1,80}$/;
const QUEUE_NAME = /^[A-Za-z0-9_-]{1,80}$/;
const ATTRIBUTE_NAME = /^[A-Za-z0-9_.-]{1,256}$/;
const DATA_TYPE = /^(String|Number|Binary)(\..+)?$/;
const NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;
const RECEIPT = /^AQEB-\d+-/;

/** Parses and validates MessageAttributes (or MessageSystemAttributes); returns them sorted by name. */
function parseAttributes(raw: unknown, kind: "message" | "system"): Attribute[] {
  if (raw === undefined || raw === null) return [];
  if (typeof raw !== "object" || Array.isArray(raw)) throw invalid(`${kind} attributes must be a map.`);
  const entries = Object.entries(raw as Record<string, unknown>);
  if (entries.length > MAX_MESSAGE_ATTRIBUTES) {
    throw invalid(`Number of message attributes [${entries.length}] exceeds the allowed maximum [10].`);
  }
  const attributes: Attribute[] = [];
  for (const [name, value] of entries) {
    if (kind === "system" && name !== "AWSTraceHeader") {
      throw invalid(`Message system attribute name '${name}' is invalid.`);
    }
    const lower = name.toLowerCase();
    if (
      kind === "message" &&
      (!ATTRIBUTE_NAME.test(name) ||
        lower.startsWith("aws.") ||
        lower.startsWith("amazon.") ||
        name.startsWith(".") ||
        name.endsWith(".") ||
        name.includes(".."))
    ) {
      throw invalid(`Message (user) attribute name '${name}' is invalid.`);
    }
    const v = (typeof value === "object" && value !== null ? value : {}) as Record<string, unknown>;
    const dataType = v.DataType;
    if (typeof dataType !== "string" || dataType.length > 256 || !DATA_TYPE.test(dataType)) {
      throw invalid(`The message attribute '${name}' has an invalid message attribute type.`);
    }
    if (dataType.startsWith("Binary")) {
      const base64 = v.BinaryValue;
      const binary = typeof base64 === "string" ? Buffer.from(base64, "base64") : undefined;
      if (binary === undefined || binary.length === 0 || typeof base64 !== "string") {
        throw invalid(`Message (user) attribute '${name}' must contain a non-empty value of type 'Binary'.`);
      }
      attributes.push({ name, dataType, binary, base64: binary.toString("base64") });
    } else {
      const stringValue = v.StringValue;
      if (typeof stringValue !== "string" || stringValue === "") {
        throw invalid(`Message (user) attribute '${name}' must contain a non-empty value of type 'String'.`);
      }
      if (dataType.startsWith("Number") && !NUMBER.test(stringValue)) {
        throw invalid(`Can't cast the value of message (user) attribute '${name}' to a number.`);
      }
      if (INVALID_CHARACTER.test(stringValue)) {
        throw invalid(`Message (user) attribute '${name}' value contains invalid characters.`);
      }
      attributes.push({ name, dataType, stringValue });
    }
  }
  return attributes.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** Size as SQS counts it against MaximumMessageSize: body bytes + each attribute's name, type and value bytes. */
function attributeBytes(attributes: readonly Attribute[]): number {
  let size = 0;
  for (const a of attributes) {
    size += Buffer.byteLength(a.name) + Buffer.byteLength(a.dataType);
    size += a.binary !== undefined ? a.binary.length : Buffer.byteLength(a.stringValue ?? "");
  }
  return size;
}

/**
 * A FIFO batch with an entry lacking its MessageGroupId, or its MessageDeduplicationId on a queue without
 * content-based deduplication, fails as a whole, not as that entry: what AWS answers (LocalStack's AWS-validated
 * tests `test_send_batch_missing_message_group_id_for_fifo_queue` and `..._deduplication_id_...`); other entry
 * problems fail only their entry.
 */
export function checkFifoBatch(queue: Queue, entries: readonly SendEntry[]): void {
  if (!queue.fifo) return;
  for (const entry of entries) {
    if (entry.MessageGroupId === undefined || entry.MessageGroupId === null) throw missing("MessageGroupId");
    if (
      (entry.MessageDeduplicationId === undefined || entry.MessageDeduplicationId === null) &&
      !queue.contentBasedDedup
    ) {
      throw invalid(
        "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly",
      );
    }
  }
}

/** A batch's total size, as far as it can be told before each entry is validated. */
export function checkBatchBytes(entries: readonly SendEntry[]): void {
  let total = 0;
  for (const entry of entries) total += rawEntryBytes(entry);
  if (total > MAX_BATCH_BYTES) {
    throw new SqsError(
      "BatchRequestTooLong",
      `Batch requests cannot be longer than ${MAX_BATCH_BYTES} bytes. You have sent ${total} bytes.`,
    );
  }
}

/** Best-effort size of a raw entry, for the batch total, before per-entry validation. */
function rawEntryBytes(entry: SendEntry): number {
  let size = typeof entry.MessageBody === "string" ? Buffer.byteLength(entry.MessageBody) : 0;
  if (entry.MessageAttributes && typeof entry.MessageAttributes === "object") {
    for (const [name, v] of Object.entries(entry.MessageAttributes)) {
      size += Buffer.byteLength(name) + Buffer.byteLength(String(v?.DataType ?? ""));
      if (typeof v?.StringValue === "string") size += Buffer.byteLength(v.StringValue);
      if (typeof v?.BinaryValue === "string") size += Buffer.byteLength(v.BinaryValue, "base64");
    }
  }
  return size;
}

/** A send that passed validation, ready for the queue. */
export interface PreparedSend {
  body: string;
  attributes: Attribute[];
  traceHeader: string | undefined;
  md5OfSystemAttributes: string | undefined;
  groupId: string | undefined;
  dedupId: string | undefined;
  delaySeconds: number;
}

export function prepareSend(queue: Queue, entry: SendEntry): PreparedSend {
  const body = entry.MessageBody;
  if (body === undefined || body === null || body === "") throw missing("MessageBody");
  if (typeof body !== "string") throw invalid("Value for parameter MessageBody is invalid.");
  if (INVALID_CHARACTER.test(body)) {
    throw new SqsError(
      "InvalidMessageContents",
      "Invalid binary character in the message body. Only #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF are allowed.",
    );
  }
  const attributes = parseAttributes(entry.MessageAttributes, "message");
  const system = parseAttributes(entry.MessageSystemAttributes, "system");
  const size = Buffer.byteLength(body) + attributeBytes(attributes);
  if (size > queue.maxMessageSize) {
    throw invalid(
      `One or more parameters are invalid. Reason: Message must be shorter than ${queue.maxMessageSize} bytes.`,
    );
  }
  let delaySeconds = queue.delaySeconds;
  if (entry.DelaySeconds !== undefined && entry.DelaySeconds !== null) {
    const delay = entry.DelaySeconds;
    if (!Number.isInteger(delay) || delay < 0 || delay > 900) {
      throw invalid(
        `Value ${delay} for parameter DelaySeconds is invalid. Reason: must be between 0 and 900.`,
      );
    }
    if (queue.fifo && delay !== 0) {
      throw invalid(
        `Value ${delay} for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid for this queue type.`,
      );
    }
    delaySeconds = delay;
  }
  const groupId = fifoId(entry.MessageGroupId, "MessageGroupId");
  let dedupId = fifoId(entry.MessageDeduplicationId, "MessageDeduplicationId");
  if (queue.fifo) {
    if (groupId === undefined) throw missing("MessageGroupId");
    if (dedupId === undefined) {
      if (!queue.contentBasedDedup) {
        throw invalid(
          "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly",
        );
      }
      // Content-based deduplication: SHA-256 of the body (attributes are not part of it).
      dedupId = createHash("sha256").update(body).digest("hex");
    }
  } else if (dedupId !== undefined) {
    throw invalid(
      "Value for parameter MessageDeduplicationId is invalid. Reason: The request include parameter that is not valid for this queue type.",
    );
  }
  return {
    body,
    attributes,
    traceHeader: system[0]?.stringValue,
    md5OfSystemAttributes: md5OfAttributes(system),
    groupId,
    dedupId,
    delaySeconds,
  };
}

function fifoId(value: unknown, name: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "string" || !FIFO_ID.test(value)) {
    throw invalid(
      `Value ${String(value)} for parameter ${name} is invalid. Reason: ${name} can only include alphanumeric and punctuation characters. 1 to 128 in length.`,
    );
  }
  return value;
}

/** Checks shared by the batch actions; whole-request errors, as SQS answers them. */
export function batchEntries<T extends { Id?: unknown }>(input: Record<string, unknown>): T[] {
  const entries = input.Entries;
  if (entries === undefined || entries === null || (Array.isArray(entries) && entries.length === 0)) {
    throw new SqsError(
      "EmptyBatchRequest",
      "There should be at least one SendMessageBatchRequestEntry in the request.",
    );
  }
  if (!Array.isArray(entries)) throw invalid("Entries must be a list.");
  if (entries.length > MAX_BATCH_ENTRIES) {
    throw new SqsError(
      "TooManyEntriesInBatchRequest",
      `Maximum number of entries per request are ${MAX_BATCH_ENTRIES}. You have sent ${entries.length}.`,
    );
  }
  const ids = new Set<string>();
  for (const entry of entries as T[]) {
    const id = entry?.Id;
    if (typeof id !== "string" || !BATCH_ENTRY_ID.test(id)) {
      throw new SqsError(
        "InvalidBatchEntryId",
        "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.",
      );
    }
    if (ids.has(id)) throw new SqsError("BatchEntryIdsNotDistinct", `Id ${id} repeated.`);
    ids.add(id);
  }
  return entries as T[];
}

export function intParam(
  input: Record<string, unknown>,
  name: string,
  min: number,
  max: number,
): number | undefined {
  const value = input[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    throw invalid(
      `Value ${String(value)} for parameter ${name} is invalid. Reason: Must be between ${min} and ${max}.`,
    );
  }
  return value;
}

export function stringList(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === "string") : [];
}

export function checkQueueName(name: string, fifo: boolean): void {
  const nameValid = fifo
    ? name.endsWith(".fifo") && QUEUE_NAME.test(name.slice(0, -5))
    : QUEUE_NAME.test(name);
  if (!nameValid || name.length > 80) {
    throw invalid(
      fifo
        ? "The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, must end with .fifo suffix and be 1 to 80 in length."
        : "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length",
    );
  }
}

/** A receipt handle this fake could have issued (sqsService.ts numbers them `AQEB-<n>-<uuid>`). */
export function checkReceiptHandle(receipt: string): void {
  if (!RECEIPT.test(receipt)) {
    throw new SqsError(
      "ReceiptHandleIsInvalid",
      `The input receipt handle "${receipt}" is not a valid receipt handle.`,
    );
  }
}

/** Queue attributes CreateQueue/SetQueueAttributes accept, with their value checks. */
const QUEUE_ATTRIBUTES: Record<string, (value: string) => boolean> = {
  DelaySeconds: range(0, 900),
  MaximumMessageSize: range(1024, 1_048_576),
  MessageRetentionPeriod: range(60, 1_209_600),
  ReceiveMessageWaitTimeSeconds: range(0, 20),
  VisibilityTimeout: range(0, 43_200),
  KmsDataKeyReusePeriodSeconds: range(60, 86_400),
  SqsManagedSseEnabled: oneOf("true", "false"),
  FifoQueue: oneOf("true", "false"),
  ContentBasedDeduplication: oneOf("true", "false"),
  DeduplicationScope: oneOf("queue", "messageGroup"),
  FifoThroughputLimit: oneOf("perQueue", "perMessageGroupId"),
  Policy: () => true,
  RedrivePolicy: () => true,
  RedriveAllowPolicy: () => true,
  KmsMasterKeyId: () => true,
};
const FIFO_ONLY_ATTRIBUTES = new Set([
  "ContentBasedDeduplication",
  "DeduplicationScope",
  "FifoThroughputLimit",
]);

/** Whether GetQueueAttributes knows the name (settable attributes; the computed ones are answered before). */
export function isQueueAttributeName(name: string): boolean {
  return name in QUEUE_ATTRIBUTES;
}

function range(min: number, max: number): (value: string) => boolean {
  return (value) => /^\d+$/.test(value) && Number(value) >= min && Number(value) <= max;
}

function oneOf(...allowed: string[]): (value: string) => boolean {
  return (value) => allowed.includes(value);
}

export function validateQueueAttributes(attributes: QueueAttributes, fifo: boolean): void {
  for (const [name, value] of Object.entries(attributes)) {
    const valid = QUEUE_ATTRIBUTES[name];
    if (valid === undefined || (!fifo && FIFO_ONLY_ATTRIBUTES.has(name))) {
      throw new SqsError("InvalidAttributeName", `Unknown Attribute ${name}.`);
    }
    if (typeof value !== "string" || !valid(value)) {
      throw new SqsError("InvalidAttributeValue", `Invalid value for the parameter ${name}.`);
    }
  }
}

export function attributeMap(value: unknown): QueueAttributes {
  if (value === undefined || value === null) return {};
  if (typeof value !== "object" || Array.isArray(value)) throw invalid("Attributes must be a map.");
  return value as QueueAttributes;
}
