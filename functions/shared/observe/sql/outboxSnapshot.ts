import type { Queryable } from "../../db/session.ts";
import type { OutboxNames } from "../../outbox/names.ts";
import { deadPending, livePending } from "../../outbox/pendingPredicates.ts";

export interface EventTypeSnapshot {
  eventType: string;
  pending: number;
  deadLetters: number;
  /** Age of the type's oldest pending event (created_at); 0 when none is pending. */
  oldestPendingAgeSeconds: number;
}

export interface OutboxSnapshot {
  /** Unpublished, not dead-lettered rows: claimable now, in backoff, or delayed by their producer. */
  pending: number;
  /** now() - created_at of the oldest pending row; 0 when nothing is pending. */
  oldestPendingAgeSeconds: number;
  deadLetters: number;
  /**
   * Aggregates whose head (earliest unpublished event) is in backoff after a failure (the message's or SQS's),
   * or is a dead letter.
   * Dead heads are counted as strict-order mode sees them: in the default mode the aggregate's later events
   * flow past a dead letter, but the dead letter still needs an operator.
   */
  blockedAggregates: number;
  byEventType: EventTypeSnapshot[];
}

/**
 * The statements, exported so a test can EXPLAIN them. Both read unpublished rows only, through the two partial
 * indexes over them (0007's pending_group_live for live rows, 0014's pending_dead for dead letters), each
 * selected by its exact predicate, so their cost follows the backlog, not the millions of published rows
 * waiting for the purge:
 * - by event type: live and dead rows counted apart (a bitmap scan of each index), then summed per type;
 * - blocked aggregates: candidates (in backoff, or dead) come from the same indexes, and "is it the head?"
 *   compares with the smaller of the group's first live and first dead seq, one descent of each index per
 *   candidate, as in strict mode's claim: blocked counts message groups (aggregate_id), the claim's
 *   ordering unit.
 */
export function outboxSnapshotStatements(names: OutboxNames) {
  return {
    byEventType: `select event_type, sum(pending) as pending, sum(dead_letters) as dead_letters,
              min(oldest_pending_created_at) as oldest_pending_created_at, now() as now
       from (select event_type, count(*) as pending, 0 as dead_letters,
                    min(created_at) as oldest_pending_created_at
             from ${names.qualified}
             where ${livePending()}
             group by event_type
             union all
             select event_type, 0, count(*), null
             from ${names.qualified}
             where ${deadPending()}
             group by event_type) as counts
       group by event_type
       order by event_type`,
    blockedAggregates: `select count(*) as blocked_aggregates
       from (select o.aggregate_id, o.seq
             from ${names.qualified} as o
             where ${deadPending("o")}
             union all
             select o.aggregate_id, o.seq
             from ${names.qualified} as o
             where ${livePending("o")}
               and o.attempts + o.transient_failures > 0 and o.available_at > now()) as o
       where o.seq = least(
         (select min(head.seq) from ${names.qualified} as head
          where head.aggregate_id = o.aggregate_id and ${livePending("head")}),
         (select min(head.seq) from ${names.qualified} as head
          where head.aggregate_id = o.aggregate_id and ${deadPending("head")}))`,
  };
}

interface EventTypeRow {
  event_type: string;
  pending: string;
  dead_letters: string;
  oldest_pending_created_at: Date | null;
  now: Date;
}

/**
 * How the outbox stands: backlog, its age, dead letters, blocked aggregates, per event type. Used by the
 * purge Lambda for its CloudWatch figures and by the operator CLI's `outbox status`. Two statements; wrap
 * the call in a repeatable-read transaction if they must see the same instant.
 */
export async function outboxSnapshot(db: Queryable, names: OutboxNames): Promise<OutboxSnapshot> {
  const statements = outboxSnapshotStatements(names);
  const { rows } = await db.query<EventTypeRow>(statements.byEventType);
  const { rows: blocked } = await db.query<{ blocked_aggregates: string }>(statements.blockedAggregates);

  const byEventType = rows.map((row) => ({
    eventType: row.event_type,
    pending: Number(row.pending),
    deadLetters: Number(row.dead_letters),
    oldestPendingAgeSeconds: ageSeconds(row.oldest_pending_created_at, row.now),
  }));
  return {
    pending: sum(byEventType.map((type) => type.pending)),
    oldestPendingAgeSeconds: Math.max(0, ...byEventType.map((type) => type.oldestPendingAgeSeconds)),
    deadLetters: sum(byEventType.map((type) => type.deadLetters)),
    blockedAggregates: Number(blocked[0]?.blocked_aggregates ?? 0),
    byEventType,
  };
}

function ageSeconds(createdAt: Date | null, now: Date): number {
  return createdAt === null ? 0 : Math.max(0, (now.getTime() - createdAt.getTime()) / 1000);
}

function sum(values: number[]): number {
  return values.reduce((total, value) => total + value, 0);
}
