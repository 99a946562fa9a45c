/**
 * What the summary of `npm start` reads from the database: this run's events against the outbox and the
 * consumer's inbox. The outbox's own figures are cli/dev/outboxFigures.ts's, shared with `outbox dev`.
 */
import type pg from "pg";
import type { OutboxNames } from "../../functions/shared/outbox/names.ts";

export interface Reconciliation {
  written: number;
  /** Written and not yet published (nor dead-lettered). */
  unpublished: number;
  deadLettered: number;
  /** Written but absent from the consumer's inbox: not (yet) consumed. */
  notConsumed: number;
}

/** This run's events (the ids the producer saw commit) against the outbox and the consumer's inbox. */
export async function reconcile(
  db: pg.Pool,
  names: OutboxNames,
  ids: readonly string[],
): Promise<Reconciliation> {
  const { rows } = await db.query<{ unpublished: string; dead_lettered: string; not_consumed: string }>(
    `select count(*) filter (where o.processed_at is null and o.dead_lettered_at is null) as unpublished,
            count(*) filter (where o.dead_lettered_at is not null) as dead_lettered,
            count(*) filter (where i.outbox_id is null) as not_consumed
     from unnest($1::uuid[]) as w(id)
     left join ${names.qualified} as o on o.id = w.id
     left join demo_consumer.inbox as i on i.outbox_id = w.id`,
    [ids],
  );
  const row = rows[0];
  return {
    written: ids.length,
    unpublished: Number(row?.unpublished ?? 0),
    deadLettered: Number(row?.dead_lettered ?? 0),
    notConsumed: Number(row?.not_consumed ?? 0),
  };
}

export function percentile(values: readonly number[], p: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? null;
}
