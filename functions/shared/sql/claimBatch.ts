import type { Queryable } from "../db.ts";
import type { OutboxNames } from "../identifiers.ts";

export interface ClaimedRow {
  id: string;
  seq: string;
  aggregate_type: string;
  aggregate_id: string;
  event_type: string;
  attempts: number;
  /** Tries that failed on SQS's side (outage, throttling, InternalError); they never dead-letter. */
  transient_failures: number;
  /**
   * As node-postgres parses timestamptz: a Date, but `Infinity`/`-Infinity` for 'infinity' and an invalid Date
   * beyond JavaScript's range (a hand-inserted row); the publisher checks it.
   */
  created_at: Date | number;
}

/**
 * The claim returns no payload or headers: they can be large (or, inserted by hand, huge), so they are sized in
 * SQL and loaded separately within the round's byte budget (loadPayloads.ts).
 *
 * Locks up to `limit` publishable rows, oldest first, for the rest of the caller's transaction.
 *
 * Only the *head* of each aggregate is taken: the row whose seq is the smallest among the unpublished rows of
 * its (aggregate_type, aggregate_id). That one rule gives every ordering guarantee at once:
 * - an earlier row locked by another relay is still unpublished, so its successors are not heads and are
 *   skipped (SKIP LOCKED skips the locked head itself);
 * - an earlier row in backoff (available_at in the future) blocks its successors the same way;
 * - a dead letter blocks its aggregate only in strict mode ($2); otherwise it is parked, like an SQS FIFO DLQ.
 * The head test runs inside the WHERE, before LIMIT, so a blocked aggregate with thousands of waiting rows
 * costs one index probe per row but never fills the batch and starves the others. One event per aggregate per
 * claim caps a single aggregate at one event per round; SQS FIFO delivers a group strictly in sequence anyway,
 * and throughput comes from many aggregates in parallel.
 *
 * Why a scalar `min(seq)` subquery and not `not exists (... earlier.seq < o.seq)`: statistics. A healthy
 * outbox has nothing pending whenever autovacuum analyzes it, so when a backlog builds the planner believes the
 * pending indexes are empty, turns NOT EXISTS into an anti-join, and rescans the whole pending index for every
 * candidate: 184 ms per claim at 10k pending, past the statement timeout at ~250k (bench (6)). A scalar
 * subquery always runs as one lookup per candidate. Its dead-letter filter is written so that it does *not*
 * imply pending_seq's predicate (`dead_lettered_at = 'infinity'` never matches; it only keeps the planner from
 * picking pending_seq, which would walk the index from its start for each lookup): the lookup must be one
 * descent of pending_aggregate (aggregate_type, aggregate_id, seq), which holds dead rows for strict mode.
 * test/claim.plan.test.ts checks the plan with statistics taken on an empty pending set.
 */
export async function claimBatch(
  db: Queryable,
  names: OutboxNames,
  options: { limit: number; strictOrder: boolean },
): Promise<ClaimedRow[]> {
  const { rows } = await db.query<ClaimedRow>(
    `select o.id, o.seq, o.aggregate_type, o.aggregate_id, o.event_type, o.attempts, o.transient_failures,
            o.created_at
     from ${names.qualified} as o
     where o.processed_at is null
       and o.dead_lettered_at is null
       and o.available_at <= now()
       and o.seq = (
         select min(head.seq)
         from ${names.qualified} as head
         where head.aggregate_type = o.aggregate_type
           and head.aggregate_id = o.aggregate_id
           and head.processed_at is null
           and (head.dead_lettered_at is null or head.dead_lettered_at = 'infinity'::timestamptz or $2::boolean)
       )
     order by o.seq
     limit $1::integer
     for update of o skip locked`,
    [options.limit, options.strictOrder],
  );
  return rows;
}
