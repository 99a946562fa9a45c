import type { Queryable } from "../db.ts";
import type { OutboxNames } from "../identifiers.ts";

export interface RowOutcome {
  id: string;
  published: boolean;
  /** For failures: the error stored in last_error (already truncated). */
  error?: string;
  /** For failures: the backoff before the next attempt. */
  retryInMs?: number;
  /** For failures: give up on this row (attempts exhausted or an error that can never succeed). */
  deadLetter?: boolean;
}

/**
 * Records a whole round in one UPDATE: published rows get processed_at; failed rows get attempts + 1, their
 * error, the next attempt time, and possibly dead_lettered_at. One statement instead of one per row keeps the
 * round trip count constant (the seed's per-row UPDATE is what makes the baseline slow) and the locks short.
 * processed_at is clock_timestamp(), not now(): now() is the transaction's start, before the publish, and
 * would understate the publish lag.
 */
export async function recordOutcomes(db: Queryable, names: OutboxNames, outcomes: readonly RowOutcome[]) {
  if (outcomes.length === 0) return;
  await db.query(
    `update ${names.qualified} as o
     set processed_at = case when r.published then clock_timestamp() end,
         attempts = o.attempts + case when r.published then 0 else 1 end,
         last_error = case when r.published then o.last_error else r.error end,
         available_at = case when r.published then o.available_at
                             else clock_timestamp() + r.retry_in_ms * interval '1 millisecond' end,
         dead_lettered_at = case when r.dead_letter then clock_timestamp() end
     from unnest($1::uuid[], $2::boolean[], $3::text[], $4::integer[], $5::boolean[])
          as r(id, published, error, retry_in_ms, dead_letter)
     where o.id = r.id`,
    [
      outcomes.map((outcome) => outcome.id),
      outcomes.map((outcome) => outcome.published),
      outcomes.map((outcome) => outcome.error ?? null),
      outcomes.map((outcome) => outcome.retryInMs ?? 0),
      outcomes.map((outcome) => outcome.deadLetter === true),
    ],
  );
}
