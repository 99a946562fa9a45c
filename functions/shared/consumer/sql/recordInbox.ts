import type { Queryable } from "../../db/session.ts";
import type { OutboxNames } from "../../outbox/names.ts";
import type { InboxEvent } from "../inboxEvent.ts";

/**
 * Records that this consumer has taken the event, in the transaction that will carry the user's writes.
 * Returns false when this consumer already has the outbox id: a redelivery, to be skipped. The key is
 * (consumer, outbox_id): consumers sharing one inbox table never take each other's events for duplicates.
 *
 * `on conflict do nothing` rather than a select-then-insert: one round trip, and it is also what makes two
 * deliveries of one id at the same time safe (a message that reappeared after its visibility timeout while the
 * first invocation still runs). The second insert waits on the first one's uncommitted row; if that commits,
 * the second finds a conflict and skips; if it rolls back, the second inserts and does the work. No error
 * reaches the user's handler either way, and no advisory lock is needed.
 *
 * Returns the id of the transaction the row was written in (the insert assigned it), for the check before the
 * commit (sql/sameTransaction.ts), or undefined when the id was already there. The same statement marks the
 * transaction, transaction-locally, as a record's (`outbox_inbox.record`): inbox migration 0005's deferred
 * trigger then refuses any COMMIT of it but the pipeline's own.
 */
export async function recordInbox(
  db: Queryable,
  names: OutboxNames,
  consumer: string,
  event: InboxEvent,
): Promise<string | undefined> {
  const result = await db.query<{ xid: string }>(
    `insert into ${names.qualified} (consumer, outbox_id, event_type, aggregate_type, aggregate_id)
     values ($1::text, $2::uuid, $3::text, $4::text, $5::text)
     on conflict (consumer, outbox_id) do nothing
     returning pg_current_xact_id()::text as xid,
               set_config('outbox_inbox.record', pg_current_xact_id()::text, true) as marked`,
    [consumer, event.id, event.eventType, event.aggregateType, event.aggregateId],
  );
  return result.rows[0]?.xid;
}
