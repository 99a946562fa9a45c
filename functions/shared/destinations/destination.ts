import type { PublishResult } from "../publisher.ts";
import type { ClaimedRow } from "../sql/claimBatch.ts";

/** One row made ready for a destination: what will be sent, and its size as the destination counts it. */
export interface Prepared<Message> {
  row: ClaimedRow;
  message: Message;
  size: number;
}

/**
 * What the relay loop needs from a place it publishes to (an SQS FIFO queue, an EventBridge bus): turn a row
 * into a message, send a batch of them, and say what became of each one with the same result classes.
 * The loop keeps the ordering rules (one entry per aggregate per request, an aggregate's requests one after
 * another, held rows after a failure); a destination only knows its API and its limits.
 */
export interface Destination<Message = unknown> {
  /** For logs and metrics: `sqs-fifo` or `eventbridge`. */
  readonly kind: string;
  /** The queue URL or bus name/ARN, for logs. */
  readonly target: string;
  /** Entries one request may carry. */
  readonly maxBatchEntries: number;
  /** Sum of the entries' `size` one request may carry. */
  readonly maxBatchBytes: number;
  /**
   * The message for one row, or why this row can never be sent (a permanent rejection). Never throws: one
   * malformed row is dead-lettered on its own and never fails the round.
   */
  prepare(row: ClaimedRow): Prepared<Message> | string;
  /**
   * Sends one request and returns one result per entry, in the batch's order. Never throws for a failed send:
   * every failure is classified (`rejected` when the message is at fault, `unsent` when it is not).
   */
  send(batch: readonly Prepared<Message>[], signal?: AbortSignal): Promise<PublishResult[]>;
}
