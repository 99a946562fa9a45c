import type { Queryable } from "../../db/session.ts";
import type { OutboxNames } from "../../outbox/names.ts";
import { livePending } from "../../outbox/pendingPredicates.ts";

/** What routing looks at (aggregate_type, event_type), with the pending rows of that pair. */
export interface PendingPair {
  aggregateType: string;
  eventType: string;
  pending: number;
  /** Age of the pair's oldest pending event (created_at). */
  oldestPendingAgeSeconds: number;
}

/**
 * Pairs read per snapshot at most. A route matches on aggregate and event type only, so the pairs are as many as
 * the producers' types (tens, rarely hundreds); the cap keeps a producer writing a type per tenant from making
 * the result and the routing in TypeScript grow with it. The oldest pairs are kept: above the cap the
 * per-destination ages still see the oldest events, but the youngest pairs' counts are missing from the
 * per-destination PendingEvents (the outbox-wide figures stay exact) and the purge logs a warning.
 */
export const MAX_PENDING_PAIRS = 1000;

/**
 * One statement: the pending rows (not published, not dead letters) grouped by routing key. Its where clause is
 * exactly the predicate of the pending_group_live index (migration 0007), so the planner reads pending rows only,
 * never the published ones awaiting the purge. Measured with EXPLAIN ANALYZE (Postgres 17, 2 shared cores):
 * 1,000,000 rows of which 100,000 pending over 40 pairs, a Bitmap Index Scan on pending_group_live, a Bitmap Heap
 * Scan of the pending rows (parallel, partial HashAggregates gathered), then a top-N sort: 248 ms; 220,000 rows
 * of which 20,000 pending, 10 ms (test/observe/pendingByDestination.test.ts pins the
 * plan). The cost follows the backlog, as the per-event-type statement's does (outboxSnapshot.ts).
 */
export function pendingByRouteStatement(names: OutboxNames): string {
  return `select aggregate_type, event_type, count(*) as pending,
              min(created_at) as oldest_pending_created_at, now() as now
       from ${names.qualified}
       where ${livePending()}
       group by aggregate_type, event_type
       order by min(created_at), aggregate_type, event_type
       limit $1::int`;
}

interface PairRow {
  aggregate_type: string;
  event_type: string;
  pending: string;
  oldest_pending_created_at: Date;
  now: Date;
}

/** The pending pairs, oldest first; `capped` when more than `maxPairs` exist (the rest are not read). */
export async function pendingByRoute(
  db: Queryable,
  names: OutboxNames,
  maxPairs: number = MAX_PENDING_PAIRS,
): Promise<{ pairs: PendingPair[]; capped: boolean }> {
  const { rows } = await db.query<PairRow>(pendingByRouteStatement(names), [maxPairs + 1]);
  return {
    pairs: rows.slice(0, maxPairs).map((row) => ({
      aggregateType: row.aggregate_type,
      eventType: row.event_type,
      pending: Number(row.pending),
      oldestPendingAgeSeconds: Math.max(
        0,
        (row.now.getTime() - row.oldest_pending_created_at.getTime()) / 1000,
      ),
    })),
    capped: rows.length > maxPairs,
  };
}
