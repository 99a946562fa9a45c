import { errorMessage } from "../outbox/errors.ts";
import type { ClaimedRow } from "../outbox/row.ts";

/** A claimed row with its payload and headers loaded (sql/loadPayloads.ts). */
export interface LoadedRow extends ClaimedRow {
  /** jsonb's text form (`{"a": 1}`); compacted when sent. Text, not parsed JSON, so numbers keep their precision. */
  payload: string;
  headers: unknown;
  /**
   * Set by the claim check (claimCheck/claimCheck.ts) when `payload` is the pointer to the payload in S3: the
   * payload's bytes, which SQS and SNS send as the ExtendedPayloadSize attribute and envelopes as a field.
   */
  extendedPayloadSize?: number;
}

/**
 * What happened to one claimed row. Which side is at fault decides what a failure costs the row:
 * - `published`: the destination reported this entry successful; only these are marked published.
 * - `rejected`: the message itself is at fault: the relay cannot build a valid message from the row (any
 *   reason, any exception), or the destination refused the entry as the sender's fault. Counts towards
 *   RELAY_MAX_ATTEMPTS; `permanent` when no retry can help (dead-lettered at once).
 * - `unsent`: the destination said it did not take it, for a reason of its own: it answered the whole request
 *   with an error (throttled, denied, a missing resource), failed this entry on its side, or failed the entry
 *   for the account's configuration (KMS key disabled or denied, a permission missing, throttled). Says
 *   nothing about the message: backs off and retries without limit, never dead-letters.
 * - `uncertain`: whether the destination received it is unknown: the request got no answer (aborted at the
 *   round's deadline, timed out, the connection dropped), a 5xx answer (the service may have stored it before
 *   failing), or an answer without this entry. Retried like `unsent`; the retry may deliver it a second time:
 *   a FIFO queue or topic deduplicates it within its 5-minute window, a standard queue, EventBridge or Kinesis
 *   gets a duplicate (consumers are idempotent: the inbox skips it).
 * - `held`: not attempted this round (an earlier event of its aggregate failed in this round, or the round's
 *   byte budget was spent); left untouched.
 */
export type PublishResult =
  | { row: ClaimedRow; status: "published" }
  | { row: ClaimedRow; status: "rejected"; error: string; permanent: boolean }
  | { row: ClaimedRow; status: "unsent"; error: string }
  | { row: ClaimedRow; status: "uncertain"; error: string }
  | { row: ClaimedRow; status: "held" };

/** One row made ready for a destination: what will be sent, and its size as the destination counts it. */
export interface Prepared<Message> {
  row: LoadedRow;
  message: Message;
  size: number;
}

/**
 * What the relay loop needs from a place it publishes to (an SQS FIFO queue, an EventBridge bus): turn a row
 * into a message, send a batch of them, and say what became of each one with the same result classes. The
 * loop keeps the ordering rules (one entry per aggregate per request, an aggregate's requests one after
 * another, held rows after a failure: publisher.ts); a destination only knows its API and its limits.
 */
export interface Destination<Message = unknown> {
  /** For logs and metrics: what kind of place this is (`routes`: a router over several, routing/router.ts). */
  readonly kind: DestinationKind;
  /** The queue URL, topic ARN, stream, or bus name/ARN, for logs. */
  readonly target: string;
  /** Entries one request may carry. */
  readonly maxBatchEntries: number;
  /** Sum of the entries' `size` one request may carry. */
  readonly maxBatchBytes: number;
  /**
   * The largest message it accepts. The relay's SQL pre-screen (sql/loadPayloads.ts) dead-letters a row whose
   * payload plus headers alone exceed it without loading its text; prepare() then checks the exact size.
   */
  readonly maxMessageBytes: number;
  /**
   * The message for one row, or why this row can never be sent (a permanent rejection). Never throws: one
   * malformed row is dead-lettered on its own and never fails the round.
   */
  prepare(row: LoadedRow): Prepared<Message> | string;
  /**
   * Sends one request and returns one result per entry, in the batch's order. Never throws for a failed send:
   * every failure is classified (`rejected` when the message is at fault, `unsent` or `uncertain` when it is
   * not).
   */
  send(batch: readonly Prepared<Message>[], signal?: AbortSignal): Promise<PublishResult[]>;
  /**
   * Asks the destination, once before relaying, whether it can take the relay's messages at all (the queue
   * exists, is FIFO, takes messages this big). Throws a ConfigError naming the fix; `verified: false` when the
   * relay may not ask. Absent where there is nothing to ask.
   */
  check?(timeoutMs: number): Promise<DestinationCheck>;
  /**
   * True when each place behind this destination holds its own sends until its own check has answered (a router:
   * routing/router.ts), so the caller relays beside the check instead of waiting for it: one silent route then
   * holds only its own events. Absent: the caller waits for the check before the first round.
   */
  readonly checkBesideRelaying?: boolean;
  /**
   * When one destination stands for several (a router), the request a prepared message belongs to and that
   * request's limits: the publisher packs each channel's messages into requests of their own, so one request
   * never mixes destinations. Absent: every message shares one channel with the limits above.
   */
  channelOf?(message: Prepared<Message>): RequestChannel;
  /**
   * The name of the place one row goes to, for the round report's per-destination counts and the metrics'
   * `destination` dimension (a router: the matched route's destination, or `none`). Absent: one place only.
   */
  destinationOf?(row: ClaimedRow): string;
}

export type DestinationKind = "sqs-fifo" | "sqs" | "sns-fifo" | "sns" | "kinesis" | "eventbridge" | "routes";

/** The requests of one destination behind a router: a key and the limits of one of its requests. */
export interface RequestChannel {
  id: string;
  maxBatchEntries: number;
  maxBatchBytes: number;
}

export type DestinationCheck = { verified: true } | { verified: false; reason: string };

/**
 * What a failed request (no per-entry results) means for its entries. `byContent`: the error says an entry made the
 * request invalid, the sender's fault. Then, with more than one entry, each is sent alone so the healthy ones go
 * through and only the culprit is rejected (all at once: a batch holds at most one entry per group, and the client's
 * sockets bound how many are in flight); a single entry is rejected permanently. Any other failure (unreachable,
 * throttled, denied, 5xx, timed out) says nothing about the messages: every entry is `unsent` when the service
 * answered that it did not take the request, `uncertain` when it may have (receivedUnknown).
 */
export async function requestFailed<Message>(
  batch: readonly Prepared<Message>[],
  error: unknown,
  byContent: boolean,
  sendAlone: (single: readonly Prepared<Message>[]) => Promise<PublishResult[]>,
  signal?: AbortSignal,
): Promise<PublishResult[]> {
  if (byContent && batch.length > 1 && !signal?.aborted) {
    return (await Promise.all(batch.map((entry) => sendAlone([entry])))).flat();
  }
  const message = errorMessage(error);
  return batch.map(
    ({ row }): PublishResult =>
      byContent
        ? { row, status: "rejected", error: message, permanent: true }
        : { row, status: receivedUnknown(error) ? "uncertain" : "unsent", error: message },
  );
}

/**
 * Whether a failed request may still have reached the service: no HTTP answer at all (aborted, timed out, the
 * connection dropped: the SDK's error then has no `$metadata.httpStatusCode`) or a 5xx one. A 4xx answer
 * (throttled, denied, invalid) means the service did not act on it.
 */
export function receivedUnknown(error: unknown): boolean {
  const status = (error as { $metadata?: { httpStatusCode?: unknown } } | undefined)?.$metadata
    ?.httpStatusCode;
  return typeof status !== "number" || status >= 500;
}

/** One failed entry of a batch response, as SQS's SendMessageBatch and SNS's PublishBatch report it. */
export interface BatchEntryFailure {
  Id?: string | undefined;
  Code?: string | undefined;
  Message?: string | undefined;
  SenderFault?: boolean | undefined;
}

/**
 * Each entry's own result from a batch response whose entries were sent with Id = their index (SQS
 * SendMessageBatch, SNS PublishBatch: the same Successful/Failed shape). An entry the service failed on its side
 * (SenderFault false) or for a reason that is not the message's (`notTheMessage`: throttling, KMS, access) is
 * unsent, so it is retried without counting; any other failure rejects the message, permanently where
 * `permanent` matches. An entry in neither list is unsent.
 */
export function batchEntryResults<Message>(
  batch: readonly Prepared<Message>[],
  response: {
    Successful?: { Id?: string | undefined }[] | undefined;
    Failed?: BatchEntryFailure[] | undefined;
  },
  service: { name: string; serverFault: string; notTheMessage: RegExp; permanent: RegExp },
): PublishResult[] {
  const succeeded = new Set((response.Successful ?? []).map((entry) => entry.Id));
  const failed = new Map((response.Failed ?? []).map((entry) => [entry.Id, entry]));
  return batch.map((entry, index): PublishResult => {
    const id = String(index);
    if (succeeded.has(id)) return { row: entry.row, status: "published" };
    const failure = failed.get(id);
    if (failure === undefined) {
      return {
        row: entry.row,
        status: "uncertain",
        error: `${service.name} reported neither success nor failure`,
      };
    }
    const code = failure.Code ?? "UnknownError";
    const error = `${code}: ${failure.Message ?? ""}`.trim();
    // SenderFault is required in the response; a missing one is read as the message's fault, as SQS
    // classifies the entry errors its documentation lists (all sender faults).
    if (failure.SenderFault === false) {
      return { row: entry.row, status: "unsent", error: `${service.name} ${service.serverFault}: ${error}` };
    }
    if (service.notTheMessage.test(code)) {
      return {
        row: entry.row,
        status: "unsent",
        error: `${service.name} could not take the entry: ${error}`,
      };
    }
    return {
      row: entry.row,
      status: "rejected",
      error: `${service.name} rejected the message: ${error}`,
      permanent: service.permanent.test(code),
    };
  });
}
