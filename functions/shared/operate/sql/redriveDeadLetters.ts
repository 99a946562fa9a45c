import type { Queryable } from "../../db/session.ts";
import { ValidationError } from "../../outbox/errors.ts";
import type { OutboxNames } from "../../outbox/names.ts";
import { livePending } from "../../outbox/pendingPredicates.ts";

/** Which dead letters to return to pending. At least one criterion, or `all`; criteria combine with AND. */
export interface RedriveSelector {
  ids?: readonly string[];
  eventType?: string;
  aggregateType?: string;
  aggregateId?: string;
  all?: boolean;
}

export interface RedrivenEvent {
  id: string;
  seq: string;
  aggregate_type: string;
  aggregate_id: string;
  event_type: string;
  /** Attempts it had used before the redrive (now reset to 0). */
  previous_attempts: number;
  /**
   * A later event of the same message group (aggregate_id, any aggregate type) was already published, even if
   * the purge has since deleted it (the group's high-water mark, migration 0006), or was being published by a
   * relay round the redrive waited for: dead letters are parked, not blocking, unless RELAY_STRICT_ORDER, so this
   * one will reach consumers after its successors.
   */
  overtaken: boolean;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function hasSelector(selector: RedriveSelector): boolean {
  return (
    selector.all === true ||
    (selector.ids !== undefined && selector.ids.length > 0) ||
    selector.eventType !== undefined ||
    selector.aggregateType !== undefined ||
    selector.aggregateId !== undefined
  );
}

/** Refuses an empty selector (which would mean "everything" by accident) and ids that are not UUIDs. */
export function checkRedriveSelector(selector: RedriveSelector): void {
  if (!hasSelector(selector)) {
    throw new ValidationError(
      "selector",
      "name the dead letters to redrive (ids, event type, aggregate) or all",
    );
  }
  const badId = selector.ids?.find((id) => !UUID.test(id));
  if (badId !== undefined)
    throw new ValidationError("id", `${JSON.stringify(badId)} is not an outbox id (a UUID)`);
}

/**
 * Returns the selected dead letters to pending: attempts 0, transient failures 0 (the backoff starts over),
 * dead_lettered_at null, available now, so the next relay round claims them (each still only as the head of its aggregate, so a redriven event is published
 * before the pending events that follow it). last_error is kept, prefixed with when it was redriven and
 * after how many attempts, so the history of the row survives the reset.
 *
 * One UPDATE ... RETURNING: the selection and the change are one atomic statement, so a dry run can be this
 * same statement in a transaction that is rolled back, and what it shows is exactly what a real run changes.
 * Criteria are bound parameters that are null when unused (one statement text, nothing spliced); the
 * `dead_lettered_at is not null` predicate uses the partial dead-letter index, and dead letters are few.
 * The relay never claims dead letters, so this takes no lock a relay is waiting for.
 * Call it inside a transaction (the CLI does): it first takes the selected groups' commit-order locks, which
 * last until that transaction ends, so no successor can be committed into a group between the statements that
 * decide (`overtaken`) and the redrive's commit. Producers of those groups wait for it meanwhile (a redrive is
 * short: it waits only for relay rounds holding a successor, bounded by the relay's timeouts). A multi-group
 * producer that locks the groups in another order can meet a deadlock, which Postgres breaks (40P01).
 * RETURNING sees the updated row; the self-join `d` is the row as the statement found it, which is where the
 * attempts used before the reset come from.
 */
export async function redriveDeadLetters(
  db: Queryable,
  names: OutboxNames,
  selector: RedriveSelector,
): Promise<RedrivenEvent[]> {
  checkRedriveSelector(selector);

  const ids = selector.ids !== undefined && selector.ids.length > 0 ? [...selector.ids] : null;
  const params = [
    ids,
    selector.eventType ?? null,
    selector.aggregateType ?? null,
    selector.aggregateId ?? null,
  ];
  // First the commit-order locks of the selected dead letters' groups (0006's group_lock_key, the very lock the
  // insert trigger takes before a pending row draws its seq), in key order so two redrives cannot deadlock, held
  // to the end of the caller's transaction: no producer can commit a successor into these groups while redrive
  // decides, so what the statements below see of each group is all there is until the redriven row is pending
  // (then it is the group's head and goes first). A producer already inside its transaction is waited for.
  // Returns the groups locked; only their dead letters are redriven (one dead-lettered by a relay after this
  // statement, in another group, is left for the next redrive rather than decided without its group's lock).
  // The ordered subquery is what orders the locks: its rows reach the select list, which locks, in key order.
  const locked = await db.query<{ aggregate_id: string }>(
    `select g.aggregate_id, pg_advisory_xact_lock(g.key)::text as locked
     from (select distinct o.aggregate_id, ${names.related("group_lock_key")}(o.aggregate_id) as key
           from ${names.qualified} as o
           where o.dead_lettered_at is not null
             and ($1::uuid[] is null or o.id = any($1::uuid[]))
             and ($2::text is null or o.event_type = $2::text)
             and ($3::text is null or o.aggregate_type = $3::text)
             and ($4::text is null or o.aggregate_id = $4::text)
           order by key, aggregate_id) as g`,
    params,
  );
  const groups = locked.rows.map((row) => row.aggregate_id);
  // A successor claimed by a relay round right now is pending until that round commits, and may then be
  // published: wait for such rounds (their row locks) before deciding, and hold the successors meanwhile so no
  // round claims one before the redriven event is pending again (it then goes first: the smaller seq is the head).
  // Bounded by the relay's own timeouts (a round holds its locks at most RELAY_PUBLISH_TIMEOUT_MS + 3 x
  // RELAY_STATEMENT_TIMEOUT_MS) and by the caller's query timeout.
  await db.query(
    `select 1
     from ${names.qualified} as later
     where ${livePending("later")}
       and exists (
         select 1 from ${names.qualified} as o
         where o.dead_lettered_at is not null
           and o.aggregate_id = later.aggregate_id and o.seq < later.seq
           and ($1::uuid[] is null or o.id = any($1::uuid[]))
           and ($2::text is null or o.event_type = $2::text)
           and ($3::text is null or o.aggregate_type = $3::text)
           and ($4::text is null or o.aggregate_id = $4::text)
       )
     for update of later`,
    params,
  );
  const { rows } = await db.query<RedrivenEvent>(
    `update ${names.qualified} as o
     set dead_lettered_at = null,
         attempts = 0,
         transient_failures = 0,
         available_at = now(),
         last_error = format('redriven at %s after %s attempts; last error: %s',
                             to_char(now() at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
                             o.attempts, coalesce(o.last_error, 'none'))
     from ${names.qualified} as d
     where d.id = o.id
       and o.dead_lettered_at is not null
       and ($1::uuid[] is null or o.id = any($1::uuid[]))
       and ($2::text is null or o.event_type = $2::text)
       and ($3::text is null or o.aggregate_type = $3::text)
       and ($4::text is null or o.aggregate_id = $4::text)
       and o.aggregate_id = any($5::text[])
     returning o.id, o.seq, o.aggregate_type, o.aggregate_id, o.event_type, d.attempts as previous_attempts,
               (exists (
                  select 1
                  from ${names.qualified} as later
                  where later.aggregate_id = o.aggregate_id
                    and later.seq > o.seq
                    and later.processed_at is not null
                ) or exists (
                  select 1
                  from ${names.related("group_high_water")} as h
                  where h.aggregate_id = o.aggregate_id and h.purged_published_seq > o.seq
                )) as overtaken`,
    [...params, groups],
  );
  return rows.sort((a, b) => Number(BigInt(a.seq) - BigInt(b.seq)));
}
