/**
 * SQS's wire protocol as the AWS SDK v3 speaks it (AWS JSON 1.0, `awsQueryCompatible` errors), and nothing
 * else: reading a request (target header, JSON body), the errors (`__type` plus the `x-amzn-query-error`
 * header the SDK maps back to its modelled exceptions), writing an answer, the MD5 checksums the SDKs verify,
 * and a received message's shape. Kept apart so the queue model and the actions never see HTTP or JSON, and
 * the SDK sees exactly what real SQS would send.
 */
import { createHash, randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { ACCOUNT } from "./account.ts";
import type { Attribute, StoredMessage } from "./sqsQueue.ts";

const MAX_REQUEST_BYTES = 16 * 1024 * 1024;

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

/** An error to answer a whole request with; `code` is an SQS error shape name or any query code. */
export class SqsError extends Error {
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

export const invalid = (message: string) => new SqsError("InvalidParameterValue", message);
export const missing = (name: string) =>
  new SqsError("MissingParameter", `The request must contain the parameter ${name}.`);
export const noQueue = () => new SqsError("QueueDoesNotExist", "The specified queue does not exist.");

// ---------------------------------------------------------------------------------------------------------------
// Requests

export function readBody(req: IncomingMessage, limit = MAX_REQUEST_BYTES): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) req.destroy(new Error("request too large"));
      else chunks.push(chunk);
    });
    req.on("end", () => resolve(chunks.length === 1 && chunks[0] ? chunks[0] : Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

/**
 * The service (`AmazonSQS`, `AWSEvents` or `Kinesis_20131202`; undefined for anything else, e.g. SNS's awsQuery,
 * which has no target header) and action named by `x-amz-target`.
 */
export function parseTarget(target: string | string[] | undefined): {
  service: string | undefined;
  action: string;
} {
  const match =
    typeof target === "string" ? /^(AmazonSQS|AWSEvents|Kinesis_20131202)\.(.*)$/.exec(target) : null;
  return { service: match?.[1], action: match?.[2] ?? "" };
}

/** The request's JSON object (an empty body is `{}`); anything else is a SerializationException. */
export function parseInput(raw: Buffer): Record<string, unknown> {
  try {
    const parsed: unknown = raw.length === 0 ? {} : JSON.parse(raw.toString("utf8"));
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
      throw new Error("not an object");
    return parsed as Record<string, unknown>;
  } catch {
    throw new SqsError("SerializationException", "The request body is not a JSON object.");
  }
}

/** The queue a request is about, from its QueueUrl or QueueName (for the fault predicates). */
export function queueNameOf(input: Record<string, unknown>): string | undefined {
  const url = input.QueueUrl;
  if (typeof url === "string") return url.slice(url.lastIndexOf("/") + 1);
  return typeof input.QueueName === "string" ? input.QueueName : undefined;
}

// ---------------------------------------------------------------------------------------------------------------
// Answers

export function writeOutput(res: ServerResponse, output: unknown): void {
  respond(res, 200, output);
}

export function writeError(res: ServerResponse, error: SqsError): void {
  const queryCode = MODELLED_ERRORS[error.code]?.[1] ?? error.code;
  const fault = error.status >= 500 ? "Receiver" : "Sender";
  respond(
    res,
    error.status,
    { __type: `com.amazonaws.sqs#${error.code}`, message: error.message },
    {
      "x-amzn-query-error": `${queryCode};${fault}`,
    },
  );
}

function respond(
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

// ---------------------------------------------------------------------------------------------------------------
// Checksums and received messages

export const md5Hex = (data: string | Buffer) => createHash("md5").update(data).digest("hex");

/**
 * MD5OfMessageAttributes exactly as SQS computes it (and as the Java/Go/Python SDKs verify it; the JS SDK v3's
 * middleware-sdk-sqs only verifies body MD5s): attributes sorted by name; for each, the name and the data type,
 * each as a 4-byte big-endian length + UTF-8 bytes, then one transport byte (1 = String/Number, 2 = Binary),
 * then the value as 4-byte length + bytes (UTF-8 for strings, the decoded bytes for binary).
 */
export function md5OfAttributes(attributes: readonly Attribute[]): string | undefined {
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

/** A received message on the wire: system attributes and message attributes as requested. */
export function toWire(
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
