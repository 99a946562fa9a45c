import type { Queryable } from "../../db/session.ts";
import type { OutboxNames } from "../../outbox/names.ts";
import { livePending } from "../../outbox/pendingPredicates.ts";
import { LOAD_TIMEOUT_ERROR } from "../../relay/loadBudget.ts";

export interface SlowPayload {
  id: string;
  aggregateId: string;
  eventType: string;
  /** Tries that failed without being the message's fault; a load that timed out is one. */
  transientFailures: number;
  lastError: string;
}

export interface SlowPayloads {
  /** Pending rows whose last try ended with their payload not loading in time. */
  count: number;
  /** The first `limit` of them, in outbox order. */
  rows: SlowPayload[];
}

/**
 * Pending rows whose last try timed out loading their payload (relay/sql/loadPayloads.ts `timedOut`): the relay
 * retries them with backoff and never dead-letters them, so without this they are only a blocked aggregate. Read
 * through the pending index (livePending), so the cost follows the backlog, not the published rows.
 */
export async function slowPayloads(db: Queryable, names: OutboxNames, limit = 5): Promise<SlowPayloads> {
  const { rows } = await db.query<{
    id: string;
    aggregate_id: string;
    event_type: string;
    transient_failures: number;
    last_error: string;
    total: string;
  }>(
    `select id::text, aggregate_id, event_type, transient_failures, last_error, count(*) over () as total
     from ${names.qualified}
     where ${livePending()} and starts_with(last_error, $1::text)
     order by seq
     limit $2::integer`,
    [LOAD_TIMEOUT_ERROR, limit],
  );
  return {
    count: Number(rows[0]?.total ?? 0),
    rows: rows.map((row) => ({
      id: row.id,
      aggregateId: row.aggregate_id,
      eventType: row.event_type,
      transientFailures: row.transient_failures,
      lastError: row.last_error,
    })),
  };
}
