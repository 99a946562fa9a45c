import type { Queryable } from "../db.ts";
import type { OutboxNames } from "../identifiers.ts";

export interface ClaimedRow {
  id: string;
  seq: string;
  aggregate_type: string;
  aggregate_id: string;
  event_type: string;
  /** jsonb's text form (`{"a": 1}`); the publisher compacts it. Text, not parsed JSON, so numbers keep precision. */
  payload: string;
  headers: Record<string, unknown>;
  attempts: number;
  created_at: Date;
}

/**
 * Locks up to `limit` publishable rows, oldest first, for the rest of the caller's transaction.
 *
 * Only the *head* of each aggregate is taken: the row with no earlier unpublished row of the same
 * (aggregate_type, aggregate_id). That one rule gives every ordering guarantee at once:
 * - an earlier row locked by another relay is still unpublished, so its successors are not heads and are
 *   skipped (SKIP LOCKED skips the locked head itself);
 * - an earlier row in backoff (available_at in the future) blocks its successors the same way;
 * - a dead letter blocks its aggregate only in strict mode ($2); otherwise it is parked, like an SQS FIFO DLQ.
 * The head test runs inside the WHERE, before LIMIT, so a blocked aggregate with thousands of waiting rows
 * costs one index probe per row (pending_aggregate index) but never fills the batch and starves the others.
 *
 * One event per aggregate per claim caps a single aggregate at one event per round trip; SQS FIFO delivers a
 * group strictly in sequence anyway, and throughput comes from many aggregates in parallel.
 * The partial pending_seq index keeps the scan on unpublished rows however many published rows remain.
 */
export async function claimBatch(
  db: Queryable,
  names: OutboxNames,
  options: { limit: number; strictOrder: boolean },
): Promise<ClaimedRow[]> {
  const { rows } = await db.query<ClaimedRow>(
    `select o.id, o.seq, o.aggregate_type, o.aggregate_id, o.event_type, o.payload::text as payload,
            o.headers, o.attempts, o.created_at
     from ${names.qualified} as o
     where o.processed_at is null
       and o.dead_lettered_at is null
       and o.available_at <= now()
       and not exists (
         select 1
         from ${names.qualified} as earlier
         where earlier.aggregate_type = o.aggregate_type
           and earlier.aggregate_id = o.aggregate_id
           and earlier.seq < o.seq
           and earlier.processed_at is null
           and (earlier.dead_lettered_at is null or $2::boolean)
       )
     order by o.seq
     limit $1::integer
     for update of o skip locked`,
    [options.limit, options.strictOrder],
  );
  return rows;
}
