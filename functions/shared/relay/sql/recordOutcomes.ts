import type { Queryable } from "../../db/session.ts";
import type { OutboxNames } from "../../outbox/names.ts";
import { deadPending } from "../../outbox/pendingPredicates.ts";

export interface RowOutcome {
  id: string;
  published: boolean;
  /** For failures: the error stored in last_error (cut to MAX_ERROR_LENGTH here). */
  error?: string;
  /** For failures: the backoff before the next attempt (at most a day: the relay options' cap). */
  retryInMs?: number;
  /** For failures: give up on this row (attempts exhausted or an error that can never succeed). */
  deadLetter?: boolean;
  /**
   * For failures, which counter the failure adds to: `attempt` when the message itself was at fault (counts
   * towards RELAY_MAX_ATTEMPTS), `transient` when SQS failed on its side (outage, throttling, InternalError).
   */
  counts?: "attempt" | "transient";
}

/** last_error keeps the start of an error; SQS messages can echo a whole request. */
export const MAX_ERROR_LENGTH = 1_000;

/**
 * What happens to a published row (OUTBOX_RETENTION): `keep` marks it (processed_at) and leaves it to the purge;
 * `delete` deletes it in the round's transaction (migration 0011 says what stays to stand in for it).
 */
export type Retention = "keep" | "delete";

/**
 * Records a whole round in one statement: failed rows get one more attempt or transient failure, their error, the
 * next attempt time, and possibly dead_lettered_at; published rows get processed_at (`keep`) or are deleted
 * (`delete`). One statement instead of one per row keeps the round trip count constant (the seed's per-row UPDATE
 * is what makes the baseline slow) and the locks short. processed_at is clock_timestamp(), not now(): now() is the
 * transaction's start, before the publish, and would understate the publish lag.
 *
 * Why `delete` is cheaper (docs/benchmarks.md, "Retention modes"): marking writes a new version of the whole row,
 * payload included, and an entry in every index its new version matches (id, seq, processed_at), since
 * processed_at is in every partial index's predicate and so can never be a HOT update; a delete writes one small
 * record per row. In `delete`, the same statement also
 * - writes the group's high-water mark (0006) when the deleted event overtook a dead letter of its group (a dead
 *   letter with a smaller seq: one descent per deleted row of pending_dead (0014), which holds the dead letters
 *   only and is empty in a healthy outbox; no write otherwise), which is what redrive's "overtaken" check reads
 *   once the event is gone. Only the group's head is claimed, so a round never
 *   holds both a group's dead letter in the making and a successor that could overtake it;
 * - raises the counters row (0011) by the round's count and highest seq: one HOT update per round, which the
 *   order-key check and the published counts read. Parallel rounds queue on that row only from this statement to
 *   their commit.
 *
 * The statement cannot fail because of one row, since it records messages SQS has already accepted: a failure
 * would roll back every row's record, and the next round would resend them all, every round. So every value is
 * saturated or sanitized: counters stop at the integer maximum (`least(n, max - 1) + 1`, for a row put in by hand
 * with attempts = 2147483647), the backoff is at most a day past clock_timestamp() (far from timestamptz's end),
 * and the error text loses the NUL characters Postgres text refuses and is cut to MAX_ERROR_LENGTH characters.
 */
export async function recordOutcomes(
  db: Queryable,
  names: OutboxNames,
  outcomes: readonly RowOutcome[],
  retention: Retention = "keep",
) {
  if (outcomes.length === 0) return;
  const failures = outcomes.filter((outcome) => !outcome.published);
  // Published ids travel as one array and failures as their own (usually empty) arrays: a round that published
  // everything sends 250 ids, not six arrays of 250 mostly empty values, which Postgres parses and the statement
  // joins (measured: the record's round trip was 4x its execution in delete retention).
  await db.query(
    `with r as (
       select * from unnest($2::uuid[], $3::text[], $4::integer[], $5::boolean[], $6::text[])
         as r(id, error, retry_in_ms, dead_letter, counts)
     ),
     failed as (
       update ${names.qualified} as o
       set attempts = case when r.counts = 'attempt' then least(o.attempts, 2147483646) + 1 else o.attempts end,
           transient_failures = case when r.counts = 'transient' then least(o.transient_failures, 2147483646) + 1
                                     else o.transient_failures end,
           last_error = left(r.error, $7::integer),
           available_at = clock_timestamp() + r.retry_in_ms * interval '1 millisecond',
           dead_lettered_at = case when r.dead_letter then clock_timestamp() end
       from r
       where o.id = r.id
     ),
     ${retention === "delete" ? deletePublished(names) : markPublished(names)}
     select 1`,
    [
      outcomes.filter((outcome) => outcome.published).map((outcome) => outcome.id),
      failures.map((outcome) => outcome.id),
      failures.map((outcome) => (outcome.error === undefined ? null : storableText(outcome.error))),
      failures.map((outcome) => outcome.retryInMs ?? 0),
      failures.map((outcome) => outcome.deadLetter === true),
      failures.map((outcome) => outcome.counts ?? "attempt"),
      MAX_ERROR_LENGTH,
    ],
  );
}

function markPublished(names: OutboxNames) {
  return `published as (
       update ${names.qualified} as o
       set processed_at = clock_timestamp()
       where o.id = any($1::uuid[])
     )`;
}

function deletePublished(names: OutboxNames) {
  return `deleted as (
       delete from ${names.qualified} as o
       where o.id = any($1::uuid[])
       returning o.aggregate_id, o.seq
     ),
     marked as (
       insert into ${names.related("group_high_water")} as h (aggregate_id, purged_published_seq)
       select d.aggregate_id, max(d.seq)
       from deleted as d
       where exists (
         select 1 from ${names.qualified} as dead
         where dead.aggregate_id = d.aggregate_id and dead.seq < d.seq
           and ${deadPending("dead")}
       )
       group by d.aggregate_id
       on conflict (aggregate_id) do update set purged_published_seq = excluded.purged_published_seq
         where h.purged_published_seq < excluded.purged_published_seq
     ),
     counted as (
       update ${names.related("deleted_on_publish")} as c
       set events = c.events + d.events, highest_seq = greatest(c.highest_seq, d.highest_seq)
       from (select count(*) as events, max(seq) as highest_seq from deleted) as d
       where d.events > 0
     )`;
}

/** Text Postgres accepts: no NUL, no lone surrogate (a cut through a surrogate pair would leave one). */
function storableText(text: string): string {
  return text.slice(0, MAX_ERROR_LENGTH).replaceAll("\u0000", "").toWellFormed();
}
