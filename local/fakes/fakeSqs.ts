/**
 * A fast in-process SQS endpoint for throughput, fault and chaos tests. It speaks the protocol the AWS SDK v3
 * uses for SQS (AWS JSON 1.0 with `awsQueryCompatible` errors), so an unmodified `SQSClient` pointed at `url`
 * works against it, and it can be made to fail in the ways real SQS fails (throttling, 5xx, one batch entry
 * rejected, a response lost after the send was accepted, the endpoint unreachable).
 *
 * Not modelled: retention, dead-letter redrive, purge rate limits, ReceiveRequestAttemptId, permissions, tags.
 * Conformance questions belong to the moto/LocalStack tests; this one is for speed and fault injection.
 */
import { createHash, randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { EventsError, FakeEventBridge } from "./fakeEventBridge.ts";

const ACCOUNT = "000000000000";
const REGION = "us-east-1";
const MAX_BATCH_ENTRIES = 10;
const MAX_BATCH_BYTES = 1_048_576;
const MAX_MESSAGE_ATTRIBUTES = 10;
/** Real SQS still defaults MaximumMessageSize to 262,144; the relay always sets 1 MiB, so the fake defaults to it. */
const DEFAULT_MAX_MESSAGE_SIZE = 1_048_576;
const DEFAULT_DEDUP_WINDOW_MS = 5 * 60_000;
const MAX_REQUEST_BYTES = 16 * 1024 * 1024;

// ---------------------------------------------------------------------------------------------------------------
// Public API

export type QueueAttributes = Record<string, string>;

/** What the request-level fault predicates see. `n` is the request's 1-based number since the server started. */
export interface RequestInfo {
  action: string;
  queueName: string | undefined;
  input: Record<string, unknown>;
  n: number;
}

/** A SendMessage input or a SendMessageBatch entry, as received (JSON; BinaryValue is base64). */
export interface SendEntry {
  Id?: string;
  MessageBody?: string;
  DelaySeconds?: number;
  MessageGroupId?: string;
  MessageDeduplicationId?: string;
  MessageAttributes?: Record<string, { DataType?: string; StringValue?: string; BinaryValue?: string }>;
  MessageSystemAttributes?: Record<string, { DataType?: string; StringValue?: string }>;
}

/** An error to answer with. `code` is an SQS error shape name (e.g. `QueueDoesNotExist`) or any query code. */
export interface ErrorSpec {
  code: string;
  /** Defaults to the SDK model's status for modelled errors, else 500 for `Internal*`/`ServiceUnavailable`, else 400. */
  status?: number;
  message?: string;
}

export interface EntryFailure {
  code: string;
  senderFault: boolean;
  message?: string;
}

type RequestPredicate = (action: string, request: RequestInfo) => boolean;

export interface Faults {
  /** Added before every request is handled. */
  latencyMs: number | ((action: string, request: RequestInfo) => number);
  /** Whole request fails before it is handled: `true` = 500 InternalError, or return an ErrorSpec. */
  failRequests: boolean | ((action: string, request: RequestInfo) => boolean | ErrorSpec);
  /** Probability 0..1, or a predicate: the request is answered with a throttling error. */
  throttle: number | RequestPredicate;
  /**
   * `ThrottlingException` (400; what SQS's common errors document) or `RequestThrottled` (the modelled SQS
   * error, 403 per the SDK model). The SDK classifies both as throttling by name and retries them.
   */
  throttleCode: "ThrottlingException" | "RequestThrottled";
  /** After validation, before the message is accepted: that entry fails (a SendMessage request fails whole). */
  failEntry: false | ((entry: SendEntry, queueName: string) => false | EntryFailure);
  /** The request is fully handled (sends accepted and recorded) but the connection is destroyed, no response. */
  dropResponse: boolean | RequestPredicate;
}

/** One accepted send, duplicates included. `attributes` maps name -> StringValue (BinaryValue in base64). */
export interface Delivery {
  queueName: string;
  messageId: string;
  groupId: string | undefined;
  dedupId: string | undefined;
  body: string;
  attributes: Record<string, string>;
  sequenceNumber: string | undefined;
  /** Accepted but not enqueued: its deduplication id was seen within the window. */
  duplicate: boolean;
  at: number;
}

export interface FakeSqsStats {
  requests: number;
  throttled: number;
  /** Requests answered with any error other than throttling (injected or validation), or refused while down. */
  failedRequests: number;
  /** Batch entries reported in `Failed` (validation or injected). */
  failedEntries: number;
  /** Sends answered with success, duplicates included (= deliveries recorded). */
  acceptedMessages: number;
  duplicates: number;
  droppedResponses: number;
  receivedMessages: number;
  deletedMessages: number;
}

export interface QueueDepth {
  visible: number;
  inFlight: number;
  delayed: number;
  /** ReceiveMessage calls currently long-polling this queue. */
  longPolls: number;
}

export interface FakeSqs {
  readonly url: string;
  /** Live fault settings; assign fields at any time or use setFaults/resetFaults. */
  readonly faults: Faults;
  readonly stats: FakeSqsStats;
  /** The EventBridge side of this endpoint (`AWSEvents.*` requests): buses, rules to queues, entry faults. */
  readonly events: FakeEventBridge;
  /** FIFO deduplication window; may be changed at runtime. */
  dedupWindowMs: number;
  setFaults(partial: Partial<Faults>): void;
  resetFaults(): void;
  /** Accepted sends in arrival order, optionally of one queue (a copy). */
  deliveries(queueName?: string): Delivery[];
  clearDeliveries(): void;
  resetStats(): void;
  queueUrl(queueName: string): string;
  queueDepth(queueName: string): QueueDepth | undefined;
  /** Until up(): `reset` destroys every connection on arrival (a network error to the SDK), `unavailable` answers 503. */
  down(mode?: "reset" | "unavailable"): void;
  up(): void;
  close(): Promise<void>;
}

export interface FakeSqsOptions {
  port?: number;
  dedupWindowMs?: number;
}

export async function startFakeSqs(options: FakeSqsOptions = {}): Promise<FakeSqs> {
  const fake = new FakeSqsServer(options.dedupWindowMs ?? DEFAULT_DEDUP_WINDOW_MS);
  await fake.listen(options.port ?? 0);
  return fake;
}

function defaultFaults(): Faults {
  return {
    latencyMs: 0,
    failRequests: false,
    throttle: 0,
    throttleCode: "ThrottlingException",
    failEntry: false,
    dropResponse: false,
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Errors, as the SDK parses them

/**
 * Modelled errors: shape name -> [HTTP status, awsQueryError code], as in the SDK's error schemas. Because SQS is
 * `awsQueryCompatible`, the SDK takes the error code from the `x-amzn-query-error` header first and maps a query
 * code back to its shape (so `AWS.SimpleQueueService.NonExistentQueue` becomes `QueueDoesNotExist`). Codes not
 * listed here are unmodelled: the SDK throws an SQSServiceException whose `name` is the code.
 */
const MODELLED_ERRORS: Record<string, [number, string]> = {
  BatchEntryIdsNotDistinct: [400, "AWS.SimpleQueueService.BatchEntryIdsNotDistinct"],
  BatchRequestTooLong: [400, "AWS.SimpleQueueService.BatchRequestTooLong"],
  EmptyBatchRequest: [400, "AWS.SimpleQueueService.EmptyBatchRequest"],
  InvalidBatchEntryId: [400, "AWS.SimpleQueueService.InvalidBatchEntryId"],
  MessageNotInflight: [400, "AWS.SimpleQueueService.MessageNotInflight"],
  OverLimit: [403, "OverLimit"],
  PurgeQueueInProgress: [403, "AWS.SimpleQueueService.PurgeQueueInProgress"],
  QueueDeletedRecently: [400, "AWS.SimpleQueueService.QueueDeletedRecently"],
  QueueDoesNotExist: [400, "AWS.SimpleQueueService.NonExistentQueue"],
  QueueNameExists: [400, "QueueAlreadyExists"],
  ReceiptHandleIsInvalid: [404, "ReceiptHandleIsInvalid"],
  RequestThrottled: [403, "RequestThrottled"],
  TooManyEntriesInBatchRequest: [400, "AWS.SimpleQueueService.TooManyEntriesInBatchRequest"],
  UnsupportedOperation: [400, "AWS.SimpleQueueService.UnsupportedOperation"],
};

class SqsError extends Error {
  readonly code: string;
  readonly status: number;
  constructor(code: string, message: string, status?: number) {
    super(message);
    this.code = code;
    this.status = status ?? MODELLED_ERRORS[code]?.[0] ?? defaultStatus(code);
  }
}

function defaultStatus(code: string): number {
  if (code === "ServiceUnavailable") return 503;
  return code.startsWith("Internal") ? 500 : 400;
}

const invalid = (message: string) => new SqsError("InvalidParameterValue", message);
const missing = (name: string) =>
  new SqsError("MissingParameter", `The request must contain the parameter ${name}.`);
const noQueue = () => new SqsError("QueueDoesNotExist", "The specified queue does not exist.");
const THROTTLE_CODES = new Set(["ThrottlingException", "RequestThrottled"]);

// ---------------------------------------------------------------------------------------------------------------
// Messages and queues

interface Attribute {
  name: string;
  dataType: string;
  stringValue?: string;
  /** BinaryValue, decoded and (for answers and the delivery log) re-encoded. */
  binary?: Buffer;
  base64?: string;
}

interface StoredMessage {
  readonly id: string;
  readonly body: string;
  readonly md5OfBody: string;
  /** Sorted by name. */
  readonly attributes: Attribute[];
  readonly md5OfAttributes: string | undefined;
  readonly traceHeader: string | undefined;
  readonly groupId: string | undefined;
  readonly dedupId: string | undefined;
  readonly sequenceNumber: string | undefined;
  /** Arrival order within the fake; orders a group's messages when one comes back from flight. */
  readonly order: number;
  readonly sentAt: number;
  receiveCount: number;
  firstReceiveAt: number;
  receipt: string | undefined;
  timer: NodeJS.Timeout | undefined;
}

/** Array-backed queue: O(1) amortised push/shift; a message back from flight is re-inserted near the head. */
class Deque {
  private items: (StoredMessage | undefined)[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  push(message: StoredMessage): void {
    this.items.push(message);
  }

  shift(): StoredMessage | undefined {
    if (this.head >= this.items.length) return undefined;
    const message = this.items[this.head];
    this.items[this.head++] = undefined;
    if (this.head === this.items.length) {
      this.items = [];
      this.head = 0;
    } else if (this.head > 4096 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return message;
  }

  /** Messages come back from flight ahead of all never-received ones, so this walks at most a few slots. */
  insertOrdered(message: StoredMessage): void {
    let i = this.head;
    while (i < this.items.length && (this.items[i]?.order ?? 0) < message.order) i++;
    if (this.head > 0) {
      for (let j = this.head; j < i; j++) this.items[j - 1] = this.items[j];
      this.head--;
      this.items[i - 1] = message;
    } else {
      this.items.splice(i, 0, message);
    }
  }

  clear(): void {
    this.items = [];
    this.head = 0;
  }
}

/** A FIFO message group (a standard queue keeps all its messages in one group that is never locked). */
interface Group {
  readonly key: string;
  readonly visible: Deque;
  inFlight: number;
}

type Waiter = () => void;

class Queue {
  readonly fifo: boolean;
  readonly arn: string;
  readonly createdAt = Math.floor(Date.now() / 1000);
  attributes: QueueAttributes;
  maxMessageSize = DEFAULT_MAX_MESSAGE_SIZE;
  visibilityTimeout = 30;
  waitTimeSeconds = 0;
  delaySeconds = 0;
  contentBasedDedup = false;
  dedupPerGroup = false;

  private readonly groups = new Map<string, Group>();
  /** FIFO: groups with visible messages and none in flight, in the order they became ready. */
  private readonly ready = new Set<Group>();
  private readonly inFlight = new Map<string, StoredMessage>();
  private readonly delayed = new Set<NodeJS.Timeout>();
  /** Deduplication key -> first accepted message. Insertion order is arrival order, so expiry pops the front. */
  readonly dedup = new Map<string, { at: number; messageId: string; sequenceNumber: string | undefined }>();
  readonly waiters = new Set<Waiter>();
  private visible = 0;
  readonly name: string;
  readonly url: string;

  constructor(name: string, url: string, attributes: QueueAttributes) {
    this.name = name;
    this.url = url;
    this.fifo = attributes.FifoQueue === "true";
    this.arn = `arn:aws:sqs:${REGION}:${ACCOUNT}:${name}`;
    this.attributes = attributes;
    this.applyAttributes();
  }

  applyAttributes(): void {
    const a = this.attributes;
    this.maxMessageSize = Number(a.MaximumMessageSize);
    this.visibilityTimeout = Number(a.VisibilityTimeout);
    this.waitTimeSeconds = Number(a.ReceiveMessageWaitTimeSeconds);
    this.delaySeconds = Number(a.DelaySeconds);
    this.contentBasedDedup = a.ContentBasedDeduplication === "true";
    this.dedupPerGroup = a.DeduplicationScope === "messageGroup";
  }

  depth(): QueueDepth {
    return {
      visible: this.visible,
      inFlight: this.inFlight.size,
      delayed: this.delayed.size,
      longPolls: this.waiters.size,
    };
  }

  enqueue(message: StoredMessage, delaySeconds: number): void {
    if (delaySeconds > 0) {
      const timer = setTimeout(() => {
        this.delayed.delete(timer);
        this.enqueue(message, 0);
        this.wake();
      }, delaySeconds * 1000);
      timer.unref();
      this.delayed.add(timer);
      return;
    }
    const group = this.group(message);
    group.visible.push(message);
    this.visible++;
    if (this.fifo && group.inFlight === 0) this.ready.add(group);
  }

  /**
   * Takes up to `max` visible messages and puts them in flight. FIFO: only from groups with nothing in flight,
   * as many as possible from one group before the next (as SQS does); taking locks the group.
   */
  receive(max: number, visibilitySeconds: number, nextReceipt: () => string): StoredMessage[] {
    const taken: StoredMessage[] = [];
    const take = (group: Group) => {
      while (taken.length < max) {
        const message = group.visible.shift();
        if (message === undefined) break;
        taken.push(message);
        group.inFlight++;
      }
    };
    if (this.fifo) {
      for (const group of this.ready) {
        if (taken.length >= max) break;
        take(group);
        this.ready.delete(group);
      }
    } else {
      const group = this.groups.get("");
      if (group) take(group);
    }
    this.visible -= taken.length;
    const now = Date.now();
    for (const message of taken) {
      message.receipt = nextReceipt();
      message.receiveCount++;
      if (message.firstReceiveAt === 0) message.firstReceiveAt = now;
      this.inFlight.set(message.receipt, message);
      this.startVisibilityTimer(message, visibilitySeconds);
    }
    return taken;
  }

  /** Returns false when the handle is not (or no longer) that of a message in flight. */
  delete(receipt: string): boolean {
    const message = this.inFlight.get(receipt);
    if (message === undefined) return false;
    this.leaveFlight(message);
    const group = this.group(message);
    if (group.inFlight === 0) {
      if (group.visible.length === 0) this.groups.delete(group.key);
      else if (this.fifo) {
        this.ready.add(group);
        this.wake();
      }
    }
    return true;
  }

  changeVisibility(receipt: string, seconds: number): boolean {
    const message = this.inFlight.get(receipt);
    if (message === undefined) return false;
    if (seconds === 0) this.returnToQueue(message);
    else this.startVisibilityTimer(message, seconds);
    return true;
  }

  purge(): void {
    for (const message of this.inFlight.values()) clearTimeout(message.timer);
    for (const timer of this.delayed) clearTimeout(timer);
    for (const group of this.groups.values()) group.visible.clear();
    this.inFlight.clear();
    this.delayed.clear();
    this.groups.clear();
    this.ready.clear();
    this.visible = 0;
  }

  hasVisible(): boolean {
    return this.fifo ? this.ready.size > 0 : this.visible > 0;
  }

  /** Hands newly visible messages to long-polling receivers, oldest first. */
  wake(): void {
    for (const waiter of this.waiters) {
      if (!this.hasVisible()) return;
      waiter();
    }
  }

  /** Answers every long poll now (with whatever is visible, usually nothing): queue deleted or server closing. */
  flushWaiters(): void {
    for (const waiter of this.waiters) waiter();
  }

  private group(message: StoredMessage): Group {
    const key = this.fifo ? (message.groupId ?? "") : "";
    let group = this.groups.get(key);
    if (group === undefined) {
      group = { key, visible: new Deque(), inFlight: 0 };
      this.groups.set(key, group);
    }
    return group;
  }

  private startVisibilityTimer(message: StoredMessage, seconds: number): void {
    clearTimeout(message.timer);
    message.timer = setTimeout(() => this.returnToQueue(message), seconds * 1000);
    message.timer.unref();
  }

  private leaveFlight(message: StoredMessage): void {
    clearTimeout(message.timer);
    message.timer = undefined;
    if (message.receipt !== undefined) this.inFlight.delete(message.receipt);
    message.receipt = undefined;
    this.group(message).inFlight--;
  }

  private returnToQueue(message: StoredMessage): void {
    this.leaveFlight(message);
    const group = this.group(message);
    group.visible.insertOrdered(message);
    this.visible++;
    if (this.fifo && group.inFlight === 0) this.ready.add(group);
    this.wake();
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Validation and checksums

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

const md5Hex = (data: string | Buffer) => createHash("md5").update(data).digest("hex");

/**
 * MD5OfMessageAttributes exactly as SQS computes it (and as the Java/Go/Python SDKs verify it; the JS SDK v3's
 * middleware-sdk-sqs only verifies body MD5s): attributes sorted by name; for each, the name and the data type,
 * each as a 4-byte big-endian length + UTF-8 bytes, then one transport byte (1 = String/Number, 2 = Binary),
 * then the value as 4-byte length + bytes (UTF-8 for strings, the decoded bytes for binary).
 */
function md5OfAttributes(attributes: readonly Attribute[]): string | undefined {
  if (attributes.length === 0) return undefined;
  const hash = createHash("md5");
  const lengthPrefixed = (bytes: Buffer) => {
    const length = Buffer.allocUnsafe(4);
    length.writeUInt32BE(bytes.length);
    hash.update(length).update(bytes);
  };
  for (const attribute of attributes) {
    lengthPrefixed(Buffer.from(attribute.name, "utf8"));
    lengthPrefixed(Buffer.from(attribute.dataType, "utf8"));
    if (attribute.binary !== undefined) {
      hash.update(Buffer.of(2));
      lengthPrefixed(attribute.binary);
    } else {
      hash.update(Buffer.of(1));
      lengthPrefixed(Buffer.from(attribute.stringValue ?? "", "utf8"));
    }
  }
  return hash.digest("hex");
}

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

interface PreparedSend {
  body: string;
  attributes: Attribute[];
  traceHeader: string | undefined;
  md5OfSystemAttributes: string | undefined;
  groupId: string | undefined;
  dedupId: string | undefined;
  delaySeconds: number;
}

function prepareSend(queue: Queue, entry: SendEntry): PreparedSend {
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
function batchEntries<T extends { Id?: unknown }>(input: Record<string, unknown>): T[] {
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

function intParam(
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

function stringList(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === "string") : [];
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

function range(min: number, max: number): (value: string) => boolean {
  return (value) => /^\d+$/.test(value) && Number(value) >= min && Number(value) <= max;
}

function oneOf(...allowed: string[]): (value: string) => boolean {
  return (value) => allowed.includes(value);
}

function validateQueueAttributes(attributes: QueueAttributes, fifo: boolean): void {
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

function attributeMap(value: unknown): QueueAttributes {
  if (value === undefined || value === null) return {};
  if (typeof value !== "object" || Array.isArray(value)) throw invalid("Attributes must be a map.");
  return value as QueueAttributes;
}

// ---------------------------------------------------------------------------------------------------------------
// The server

class FakeSqsServer implements FakeSqs {
  url = "";
  readonly faults: Faults = defaultFaults();
  readonly stats: FakeSqsStats = emptyStats();
  private readonly queues = new Map<string, Queue>();
  private log: Delivery[] = [];
  private downMode: "reset" | "unavailable" | undefined;
  private counter = 0;
  private readonly server = createServer((req, res) => void this.handle(req, res));
  readonly events = new FakeEventBridge((queueName, body, options) => {
    this.sendMessage({
      QueueUrl: this.queueUrl(queueName),
      MessageBody: body,
      MessageGroupId: options.groupId,
      MessageDeduplicationId: options.groupId === undefined ? undefined : options.dedupId,
      ...(options.traceHeader === undefined
        ? {}
        : {
            MessageSystemAttributes: {
              AWSTraceHeader: { DataType: "String", StringValue: options.traceHeader },
            },
          }),
    });
  });

  dedupWindowMs: number;

  constructor(dedupWindowMs: number) {
    this.dedupWindowMs = dedupWindowMs;
    // The SDK keeps connections alive; Node's 5 s default would close idle sockets under the client's feet.
    this.server.keepAliveTimeout = 65_000;
  }

  listen(port: number): Promise<void> {
    return new Promise((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(port, "127.0.0.1", () => {
        this.server.off("error", reject);
        this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
        resolve();
      });
    });
  }

  setFaults(partial: Partial<Faults>): void {
    Object.assign(this.faults, partial);
  }

  resetFaults(): void {
    Object.assign(this.faults, defaultFaults());
    this.events.failEntry = false;
  }

  deliveries(queueName?: string): Delivery[] {
    return queueName === undefined ? [...this.log] : this.log.filter((d) => d.queueName === queueName);
  }

  clearDeliveries(): void {
    this.log = [];
  }

  resetStats(): void {
    Object.assign(this.stats, emptyStats());
  }

  queueUrl(queueName: string): string {
    return `${this.url}/${ACCOUNT}/${queueName}`;
  }

  queueDepth(queueName: string): QueueDepth | undefined {
    return this.queues.get(queueName)?.depth();
  }

  down(mode: "reset" | "unavailable" = "reset"): void {
    this.downMode = mode;
  }

  up(): void {
    this.downMode = undefined;
  }

  async close(): Promise<void> {
    for (const queue of this.queues.values()) {
      queue.purge();
      queue.flushWaiters();
    }
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    await closed;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const n = ++this.stats.requests;
    if (this.refused(req)) return;
    let input: Record<string, unknown>;
    let raw: Buffer;
    try {
      raw = await readBody(req);
    } catch {
      return; // the client went away mid-request
    }
    const target = req.headers["x-amz-target"];
    const service = typeof target === "string" ? /^(AmazonSQS|AWSEvents)\.(.*)$/.exec(target) : null;
    const action = service?.[2] ?? "";
    try {
      const parsed: unknown = raw.length === 0 ? {} : JSON.parse(raw.toString("utf8"));
      if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
        throw new Error("not an object");
      input = parsed as Record<string, unknown>;
    } catch {
      return this.fail(res, new SqsError("SerializationException", "The request body is not a JSON object."));
    }
    const request: RequestInfo = { action, queueName: queueNameOf(input), input, n };
    const { faults } = this;
    try {
      const latency =
        typeof faults.latencyMs === "function" ? faults.latencyMs(action, request) : faults.latencyMs;
      if (latency > 0) await sleep(latency);
      if (this.refused(req)) return; // went down while the request waited
      if (this.downMode === "unavailable") {
        throw new SqsError("ServiceUnavailable", "Service is unavailable. Please try again.");
      }
      const throttle = faults.throttle;
      if (
        typeof throttle === "function" ? throttle(action, request) : throttle > 0 && Math.random() < throttle
      ) {
        throw new SqsError(faults.throttleCode, "Rate exceeded");
      }
      const failure =
        typeof faults.failRequests === "function"
          ? faults.failRequests(action, request)
          : faults.failRequests;
      if (failure === true)
        throw new SqsError("InternalError", "We encountered an internal error. Please try again.");
      if (failure)
        throw new SqsError(failure.code, failure.message ?? `Injected ${failure.code}`, failure.status);

      const output =
        service?.[1] === "AWSEvents"
          ? this.events.handle(action, input)
          : await this.dispatch(action, input, res);
      const drop = faults.dropResponse;
      if (typeof drop === "function" ? drop(action, request) : drop) {
        this.stats.droppedResponses++;
        req.socket.destroy();
        return;
      }
      this.respond(res, 200, output);
    } catch (error) {
      this.fail(
        res,
        error instanceof SqsError
          ? error
          : error instanceof EventsError
            ? new SqsError(error.code, error.message, error.status)
            : new SqsError("InternalError", `Fake SQS bug: ${String(error)}`),
      );
    }
  }

  /** down("reset"): the connection is destroyed unanswered, which the SDK sees as a network error. */
  private refused(req: IncomingMessage): boolean {
    if (this.downMode !== "reset") return false;
    this.stats.failedRequests++;
    req.socket.destroy();
    return true;
  }

  private fail(res: ServerResponse, error: SqsError): void {
    if (THROTTLE_CODES.has(error.code)) this.stats.throttled++;
    else this.stats.failedRequests++;
    const queryCode = MODELLED_ERRORS[error.code]?.[1] ?? error.code;
    const fault = error.status >= 500 ? "Receiver" : "Sender";
    this.respond(
      res,
      error.status,
      { __type: `com.amazonaws.sqs#${error.code}`, message: error.message },
      {
        "x-amzn-query-error": `${queryCode};${fault}`,
      },
    );
  }

  private respond(
    res: ServerResponse,
    status: number,
    body: unknown,
    headers: Record<string, string> = {},
  ): void {
    if (res.destroyed || res.headersSent) return;
    const json = JSON.stringify(body);
    res.writeHead(status, {
      "content-type": "application/x-amz-json-1.0",
      "content-length": Buffer.byteLength(json),
      "x-amzn-requestid": randomUUID(),
      ...headers,
    });
    res.end(json);
  }

  private dispatch(action: string, input: Record<string, unknown>, res: ServerResponse): unknown {
    switch (action) {
      case "CreateQueue":
        return this.createQueue(input);
      case "GetQueueUrl": {
        const name = input.QueueName;
        if (typeof name !== "string" || name === "") throw missing("QueueName");
        const queue = this.queues.get(name);
        if (queue === undefined) throw noQueue();
        return { QueueUrl: queue.url };
      }
      case "ListQueues": {
        const prefix = typeof input.QueueNamePrefix === "string" ? input.QueueNamePrefix : "";
        const urls = [...this.queues.values()].filter((q) => q.name.startsWith(prefix)).map((q) => q.url);
        return urls.length > 0 ? { QueueUrls: urls } : {};
      }
      case "GetQueueAttributes":
        return this.getQueueAttributes(input);
      case "SetQueueAttributes": {
        const queue = this.queue(input);
        const attributes = attributeMap(input.Attributes);
        if (attributes.FifoQueue !== undefined)
          throw new SqsError("InvalidAttributeName", "Unknown Attribute FifoQueue.");
        validateQueueAttributes(attributes, queue.fifo);
        queue.attributes = { ...queue.attributes, ...attributes };
        queue.applyAttributes();
        return {};
      }
      case "SendMessage":
        return this.sendMessage(input);
      case "SendMessageBatch":
        return this.sendMessageBatch(input);
      case "ReceiveMessage":
        return this.receiveMessage(input, res);
      case "DeleteMessage": {
        const queue = this.queue(input);
        this.deleteOne(queue, input.ReceiptHandle);
        return {};
      }
      case "DeleteMessageBatch":
        return this.deleteMessageBatch(input);
      case "ChangeMessageVisibility": {
        const queue = this.queue(input);
        const receipt = input.ReceiptHandle;
        if (typeof receipt !== "string" || receipt === "") throw missing("ReceiptHandle");
        const seconds = intParam(input, "VisibilityTimeout", 0, 43_200);
        if (seconds === undefined) throw missing("VisibilityTimeout");
        if (!RECEIPT.test(receipt))
          throw new SqsError(
            "ReceiptHandleIsInvalid",
            `The input receipt handle "${receipt}" is not a valid receipt handle.`,
          );
        if (!queue.changeVisibility(receipt, seconds)) {
          throw new SqsError("MessageNotInflight", "The message referred to isn't in flight.");
        }
        return {};
      }
      case "PurgeQueue":
        this.queue(input).purge();
        return {};
      case "DeleteQueue": {
        const queue = this.queue(input);
        this.queues.delete(queue.name);
        queue.purge();
        queue.flushWaiters();
        return {};
      }
      default:
        throw new SqsError(
          "InvalidAction",
          `The action ${action || "(none)"} is not valid for this endpoint.`,
        );
    }
  }

  private queue(input: Record<string, unknown>): Queue {
    const url = input.QueueUrl;
    if (typeof url !== "string" || url === "") throw missing("QueueUrl");
    const queue = this.queues.get(url.slice(url.lastIndexOf("/") + 1));
    if (queue === undefined) throw noQueue();
    return queue;
  }

  private createQueue(input: Record<string, unknown>): unknown {
    const name = input.QueueName;
    if (typeof name !== "string" || name === "") throw missing("QueueName");
    const requested = attributeMap(input.Attributes);
    const fifo = requested.FifoQueue === "true";
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
    if (requested.FifoQueue === "false") delete requested.FifoQueue;
    validateQueueAttributes(requested, fifo);
    const existing = this.queues.get(name);
    if (existing !== undefined) {
      // Same name and same attributes is idempotent; different attributes is an error, as in SQS.
      for (const [key, value] of Object.entries(requested)) {
        if (existing.attributes[key] !== value) {
          throw new SqsError(
            "QueueNameExists",
            "A queue already exists with the same name and a different value for attribute(s).",
          );
        }
      }
      return { QueueUrl: existing.url };
    }
    const attributes: QueueAttributes = {
      DelaySeconds: "0",
      MaximumMessageSize: String(DEFAULT_MAX_MESSAGE_SIZE),
      MessageRetentionPeriod: "345600",
      ReceiveMessageWaitTimeSeconds: "0",
      VisibilityTimeout: "30",
      SqsManagedSseEnabled: "true",
      ...(fifo
        ? { ContentBasedDeduplication: "false", DeduplicationScope: "queue", FifoThroughputLimit: "perQueue" }
        : {}),
      ...requested,
    };
    const queue = new Queue(name, this.queueUrl(name), attributes);
    this.queues.set(name, queue);
    return { QueueUrl: queue.url };
  }

  private getQueueAttributes(input: Record<string, unknown>): unknown {
    const queue = this.queue(input);
    const depth = queue.depth();
    const all: QueueAttributes = {
      QueueArn: queue.arn,
      ApproximateNumberOfMessages: String(depth.visible),
      ApproximateNumberOfMessagesNotVisible: String(depth.inFlight),
      ApproximateNumberOfMessagesDelayed: String(depth.delayed),
      CreatedTimestamp: String(queue.createdAt),
      LastModifiedTimestamp: String(queue.createdAt),
      ...queue.attributes,
    };
    const names = stringList(input.AttributeNames);
    if (names.includes("All")) return { Attributes: all };
    const selected: QueueAttributes = {};
    for (const name of names) {
      const value = all[name];
      if (value !== undefined) selected[name] = value;
      else if (!(name in QUEUE_ATTRIBUTES))
        throw new SqsError("InvalidAttributeName", `Unknown Attribute ${name}.`);
    }
    return names.length > 0 ? { Attributes: selected } : {};
  }

  private sendMessage(input: Record<string, unknown>): unknown {
    const queue = this.queue(input);
    const entry = input as SendEntry;
    const prepared = prepareSend(queue, entry);
    const injected = this.faults.failEntry ? this.faults.failEntry(entry, queue.name) : false;
    if (injected) {
      throw new SqsError(
        injected.code,
        injected.message ?? `Injected ${injected.code}`,
        injected.senderFault ? 400 : 500,
      );
    }
    const result = this.accept(queue, prepared);
    queue.wake();
    return result;
  }

  private sendMessageBatch(input: Record<string, unknown>): unknown {
    const queue = this.queue(input);
    const entries = batchEntries<SendEntry>(input);
    let total = 0;
    for (const entry of entries) total += rawEntryBytes(entry);
    if (total > MAX_BATCH_BYTES) {
      throw new SqsError(
        "BatchRequestTooLong",
        `Batch requests cannot be longer than ${MAX_BATCH_BYTES} bytes. You have sent ${total} bytes.`,
      );
    }
    const Successful: unknown[] = [];
    const Failed: unknown[] = [];
    for (const entry of entries) {
      let prepared: PreparedSend;
      try {
        prepared = prepareSend(queue, entry);
      } catch (error) {
        if (!(error instanceof SqsError)) throw error;
        Failed.push({ Id: entry.Id, SenderFault: true, Code: error.code, Message: error.message });
        continue;
      }
      const injected = this.faults.failEntry ? this.faults.failEntry(entry, queue.name) : false;
      if (injected) {
        const message = injected.message ?? `Injected ${injected.code}`;
        Failed.push({
          Id: entry.Id,
          SenderFault: injected.senderFault,
          Code: injected.code,
          Message: message,
        });
        continue;
      }
      Successful.push({ Id: entry.Id, ...this.accept(queue, prepared) });
    }
    this.stats.failedEntries += Failed.length;
    queue.wake();
    return { Successful, Failed };
  }

  /** Records an accepted send and enqueues it unless its deduplication id was seen within the window. */
  private accept(queue: Queue, send: PreparedSend): Record<string, string> {
    const now = Date.now();
    const order = ++this.counter;
    let messageId: string;
    let sequenceNumber: string | undefined;
    let duplicate = false;
    if (queue.fifo && send.dedupId !== undefined) {
      for (const [key, seen] of queue.dedup) {
        if (now - seen.at < this.dedupWindowMs) break;
        queue.dedup.delete(key);
      }
      const key = queue.dedupPerGroup ? `${send.groupId}\u0000${send.dedupId}` : send.dedupId;
      const seen = queue.dedup.get(key);
      if (seen !== undefined) {
        // SQS answers a duplicate with success (and, here, the first message's id and sequence number).
        duplicate = true;
        messageId = seen.messageId;
        sequenceNumber = seen.sequenceNumber;
      } else {
        messageId = randomUUID();
        // 20 digits, increasing, like SQS's (which are large and non-consecutive).
        sequenceNumber = `1${String(order).padStart(19, "0")}`;
        queue.dedup.set(key, { at: now, messageId, sequenceNumber });
      }
    } else {
      messageId = randomUUID();
      if (queue.fifo) sequenceNumber = `1${String(order).padStart(19, "0")}`;
    }
    // The SDK checks MD5OfMessageBody against the body it sent, so a duplicate gets the MD5 of its own body.
    const md5OfBody = md5Hex(send.body);
    const attributesMd5 = md5OfAttributes(send.attributes);
    if (!duplicate) {
      queue.enqueue(
        {
          id: messageId,
          body: send.body,
          md5OfBody,
          attributes: send.attributes,
          md5OfAttributes: attributesMd5,
          traceHeader: send.traceHeader,
          groupId: send.groupId,
          dedupId: send.dedupId,
          sequenceNumber,
          order,
          sentAt: now,
          receiveCount: 0,
          firstReceiveAt: 0,
          receipt: undefined,
          timer: undefined,
        },
        send.delaySeconds,
      );
    }
    const attributes: Record<string, string> = {};
    for (const a of send.attributes) attributes[a.name] = a.stringValue ?? a.base64 ?? "";
    this.log.push({
      queueName: queue.name,
      messageId,
      groupId: send.groupId,
      dedupId: send.dedupId,
      body: send.body,
      attributes,
      sequenceNumber,
      duplicate,
      at: now,
    });
    this.stats.acceptedMessages++;
    if (duplicate) this.stats.duplicates++;
    const result: Record<string, string> = { MessageId: messageId, MD5OfMessageBody: md5OfBody };
    if (attributesMd5 !== undefined) result.MD5OfMessageAttributes = attributesMd5;
    if (send.md5OfSystemAttributes !== undefined)
      result.MD5OfMessageSystemAttributes = send.md5OfSystemAttributes;
    if (sequenceNumber !== undefined) result.SequenceNumber = sequenceNumber;
    return result;
  }

  private receiveMessage(input: Record<string, unknown>, res: ServerResponse): unknown {
    const queue = this.queue(input);
    const max = intParam(input, "MaxNumberOfMessages", 1, 10) ?? 1;
    const visibility = intParam(input, "VisibilityTimeout", 0, 43_200) ?? queue.visibilityTimeout;
    const wait = intParam(input, "WaitTimeSeconds", 0, 20) ?? queue.waitTimeSeconds;
    const systemNames = new Set([
      ...stringList(input.AttributeNames),
      ...stringList(input.MessageSystemAttributeNames),
    ]);
    const attributeNames = stringList(input.MessageAttributeNames);

    const receive = () => {
      const messages = queue.receive(max, visibility, () => `AQEB-${++this.counter}-${randomUUID()}`);
      this.stats.receivedMessages += messages.length;
      return messages.length === 0
        ? {}
        : { Messages: messages.map((m) => toWire(m, systemNames, attributeNames)) };
    };
    if (wait === 0 || queue.hasVisible()) return receive();
    // The client left (or close() ran) while the request waited out its latency: nobody to wait for.
    if (res.socket === null || res.socket.destroyed) return {};
    // Long poll: answer as soon as a message becomes visible, or empty when the wait ends or the client leaves.
    return new Promise((resolve) => {
      const finish = (output: unknown) => {
        queue.waiters.delete(waiter);
        clearTimeout(timer);
        res.off("close", onClose);
        resolve(output);
      };
      const waiter = () => finish(receive());
      const onClose = () => finish({});
      const timer = setTimeout(() => finish({}), wait * 1000);
      timer.unref();
      res.on("close", onClose);
      queue.waiters.add(waiter);
    });
  }

  private deleteOne(queue: Queue, receipt: unknown): void {
    if (typeof receipt !== "string" || receipt === "") throw missing("ReceiptHandle");
    if (!RECEIPT.test(receipt)) {
      throw new SqsError(
        "ReceiptHandleIsInvalid",
        `The input receipt handle "${receipt}" is not a valid receipt handle.`,
      );
    }
    // A stale handle (message already deleted or visible again) succeeds without deleting, as in SQS.
    if (queue.delete(receipt)) this.stats.deletedMessages++;
  }

  private deleteMessageBatch(input: Record<string, unknown>): unknown {
    const queue = this.queue(input);
    const Successful: unknown[] = [];
    const Failed: unknown[] = [];
    for (const entry of batchEntries<{ Id?: string; ReceiptHandle?: unknown }>(input)) {
      try {
        this.deleteOne(queue, entry.ReceiptHandle);
        Successful.push({ Id: entry.Id });
      } catch (error) {
        if (!(error instanceof SqsError)) throw error;
        Failed.push({ Id: entry.Id, SenderFault: true, Code: error.code, Message: error.message });
      }
    }
    this.stats.failedEntries += Failed.length;
    return { Successful, Failed };
  }
}

function emptyStats(): FakeSqsStats {
  return {
    requests: 0,
    throttled: 0,
    failedRequests: 0,
    failedEntries: 0,
    acceptedMessages: 0,
    duplicates: 0,
    droppedResponses: 0,
    receivedMessages: 0,
    deletedMessages: 0,
  };
}

function queueNameOf(input: Record<string, unknown>): string | undefined {
  const url = input.QueueUrl;
  if (typeof url === "string") return url.slice(url.lastIndexOf("/") + 1);
  return typeof input.QueueName === "string" ? input.QueueName : undefined;
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_REQUEST_BYTES) req.destroy(new Error("request too large"));
      else chunks.push(chunk);
    });
    req.on("end", () => resolve(chunks.length === 1 && chunks[0] ? chunks[0] : Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

/** A received message on the wire: system attributes and message attributes as requested. */
function toWire(
  message: StoredMessage,
  systemNames: Set<string>,
  attributeNames: string[],
): Record<string, unknown> {
  const wire: Record<string, unknown> = {
    MessageId: message.id,
    ReceiptHandle: message.receipt,
    MD5OfBody: message.md5OfBody,
    Body: message.body,
  };
  if (systemNames.size > 0) {
    const all = systemNames.has("All");
    const system: Record<string, string> = {};
    const put = (name: string, value: string | undefined) => {
      if (value !== undefined && (all || systemNames.has(name))) system[name] = value;
    };
    put("SenderId", ACCOUNT);
    put("SentTimestamp", String(message.sentAt));
    put("ApproximateReceiveCount", String(message.receiveCount));
    put("ApproximateFirstReceiveTimestamp", String(message.firstReceiveAt));
    put("MessageGroupId", message.groupId);
    put("MessageDeduplicationId", message.dedupId);
    put("SequenceNumber", message.sequenceNumber);
    put("AWSTraceHeader", message.traceHeader);
    if (Object.keys(system).length > 0) wire.Attributes = system;
  }
  if (attributeNames.length > 0 && message.attributes.length > 0) {
    const wanted = (name: string) =>
      attributeNames.some(
        (pattern) =>
          pattern === "All" ||
          pattern === ".*" ||
          pattern === name ||
          (pattern.endsWith(".*") && name.startsWith(pattern.slice(0, -1))),
      );
    const selected = message.attributes.filter((a) => wanted(a.name));
    if (selected.length > 0) {
      const attributes: Record<string, unknown> = {};
      for (const a of selected) {
        attributes[a.name] =
          a.binary !== undefined
            ? { DataType: a.dataType, BinaryValue: a.base64 }
            : { DataType: a.dataType, StringValue: a.stringValue };
      }
      wire.MessageAttributes = attributes;
      // The checksum covers the attributes returned, which is how clients verify it.
      wire.MD5OfMessageAttributes =
        selected.length === message.attributes.length ? message.md5OfAttributes : md5OfAttributes(selected);
    }
  }
  return wire;
}
