import type pg from "pg";
import { expect } from "vitest";
import type { Queryable } from "../../functions/shared/db/session.ts";
import type { OutboxEvent } from "../../functions/shared/produce/enqueue.ts";
import { PRIVATE } from "./privateSchema.ts";
import { enqueueCommitted } from "./produce.ts";
import { TEST_RETENTION } from "./relay.ts";

/** Writes events through the write API; each row with its aggregate, as the ledger reads them. */
export async function writeEvents(db: pg.Pool, events: OutboxEvent<unknown>[]) {
  const rows = await enqueueCommitted(db, events);
  return rows.map((row, index) => ({ ...row, aggregateId: events[index]?.aggregateId as string }));
}

/**
 * Empties the outbox between tests: its rows, and the count of events the relay deleted as published
 * (OUTBOX_RETENTION=delete), so rowStates() counts from zero. The highest seq stays: the order key never goes back.
 */
export async function clearOutbox(db: Queryable) {
  await db.query("delete from outbox_events");
  await db.query(`update ${PRIVATE}.outbox_deleted_on_publish set events = 0`);
}

/**
 * How many events are published (rows marked so, plus those the relay deleted as published: migration 0011's
 * counter), still pending, and dead-lettered.
 */
export async function rowStates(db: Queryable) {
  const { rows } = await db.query(
    `select (count(*) filter (where processed_at is not null)
             + (select events from ${PRIVATE}.outbox_deleted_on_publish))::int as published,
            count(*) filter (where processed_at is null and dead_lettered_at is null)::int as pending,
            count(*) filter (where dead_lettered_at is not null)::int as dead
     from outbox_events`,
  );
  return rows[0] as { published: number; pending: number; dead: number };
}

/**
 * What a published event leaves in the outbox table in the mode the tests relay in (TEST_RETENTION): its row,
 * marked (`keep`: `fields` are what else that row must show), or no row at all (`delete`: the relay deleted it in
 * the transaction that recorded it; rowStates() counts it from the counter). Match a row read with
 * `processed_at is not null as published`, or undefined when no row was found: a marked row in `delete`, or a
 * missing one in `keep`, fails either way.
 */
export function publishedRow(fields: Record<string, unknown> = {}) {
  return TEST_RETENTION === "delete" ? undefined : expect.objectContaining({ published: true, ...fields });
}

/**
 * The greatest seq ever published: marked rows' (`keep`) or the deleted-on-publish counter's (`delete`,
 * migration 0011), whichever the mode left.
 */
export async function highestPublishedSeq(db: Queryable): Promise<string | null> {
  const { rows } = await db.query(
    `select greatest(max(seq) filter (where processed_at is not null),
                     (select highest_seq from ${PRIVATE}.outbox_deleted_on_publish))::text as seq
     from outbox_events`,
  );
  return rows[0].seq;
}
