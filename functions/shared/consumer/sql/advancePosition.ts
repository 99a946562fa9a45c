import type { Queryable } from "../../db/session.ts";
import type { OutboxNames } from "../../outbox/names.ts";
import type { InboxEvent } from "../inboxEvent.ts";

/**
 * Raises this consumer's high-water mark for the event's aggregate, from the event's origin (the outbox that
 * assigned the seq: InboxEvent.origin), to its `seq`, in the record's transaction. Marks of different origins
 * never meet: two producers' `order/42` are two aggregates to it, since each outbox numbers its own events.
 * Returns false when the mark is already at or above it: the event is stale (an older event of the aggregate
 * arriving after a newer one: a DLQ or outbox redrive, a bus), or it is the very event that set the mark and
 * its inbox row was purged since. Either way there is nothing to apply.
 *
 * One upsert: the row lock it takes (or waits for) serializes the records of one aggregate that run at the
 * same time (a standard queue has no groups), and under read committed the `where` re-reads the committed mark
 * after the wait, so the later-committing of two racing events is judged against the earlier one's `seq`.
 */
export async function advancePosition(
  db: Queryable,
  names: OutboxNames,
  consumer: string,
  event: InboxEvent,
): Promise<boolean> {
  const result = await db.query(
    `insert into ${names.related("positions")} as mark (consumer, origin, aggregate_type, aggregate_id, seq)
     values ($1::text, $2::text, $3::text, $4::text, $5::bigint)
     on conflict (consumer, origin, aggregate_type, aggregate_id)
     do update set seq = excluded.seq, updated_at = now()
     where mark.seq < excluded.seq`,
    [consumer, event.origin, event.aggregateType, event.aggregateId, event.seq.toString()],
  );
  return result.rowCount === 1;
}
