import type { Queryable } from "../../db/session.ts";
import type { OutboxNames } from "../../outbox/names.ts";

/**
 * Deletes up to `limit` inbox rows processed more than `retentionHours` ago, oldest first, in one statement.
 * The same shape as the outbox purge (functions/shared/sql/purgePublished.ts, where the ctid-versus-id numbers
 * are): the inner select walks the processed_at index from its oldest end, so a statement reads about `limit`
 * entries however large the inbox is; SKIP LOCKED leaves a row someone holds (an inbox insert waiting on a
 * conflict holds none: it waits on the row's inserter, not on a row lock we take) to the next call.
 * The cutoff is computed by the database (processed_at is its clock too) from a bound integer.
 */
export async function purgeInboxBatch(
  db: Queryable,
  names: OutboxNames,
  options: { retentionHours: number; limit: number },
): Promise<number> {
  const result = await db.query(
    `delete from ${names.qualified}
     where ctid = any(array(
       select ctid
       from ${names.qualified}
       where processed_at < now() - $1::integer * interval '1 hour'
       order by processed_at
       limit $2::integer
       for update skip locked
     ))`,
    [options.retentionHours, options.limit],
  );
  return result.rowCount ?? 0;
}
