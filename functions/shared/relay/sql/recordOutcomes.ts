import type { Queryable } from "../../db/session.ts";
import type { OutboxNames } from "../../outbox/names.ts";

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
 * Records a whole round in one UPDATE: published rows get processed_at; failed rows get one more attempt or
 * transient failure, their error, the next attempt time, and possibly dead_lettered_at. One statement instead of
 * one per row keeps the round trip count constant (the seed's per-row UPDATE is what makes the baseline slow) and
 * the locks short. processed_at is clock_timestamp(), not now(): now() is the transaction's start, before the
 * publish, and would understate the publish lag.
 *
 * The statement cannot fail because of one row, since it records messages SQS has already accepted: a failure
 * would roll back every row's record, and the next round would resend them all, every round. So every value is
 * saturated or sanitized: counters stop at the integer maximum (`least(n, max - 1) + 1`, for a row put in by hand
 * with attempts = 2147483647), the backoff is at most a day past clock_timestamp() (far from timestamptz's end),
 * and the error text loses the NUL characters Postgres text refuses and is cut to MAX_ERROR_LENGTH characters.
 */
export async function recordOutcomes(db: Queryable, names: OutboxNames, outcomes: readonly RowOutcome[]) {
  if (outcomes.length === 0) return;
  await db.query(
    `update ${names.qualified} as o
     set processed_at = case when r.published then clock_timestamp() end,
         attempts = case when r.counts = 'attempt' then least(o.attempts, 2147483646) + 1 else o.attempts end,
         transient_failures = case when r.counts = 'transient' then least(o.transient_failures, 2147483646) + 1
                                   else o.transient_failures end,
         last_error = case when r.published then o.last_error else left(r.error, $7::integer) end,
         available_at = case when r.published then o.available_at
                             else clock_timestamp() + r.retry_in_ms * interval '1 millisecond' end,
         dead_lettered_at = case when r.dead_letter then clock_timestamp() end
     from unnest($1::uuid[], $2::boolean[], $3::text[], $4::integer[], $5::boolean[], $6::text[])
          as r(id, published, error, retry_in_ms, dead_letter, counts)
     where o.id = r.id`,
    [
      outcomes.map((outcome) => outcome.id),
      outcomes.map((outcome) => outcome.published),
      outcomes.map((outcome) => (outcome.error === undefined ? null : storableText(outcome.error))),
      outcomes.map((outcome) => outcome.retryInMs ?? 0),
      outcomes.map((outcome) => outcome.deadLetter === true),
      outcomes.map((outcome) => (outcome.published ? null : (outcome.counts ?? "attempt"))),
      MAX_ERROR_LENGTH,
    ],
  );
}

/** Text Postgres accepts: no NUL, no lone surrogate (a cut through a surrogate pair would leave one). */
function storableText(text: string): string {
  return text.slice(0, MAX_ERROR_LENGTH).replaceAll("\u0000", "").toWellFormed();
}
