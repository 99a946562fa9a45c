import type { Queryable } from "../../db/session.ts";
import type { OutboxNames } from "../../outbox/names.ts";

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
 * The statements, exported so a test can EXPLAIN them. Both read unpublished rows only, through the partial
 * indexes, so their cost follows the backlog, not the millions of published rows waiting for the purge:
 * - by event type: `processed_at is null` is exactly the pending_group index's predicate (0007), so the planner
 *   reads pending rows and dead letters through it (bitmap scan) and aggregates them in one pass;
 * - blocked aggregates: candidates (in backoff, or dead) come from the same index, and "is it the head?" is
 *   one pending_group descent per candidate, as in the claim query: blocked counts message groups
 *   (aggregate_id), the claim's ordering unit.
 */
export function outboxSnapshotStatements(names: OutboxNames) {
  return {
    byEventType: `select event_type,
              count(*) filter (where dead_lettered_at is null) as pending,
              count(*) filter (where dead_lettered_at is not null) as dead_letters,
              min(created_at) filter (where dead_lettered_at is null) as oldest_pending_created_at,
              now() as now
       from ${names.qualified}
       where processed_at is null
       group by event_type
       order by event_type`,
    blockedAggregates: `select count(*) as blocked_aggregates
       from ${names.qualified} as o
       where o.processed_at is null
         and (o.dead_lettered_at is not null
              or (o.attempts + o.transient_failures > 0 and o.available_at > now()))
         and o.seq = (
           select min(head.seq)
           from ${names.qualified} as head
           where head.aggregate_id = o.aggregate_id
             and head.processed_at is null
         )`,
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
