import {
  SendMessageBatchCommand,
  type SendMessageBatchRequestEntry,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import { errorMessage, ValidationError } from "./errors.ts";
import type { ClaimedRow } from "./sql/claimBatch.ts";
import {
  checkGroupId,
  checkHeaders,
  checkName,
  checkSqsText,
  checkTimestamp,
  messageAttributes,
  messageSize,
  SQS_MAX_BATCH_BYTES,
  SQS_MAX_BATCH_ENTRIES,
} from "./sqsMessage.ts";

export interface PublishOptions {
  queueUrl: string;
  /** SendMessageBatch requests in flight at once (requests of one group are always sequential). */
  concurrency: number;
  maxMessageBytes: number;
  /** Aborts requests still in flight (the round's time limit); they count as request failures. */
  signal?: AbortSignal;
}

/** A claimed row with its payload and headers loaded (sql/loadPayloads.ts). */
export interface LoadedRow extends ClaimedRow {
  /** jsonb's text form (`{"a": 1}`); compacted here. Text, not parsed JSON, so numbers keep their precision. */
  payload: string;
  headers: unknown;
}

/**
 * What happened to one claimed row. Which side is at fault decides what a failure costs the row:
 * - `published`: SQS reported this entry successful; only these are marked published.
 * - `rejected`: the message itself is at fault: the relay cannot build a valid message from the row (any
 *   reason, any exception), or SQS refused the entry as the sender's fault (`SenderFault = true`). Counts
 *   towards RELAY_MAX_ATTEMPTS; `permanent` when no retry can help (dead-lettered at once).
 * - `unsent`: SQS did not take it for a reason of its own: the whole request failed (unreachable, throttled,
 *   timed out, 5xx, denied), SQS failed this entry on its side (`SenderFault = false`: InternalError, ...), or
 *   the entry failed for the account's configuration (KMS key disabled or denied, throttled). Says
 *   nothing about the message: backs off and retries without limit, never dead-letters.
 * - `held`: not attempted this round (an earlier event of its group failed in this round, or the round's byte
 *   budget was spent); left untouched.
 */
export type PublishResult =
  | { row: ClaimedRow; status: "published" }
  | { row: ClaimedRow; status: "rejected"; error: string; permanent: boolean }
  | { row: ClaimedRow; status: "unsent"; error: string }
  | { row: ClaimedRow; status: "held" };

interface Prepared {
  row: LoadedRow;
  entry: SendMessageBatchRequestEntry;
  size: number;
}

/** Entry error codes that no retry can fix: the message itself is unacceptable. */
const PERMANENT_CODES = /InvalidParameterValue|InvalidMessageContents|MessageTooLong|InvalidAttribute/i;
/**
 * Entry errors that are the account's or the service's doing, not the message's, whatever SenderFault says: a
 * disabled or denied KMS key, a denied permission, a missing queue, throttling. Counting them towards
 * RELAY_MAX_ATTEMPTS would turn a configuration fault (which the publish-failure alarm reports) into dead letters
 * and, in the default mode, let an aggregate's later events overtake them.
 */
const NOT_THE_MESSAGE_CODES =
  /^Kms|AccessDenied|NonExistentQueue|QueueDoesNotExist|Throttl|RequestThrottled/i;
/** Whole-request errors caused by one entry's content: retry entries one by one to isolate the poison. */
const CONTENT_CODES =
  /InvalidParameterValue|InvalidMessageContents|BatchRequestTooLong|MessageTooLong|InvalidAttribute|BatchEntryIdsNotDistinct|InvalidBatchEntryId/i;

/**
 * Publishes claimed rows to an SQS FIFO queue. Order guarantees, per MessageGroupId (= aggregate_id):
 * at most one message of a group per request (entries of one request can fail independently, so two of a
 * group in one request could reorder), a group's requests strictly one after another ("waves"), and after a
 * failure the group's later rows are held for the next round. Requests of different groups run concurrently.
 */
export async function publishRows(sqs: SQSClient, rows: readonly LoadedRow[], options: PublishOptions) {
  const results: PublishResult[] = [];
  const waves: Prepared[][] = [];
  const positionInGroup = new Map<string, number>();
  for (const row of rows) {
    const prepared = prepare(row, options.maxMessageBytes);
    if (typeof prepared === "string") {
      results.push({ row, status: "rejected", error: prepared, permanent: true });
      continue;
    }
    const position = positionInGroup.get(row.aggregate_id) ?? 0;
    positionInGroup.set(row.aggregate_id, position + 1);
    const wave = waves[position] ?? [];
    wave.push(prepared);
    waves[position] = wave;
  }

  const failedGroups = new Set<string>();
  for (const wave of waves) {
    const ready = wave.filter((message) => {
      if (!failedGroups.has(message.row.aggregate_id)) return true;
      results.push({ row: message.row, status: "held" });
      return false;
    });
    const outcomes = await mapConcurrent(packRequests(ready), options.concurrency, (batch) =>
      sendBatch(sqs, batch, options),
    );
    for (const outcome of outcomes.flat()) {
      if (outcome.status !== "published") failedGroups.add(outcome.row.aggregate_id);
      results.push(outcome);
    }
  }
  return results;
}

/**
 * Builds the SQS entry, refusing rows SQS would reject (a hand-inserted bad group id, an oversized body, an
 * infinite created_at). Returns the reason as text for any row it cannot turn into a message, whatever was
 * thrown: one malformed row must be dead-lettered on its own, never fail the round (and, being the oldest
 * pending row, every round after it).
 */
function prepare(row: LoadedRow, maxMessageBytes: number): Prepared | string {
  try {
    const body = compactJsonbText(row.payload);
    checkSqsText("payload", body);
    const attributes = messageAttributes({
      id: row.id,
      aggregateType: checkName("aggregate_type", row.aggregate_type),
      aggregateId: checkGroupId("aggregate_id", row.aggregate_id),
      eventType: checkName("event_type", row.event_type),
      headers: checkHeaders("headers", row.headers),
      createdAt: checkTimestamp("created_at", row.created_at),
      seq: row.seq,
      body,
    });
    const size = messageSize(body, attributes);
    if (size > maxMessageBytes) {
      throw new ValidationError(
        "payload",
        `message is ${size} bytes, over the queue's limit of ${maxMessageBytes}`,
      );
    }
    return {
      row,
      size,
      entry: {
        Id: "", // assigned per request
        MessageBody: body,
        MessageGroupId: row.aggregate_id,
        MessageDeduplicationId: row.id,
        MessageAttributes: attributes,
      },
    };
  } catch (error) {
    if (error instanceof ValidationError) return error.message;
    return `cannot build the message: ${errorMessage(error)}`;
  }
}

/** Splits one wave into requests of at most 10 entries and 1 MiB. */
function packRequests(messages: readonly Prepared[]): Prepared[][] {
  const requests: Prepared[][] = [];
  let current: Prepared[] = [];
  let bytes = 0;
  for (const message of messages) {
    if (current.length === SQS_MAX_BATCH_ENTRIES || bytes + message.size > SQS_MAX_BATCH_BYTES) {
      requests.push(current);
      current = [];
      bytes = 0;
    }
    current.push(message);
    bytes += message.size;
  }
  if (current.length > 0) requests.push(current);
  return requests;
}

async function sendBatch(
  sqs: SQSClient,
  batch: Prepared[],
  options: PublishOptions,
): Promise<PublishResult[]> {
  const entries = batch.map((message, index) => ({ ...message.entry, Id: String(index) }));
  try {
    const response = await sqs.send(
      new SendMessageBatchCommand({ QueueUrl: options.queueUrl, Entries: entries }),
      options.signal ? { abortSignal: options.signal } : {},
    );
    const succeeded = new Set((response.Successful ?? []).map((entry) => entry.Id));
    const failed = new Map((response.Failed ?? []).map((entry) => [entry.Id, entry]));
    return batch.map((message, index): PublishResult => {
      const id = String(index);
      if (succeeded.has(id)) return { row: message.row, status: "published" };
      const failure = failed.get(id);
      if (failure === undefined) {
        return { row: message.row, status: "unsent", error: "SQS reported neither success nor failure" };
      }
      const code = failure.Code ?? "UnknownError";
      const error = `${code}: ${failure.Message ?? ""}`.trim();
      // SenderFault is required in the response; a missing one is read as the message's fault, as SQS
      // classifies the entry errors its documentation lists (all sender faults).
      if (failure.SenderFault === false) {
        return { row: message.row, status: "unsent", error: `SQS failed the entry on its side: ${error}` };
      }
      if (NOT_THE_MESSAGE_CODES.test(code)) {
        return { row: message.row, status: "unsent", error: `SQS could not take the entry: ${error}` };
      }
      return {
        row: message.row,
        status: "rejected",
        error: `SQS rejected the message: ${error}`,
        permanent: PERMANENT_CODES.test(code),
      };
    });
  } catch (error) {
    const name = (error as { name?: string }).name ?? "";
    if (CONTENT_CODES.test(name) && batch.length > 1 && !options.signal?.aborted) {
      // One entry poisoned the whole request: resend each alone so the healthy ones go through.
      const singles = await mapConcurrent(batch, options.concurrency, (message) =>
        sendBatch(sqs, [message], options),
      );
      return singles.flat();
    }
    const message = errorMessage(error);
    if (CONTENT_CODES.test(name)) {
      return batch.map((m) => ({ row: m.row, status: "rejected", error: message, permanent: true }));
    }
    return batch.map((m) => ({ row: m.row, status: "unsent", error: message }));
  }
}

/**
 * jsonb prints `{"a": 1, "b": [1, 2]}`; the body is the compact form, the same bytes JSON.stringify gave the
 * write API's size check. Only the separators' spaces exist outside strings, so dropping every space outside
 * a string literal is exact, and much cheaper than JSON.parse + stringify (which would also round big numbers).
 */
export function compactJsonbText(text: string): string {
  if (!text.includes(" ")) return text;
  let out = "";
  let start = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (inString) {
      if (code === 92)
        i++; // backslash: skip the escaped character
      else if (code === 34) inString = false;
    } else if (code === 34) {
      inString = true;
    } else if (code === 32) {
      out += text.slice(start, i);
      start = i + 1;
    }
  }
  return out + text.slice(start);
}

async function mapConcurrent<T, R>(
  items: readonly T[],
  limit: number,
  work: (item: T) => Promise<R>,
): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await work(items[index] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}
