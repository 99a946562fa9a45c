import type { Queryable } from "../../db/session.ts";
import type { OutboxNames } from "../../outbox/names.ts";

export interface DeadLetter {
  id: string;
  seq: string;
  aggregate_type: string;
  aggregate_id: string;
  event_type: string;
  attempts: number;
  last_error: string | null;
  created_at: Date;
  dead_lettered_at: Date;
}

export interface DeadLetterFilter {
  eventType?: string;
  aggregateType?: string;
  aggregateId?: string;
  /** Rows returned at most (>= 1); `total` still counts every match. */
  limit: number;
}

export interface DeadLetterPage {
  rows: DeadLetter[];
  /** Dead letters matching the filter, including those beyond `limit`. */
  total: number;
}

/**
 * Dead letters, oldest first (the order they died in, then outbox order), optionally filtered.
 *
 * Each filter is a bound parameter that is either null (no filter) or an equality, so there is one statement
 * text whatever the operator combines, and nothing is ever spliced into the SQL. Dead letters are few by
 * design (a handful per incident), so the partial dead_lettered_at index finds them all cheaply and the
 * remaining filters run on that small set; `count(*) over ()` reports the total in the same round trip.
 * The payload is left out: listing is for triage, and payloads can be up to 1 MiB each.
 */
export async function listDeadLetters(
  db: Queryable,
  names: OutboxNames,
  filter: DeadLetterFilter,
): Promise<DeadLetterPage> {
  const { rows } = await db.query<DeadLetter & { total: string }>(
    `select o.id, o.seq, o.aggregate_type, o.aggregate_id, o.event_type, o.attempts, o.last_error,
            o.created_at, o.dead_lettered_at, count(*) over () as total
     from ${names.qualified} as o
     where o.dead_lettered_at is not null
       and ($1::text is null or o.event_type = $1::text)
       and ($2::text is null or o.aggregate_type = $2::text)
       and ($3::text is null or o.aggregate_id = $3::text)
     order by o.dead_lettered_at, o.seq
     limit $4::integer`,
    [filter.eventType ?? null, filter.aggregateType ?? null, filter.aggregateId ?? null, filter.limit],
  );
  // With limit >= 1, no row means no match at all.
  const total = Number(rows[0]?.total ?? 0);
  return { rows: rows.map(({ total: _total, ...row }) => row), total };
}
