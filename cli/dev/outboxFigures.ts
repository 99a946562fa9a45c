/**
 * What the live views of `outbox dev` and `npm start` read from the database. The database is the referee:
 * published, pending and the commit-to-publish lag come from the outbox rows themselves (processed_at minus
 * created_at), so they are right whichever process did the publishing and however often it was killed.
 */
import type { Queryable } from "../../functions/shared/db/session.ts";
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
  /** Age of the oldest pending row, ms; null when nothing is pending. */
  oldestPendingMs: number | null;
}

/**
 * `since` is the database's own now() when the run began, so no clock skew between this process and the server
 * enters the lag; `windowSeconds` null means the whole run. The published rows are found through the
 * processed_at index, the pending ones through the pending index.
 */
export async function readOutboxFigures(
  db: Queryable,
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
    oldest_pending_ms: number | null;
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
            (select count(*) from ${names.qualified} where dead_lettered_at >= $1::timestamptz) as dead_letters,
            (select extract(epoch from now() - min(created_at)) * 1000 from ${names.qualified}
              where processed_at is null and dead_lettered_at is null)::float8 as oldest_pending_ms`,
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
    oldestPendingMs: row?.oldest_pending_ms ?? null,
  };
}
