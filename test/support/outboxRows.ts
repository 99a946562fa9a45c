import type pg from "pg";
import type { Queryable } from "../../functions/shared/db/session.ts";
import type { OutboxEvent } from "../../functions/shared/produce/enqueue.ts";
import { enqueueCommitted } from "./produce.ts";

/** Writes events through the write API; each row with its aggregate, as the ledger reads them. */
export async function writeEvents(db: pg.Pool, events: OutboxEvent<unknown>[]) {
  const rows = await enqueueCommitted(db, events);
  return rows.map((row, index) => ({ ...row, aggregateId: events[index]?.aggregateId as string }));
}

/**
 * How many events are published (rows marked so, plus those the relay deleted as published: migration 0011's
 * counter), still pending, and dead-lettered.
 */
export async function rowStates(db: Queryable) {
  const { rows } = await db.query(
    `select (count(*) filter (where processed_at is not null)
             + (select events from outbox_deleted_on_publish))::int as published,
            count(*) filter (where processed_at is null and dead_lettered_at is null)::int as pending,
            count(*) filter (where dead_lettered_at is not null)::int as dead
     from outbox_events`,
  );
  return rows[0] as { published: number; pending: number; dead: number };
}
