/**
 * What the live view and the summary of `npm start` read from the database. The database is the referee:
 * published, pending and the commit-to-publish lag come from the outbox rows themselves (processed_at minus
 * created_at), so they are right whichever process did the publishing and however often it was killed.
 */
import type pg from "pg";
import type { OutboxNames } from "../../functions/shared/outbox/names.ts";

export interface OutboxFigures {
  /** Unpublished, not dead-lettered rows in the whole outbox. */
  pending: number;
  /** Rows published since the run started. */
  published: number;
  /** Rows published within the window (for a rate). */
  publishedInWindow: number;
  /** Commit-to-publish lag percentiles over the window (or the whole run), ms; null before anything published. */
  lagP50Ms: number | null;
  lagP99Ms: number | null;
  /** Rows dead-lettered since the run started. */
  deadLetters: number;
}

/**
 * `since` is the database's own now() when the run began, so no clock skew between this process and the server
 * enters the lag; `windowSeconds` null means the whole run. The published rows are found through the
 * processed_at index, the pending ones through the pending index.
 */
export async function readOutboxFigures(
  db: pg.Pool,
  names: OutboxNames,
  since: Date,
  windowSeconds: number | null,
): Promise<OutboxFigures> {
  const { rows } = await db.query<{
    pending: string;
    published: string;
    windowed: string;
    lag: number[] | null;
    dead_letters: string;
  }>(
    `with published as (
       select processed_at, extract(epoch from processed_at - created_at) * 1000 as lag_ms
       from ${names.qualified}
       where processed_at >= $1::timestamptz
     ), windowed as (
       select lag_ms from published
       where $2::float8 is null or processed_at > now() - $2::float8 * interval '1 second'
     )
     select (select count(*) from published) as published,
            (select count(*) from windowed) as windowed,
            (select percentile_cont(array[0.5, 0.99]::float8[]) within group (order by lag_ms) from windowed) as lag,
            (select count(*) from ${names.qualified}
              where processed_at is null and dead_lettered_at is null) as pending,
            (select count(*) from ${names.qualified} where dead_lettered_at >= $1::timestamptz) as dead_letters`,
    [since, windowSeconds],
  );
  const row = rows[0];
  return {
    pending: Number(row?.pending ?? 0),
    published: Number(row?.published ?? 0),
    publishedInWindow: Number(row?.windowed ?? 0),
    lagP50Ms: row?.lag?.[0] ?? null,
    lagP99Ms: row?.lag?.[1] ?? null,
    deadLetters: Number(row?.dead_letters ?? 0),
  };
}

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
