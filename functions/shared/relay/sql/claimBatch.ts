import type { Queryable } from "../../db/session.ts";
import { MAX_DELAY_MS } from "../../outbox/message.ts";
import type { OutboxNames } from "../../outbox/names.ts";
import { deadPending, livePending } from "../../outbox/pendingPredicates.ts";
import type { ClaimedRow } from "../../outbox/row.ts";

/**
 * A message group (aggregate_id, the SQS MessageGroupId): the claim's ordering unit and the position of its
 * round robin. Aggregates of different types that share an id share the group, and its order (issue 21).
 */
export interface GroupKey {
  aggregateId: string;
}

/**
 * Where the next claim continues its round robin over pending aggregates. Owned by one relay loop and
 * updated by every claimBatch call; start each loop with `newClaimCursor()`.
 */
export interface ClaimCursor {
  /** The last group the previous claim examined; the next claim starts after it. */
  after: GroupKey;
  /** Where the current run of short, capped claims started (see `sawAll`); null outside such a run. */
  sweepOrigin: GroupKey | null;
  /**
   * After a claim that did not fill its batch: true once every pending aggregate was examined, by this claim
   * or by the run of capped claims before it, so an empty result means nothing is claimable right now. False
   * after a full batch or a claim that stopped at its examine cap: more may be claimable, claim again.
   */
  sawAll: boolean;
}

/** Start of the key space: every aggregate_id is longer than zero characters (0001's checks). */
const START: GroupKey = { aggregateId: "" };

export function newClaimCursor(): ClaimCursor {
  return { after: START, sweepOrigin: null, sawAll: false };
}

/**
 * Aggregates examined per claim at most, as a multiple of the batch: room to skip heads that are blocked
 * (locked by another relay, in backoff, delayed, dead in strict mode) and still fill a batch, e.g. the heads
 * locked by three other relays. Measured: a blocked aggregate costs ≈ 8 buffers (walk, locking probe, heap), a
 * claim that examines 1,000 blocked ones 8,071 buffers and 41-69 ms on the 2-core machine at load average 20.
 * A claim that claims nothing therefore costs at most that; the relay loop paces such claims like idle polls.
 */
export const EXAMINE_PER_CLAIMED_ROW = 10;

interface ClaimRow extends ClaimedRow {
  scan_lap: number | null;
  scan_n: number | null;
  scan_end_lap: number | null;
  scan_end_id: string | null;
  scan_examined: string | null;
  scan_end_reaches_origin: boolean | null;
  cursor_reaches_origin: boolean | null;
}

/**
 * The claim returns no payload or headers: they can be large (or, inserted by hand, huge), so they are sized in
 * SQL and loaded separately within the round's byte budget (loadPayloads.ts).
 *
 * Locks up to `limit` publishable rows for the rest of the caller's transaction: at most one per message group
 * (aggregate_id: what SQS groups by, so Order/42 and Shipment/42 are one group; "aggregate" below means the
 * group), its *head*, the smallest seq among its unpublished rows (dead letters included in strict mode, parked
 * otherwise). That one rule gives every ordering guarantee: a head locked by another relay is skipped (SKIP
 * LOCKED) and its successors are never looked at; a head in backoff or delayed (available_at in the future)
 * or dead in strict mode is not claimable and blocks its aggregate the same way.
 *
 * Shape: a loose index scan. A recursive CTE walks the pending aggregates in key order, one index descent per
 * aggregate ("the first entry after the previous aggregate's key"): the entry it lands on is that aggregate's
 * head, whatever waits behind it. Each candidate head is then re-read by key and locked in a LATERAL
 * subquery (FOR UPDATE SKIP LOCKED cannot sit inside a recursive CTE), with the claimable test (not dead, not
 * published, available) rechecked on the locked version. A head delayed beyond MAX_DELAY_MS is claimed too,
 * flagged `delayed_beyond`, so the round dead-letters it as malformed rather than leave its group blocked. The LIMIT sits above the lateral, so locked or
 * blocked heads do not count towards it: the claim moves on to the next aggregate until the batch is full or
 * it has examined `EXAMINE_PER_CLAIMED_ROW` × limit aggregates. The cost is thus one or two descents per
 * aggregate examined, never per waiting row: measured (bench (6)) 1.6 ms of execution and 909 buffers per claim
 * of 100 with 1,000,000 rows waiting behind one head and stale statistics, against 1.5 ms and 709 buffers
 * without that aggregate; the previous query (walking `pending_seq` and probing every row's head) took 1.4 s at
 * 200,000 waiting rows and passed the statement timeout at 1,000,000.
 *
 * Round robin: each claim starts after the last aggregate the previous one examined (`cursor`) and wraps to
 * the start of the key space, so with few pending aggregates every claim sees them all, and with a backlog
 * every aggregate gets its turn every (pending aggregates / batch) rounds; a hot aggregate cannot starve the
 * others, and a long run of blocked aggregates (say 100,000 in backoff after an SQS outage) is crossed a
 * bounded window at a time. The two halves of the wrap are two recursive CTEs appended in order; Postgres
 * evaluates a CTE only as far as its reader pulls, so a claim that fills its batch early stops descending.
 * Which row was the last examined is known only when the batch was not filled (then every candidate was
 * read); `scan_end` reports it, gated by a one-time filter so a full claim does not read further.
 *
 * Why the indexes (0007, 0014; 0003's by type and id before the group became the unit): in the default mode
 * `pending_group_live` (aggregate_id, seq) holds live pending rows only, so a parked dead letter is never
 * walked over; strict mode walks it and `pending_dead` (the same key over unpublished dead letters, empty in a
 * healthy outbox) side by side, one descent in each per step, so a dead head blocks its group. One index of
 * every unpublished row would serve strict mode with one descent, but every insert would pay its entry
 * (0014: ~80 B of WAL per event). `pending_seq` was dropped: with statistics taken
 * when nothing was pending (a healthy outbox's normal state), the planner preferred reading all of it and
 * sorting for each step (30 s for one claim above). test/relay/claim.plan.test.ts checks the plan on such statistics.
 * Dead index entries of just-published rows sit in front of an aggregate's head until vacuum (0001 runs it at
 * 1 % churn); the scan skips them as it would a dead tuple anywhere.
 */
export async function claimBatch(
  db: Queryable,
  names: OutboxNames,
  options: { limit: number; strictOrder: boolean; cursor?: ClaimCursor },
): Promise<ClaimedRow[]> {
  const cursor = options.cursor ?? newClaimCursor();
  const origin = cursor.sweepOrigin ?? cursor.after;
  const examine = options.limit * EXAMINE_PER_CLAIMED_ROW;
  // The first unpublished row past `where` in key order: in the default mode the first live one
  // (pending_group_live); in strict mode the smaller of the first live one and the first dead one (pending_dead,
  // migration 0014), which is the next group's head whether that head is live or dead.
  const firstIn = (pending: string, where: string) =>
    `(select p.aggregate_id, p.seq
      from ${names.qualified} as p
      where ${pending} and ${where}
      order by p.aggregate_id, p.seq
      limit 1)`;
  const first = (where: string) =>
    options.strictOrder
      ? `(select h.aggregate_id, h.seq
          from (${firstIn(livePending("p"), where)} union all ${firstIn(deadPending("p"), where)}) as h
          order by h.aggregate_id, h.seq
          limit 1)`
      : firstIn(livePending("p"), where);
  const walk = (name: string, bound: string) =>
    `${name} as (
       (select f.aggregate_id, f.seq, 1 as n from ${first(bound)} as f)
       union all
       select next.aggregate_id, next.seq, prev.n + 1
       from ${name} as prev
       cross join lateral ${first(`p.aggregate_id > prev.aggregate_id and ${bound}`)} as next
       where prev.n < $3::integer
     )`;
  const { rows } = await db.query<ClaimRow>(
    `with recursive
     ${walk("after_cursor", "p.aggregate_id > $2::text")},
     ${walk("up_to_cursor", "p.aggregate_id <= $2::text")},
     candidates as (
       select 0 as lap, * from after_cursor
       union all
       select 1 as lap, * from up_to_cursor
       limit $3::integer
     ),
     claimed as (
       select o.*, c.lap as scan_lap, c.n as scan_n
       from candidates as c
       cross join lateral (
         select o.id, o.seq, o.aggregate_type, o.aggregate_id, o.event_type, o.attempts, o.transient_failures,
                o.created_at, o.traceparent, o.tracestate,
                case when o.available_at > now() + $5::bigint * interval '1 millisecond'
                     then o.available_at::text end as delayed_beyond
         from ${names.qualified} as o
         where o.aggregate_id = c.aggregate_id and o.seq = c.seq
           and ${livePending("o")}
           and (o.available_at <= now() or o.available_at > now() + $5::bigint * interval '1 millisecond')
         for update skip locked
       ) as o
       limit $1::integer
     ),
     scan_end as (
       select c.lap as scan_end_lap, c.aggregate_id as scan_end_id,
              count(*) over () as scan_examined,
              c.aggregate_id >= $4::text as scan_end_reaches_origin,
              $2::text >= $4::text as cursor_reaches_origin
       from candidates as c
       where (select count(*) from claimed) < $1::integer
       order by c.lap desc, c.n desc
       limit 1
     )
     select claimed.*, scan_end.*
     from (values (1)) as one
     left join claimed on true
     left join scan_end on true`,
    [options.limit, cursor.after.aggregateId, examine, origin.aggregateId, MAX_DELAY_MS],
  );
  const claimed = rows.filter((row) => row.id !== null);
  advance(cursor, claimed, rows[0], { limit: options.limit, examine, origin });
  return claimed.map(
    ({
      scan_lap,
      scan_n,
      scan_end_lap,
      scan_end_id,
      scan_examined,
      scan_end_reaches_origin,
      cursor_reaches_origin,
      ...row
    }) => row,
  );
}

/**
 * Moves the cursor past what this claim examined. A full batch ends at its last claimed row (the scan stopped
 * there). A short one read every candidate: it ends at the last one, and it saw every pending aggregate if it
 * examined fewer than its cap, or if the run of capped claims it belongs to has come round to where the run
 * began (the sweep origin lies within (cursor, scan end], taking the wrap into account).
 */
function advance(
  cursor: ClaimCursor,
  claimed: ClaimRow[],
  first: ClaimRow | undefined,
  scan: { limit: number; examine: number; origin: GroupKey },
) {
  if (claimed.length === scan.limit) {
    const last = claimed.reduce((a, b) =>
      (b.scan_lap ?? 0) > (a.scan_lap ?? 0) ||
      ((b.scan_lap ?? 0) === (a.scan_lap ?? 0) && (b.scan_n ?? 0) > (a.scan_n ?? 0))
        ? b
        : a,
    );
    cursor.after = { aggregateId: last.aggregate_id };
    cursor.sweepOrigin = null;
    cursor.sawAll = false;
    return;
  }
  if (first === undefined || first.scan_end_id === null) {
    // Nothing pending at all.
    cursor.after = START;
    cursor.sweepOrigin = null;
    cursor.sawAll = true;
    return;
  }
  const startedBeforeOrigin = first.cursor_reaches_origin === false;
  const endsAtOrPastOrigin = first.scan_end_reaches_origin === true;
  const examinedAll = Number(first.scan_examined) < scan.examine;
  const reachedOrigin =
    first.scan_end_lap === 1
      ? startedBeforeOrigin || endsAtOrPastOrigin
      : startedBeforeOrigin && endsAtOrPastOrigin;
  cursor.after = { aggregateId: first.scan_end_id };
  cursor.sawAll = examinedAll || reachedOrigin;
  cursor.sweepOrigin = cursor.sawAll ? null : scan.origin;
}
