import type pg from "pg";
import type { Queryable } from "../../functions/shared/db/session.ts";
import { withTransaction } from "../../functions/shared/db/session.ts";
import { type OutboxNames, outboxNames } from "../../functions/shared/outbox/names.ts";
import { DEFAULT_RELAY_OPTIONS } from "../../functions/shared/relay/engine.ts";
import { claimBatch, newClaimCursor } from "../../functions/shared/relay/sql/claimBatch.ts";
import { type Retention, recordOutcomes } from "../../functions/shared/relay/sql/recordOutcomes.ts";
import { type BacklogShape, resetOutbox, seedBacklog, seedPublished } from "../lib/benchDatabase.ts";
import { percentile } from "../lib/stats.ts";

export interface ClaimTimings {
  /** Claims over all runs; p50 and p99 pool them. */
  claims: number;
  p50: number;
  p99: number;
  /** Each run's percentiles, in run order: the target must hold in every one. */
  runs?: { claims: number; p50: number; p99: number }[];
  /** The five slowest claims, ms: tells a noisy neighbour (one or two spikes) from a slow plan. */
  slowest: number[];
  /** From EXPLAIN (ANALYZE, BUFFERS) of one claim. */
  explain: { executionMs: number; planningMs: number; sharedHit: number; sharedRead: number; plan: string };
}

export interface ClaimAtScale {
  publishedRows: number;
  pendingRows: number;
  /** Statistics gathered with the backlog in the table (ANALYZE after it arrived). */
  fresh: ClaimTimings;
  /**
   * Statistics gathered before the backlog arrived, when no row was pending: the normal state of a healthy
   * outbox (the relay keeps up, so ANALYZE sees processed_at null in ~0 rows), until autovacuum's next ANALYZE.
   */
  stale: ClaimTimings;
  /**
   * The same table after one more aggregate received `hotRows` waiting rows (a hot aggregate fell behind),
   * statistics still from before it: the claim must cost what it cost without it.
   */
  hot: ClaimTimings & { hotRows: number };
  /**
   * Per retention mode: `publishedRows` events published through the mode's own record statement (mark or
   * delete, in the relay's batches), then the backlog, claimed before vacuum has run: what the claim meets right
   * after a large drain, when the pending index still holds the published rows' dead entries.
   */
  afterPublishedBy?: { retention: Retention; recordMs: number; claims: ClaimTimings }[];
}

const FRESH_CLAIMS = 300;
/** Fewer: each stale-statistics claim can take tens of milliseconds. */
const STALE_CLAIMS = 50;
/** Sets of claims per statistics state, back to back: a p99 per set, so one noisy set shows as what it is. */
const CLAIM_RUNS = 3;

/**
 * (6) The claim query on a big table: 1M published rows waiting for the purge and a pending backlog, then the
 * same plus one aggregate with `hotRows` waiting rows (a set-based INSERT ... SELECT generate_series). Each claim
 * runs in its own transaction with the relay's settings and is rolled back, so every claim sees the same rows;
 * the client-observed time of the claim statement alone is reported. Measured twice: with the statistics
 * VACUUM ANALYZE took before the backlog arrived (no pending rows then), and after an ANALYZE that saw it.
 */
export async function measureClaimAtScale(
  pool: pg.Pool,
  publishedRows: number,
  pending: BacklogShape,
  hotRows: number,
): Promise<ClaimAtScale> {
  await resetOutbox(pool);
  await seedPublished(pool, publishedRows);
  await pool.query("vacuum analyze outbox_events");
  // 10k changes stay under autovacuum's analyze threshold (50 + 2% of 1M rows), so these statistics stay stale.
  await seedBacklog(pool, pending, "order", false);
  const stale = await timeClaims(pool, STALE_CLAIMS);
  await pool.query("analyze outbox_events");
  const fresh = await timeClaims(pool, FRESH_CLAIMS);
  await seedBacklog(pool, { events: hotRows, aggregates: 1 }, "hot", false);
  const hot = { ...(await timeClaims(pool, FRESH_CLAIMS)), hotRows };
  const afterPublishedBy = [];
  for (const retention of ["keep", "delete"] as const) {
    afterPublishedBy.push(await claimAfterPublishing(pool, publishedRows, pending, retention));
  }
  return { publishedRows, pendingRows: pending.events, fresh, stale, hot, afterPublishedBy };
}

/**
 * `published` pending rows over 5,000 groups, published through recordOutcomes in the mode (batches of 1,000 by
 * seq, one transaction each), then the backlog; autovacuum is off on the table meanwhile, so the claims meet every
 * dead entry the record left (the worst case until autovacuum's next pass).
 */
async function claimAfterPublishing(
  pool: pg.Pool,
  published: number,
  pending: BacklogShape,
  retention: Retention,
) {
  await resetOutbox(pool);
  await pool.query("alter table outbox_events set (autovacuum_enabled = off)");
  try {
    // In slices: one INSERT takes the commit-order trigger's advisory lock of every group it writes, and the
    // server's lock table holds a few thousand.
    for (let seeded = 0; seeded < published; seeded += 100_000) {
      await seedBacklog(
        pool,
        { events: Math.min(100_000, published - seeded), aggregates: 5_000 },
        "old",
        false,
      );
    }
    const names = outboxNames();
    const started = performance.now();
    let after = "0";
    for (;;) {
      const rows = await withTransaction(pool, async (client) => {
        const { rows } = await client.query<{ id: string; seq: string }>(
          "select id, seq from outbox_events where seq > $1::bigint order by seq limit 1000 for update",
          [after],
        );
        const outcomes = rows.map((row) => ({ id: row.id, published: true }));
        await recordOutcomes(client, names, outcomes, retention);
        return rows;
      });
      if (rows.length === 0) break;
      after = rows[rows.length - 1]?.seq ?? after;
    }
    const recordMs = performance.now() - started;
    await seedBacklog(pool, pending, "order");
    return { retention, recordMs, claims: await timeClaims(pool, FRESH_CLAIMS) };
  } finally {
    await pool.query("alter table outbox_events reset (autovacuum_enabled)");
  }
}

export async function timeClaims(pool: pg.Pool, claims: number): Promise<ClaimTimings> {
  const names = outboxNames();
  const limit = DEFAULT_RELAY_OPTIONS.batchSize;
  const timings: number[] = [];
  const runs: NonNullable<ClaimTimings["runs"]> = [];
  // Carried from claim to claim as the relay loop does: each claim continues the round robin over aggregates.
  const cursor = newClaimCursor();
  const client = await pool.connect();
  try {
    for (let run = 0; run < CLAIM_RUNS; run++) {
      const runTimings: number[] = [];
      for (let i = 0; i < claims; i++) {
        await client.query("begin");
        await client.query("select set_config('statement_timeout', $1, true)", [
          String(DEFAULT_RELAY_OPTIONS.statementTimeoutMs),
        ]);
        const started = performance.now();
        const rows = await claimBatch(client, names, { limit, strictOrder: false, cursor });
        runTimings.push(performance.now() - started);
        await client.query("rollback");
        if (rows.length !== limit) throw new Error(`claim returned ${rows.length} rows, expected ${limit}`);
      }
      runs.push({ claims, p50: percentile(runTimings, 50), p99: percentile(runTimings, 99) });
      timings.push(...runTimings);
    }
    return {
      claims: timings.length,
      runs,
      p50: percentile(timings, 50),
      p99: percentile(timings, 99),
      slowest: [...timings].sort((a, b) => b - a).slice(0, 5),
      explain: await explainClaim(client, names, limit),
    };
  } finally {
    await client.query("rollback").catch(() => {});
    client.release();
  }
}

/** Captures the claim's SQL by running claimBatch against a recorder, then EXPLAINs it (rolled back). */
async function explainClaim(client: pg.PoolClient, names: OutboxNames, limit: number) {
  let captured: { text: string; values: unknown[] } | undefined;
  const recorder: Queryable = {
    async query(text: string, values?: unknown[]) {
      captured = { text, values: values ?? [] };
      return { rows: [], rowCount: 0 };
    },
  };
  await claimBatch(recorder, names, { limit, strictOrder: false });
  if (captured === undefined) throw new Error("claimBatch ran no query");
  await client.query("begin");
  try {
    const { rows } = await client.query<{ "QUERY PLAN": ExplainJson[] }>(
      `explain (analyze, buffers, format json) ${captured.text}`,
      captured.values,
    );
    const [root] = rows[0]?.["QUERY PLAN"] ?? [];
    if (root === undefined) throw new Error("EXPLAIN returned no plan");
    return {
      executionMs: root["Execution Time"],
      planningMs: root["Planning Time"],
      sharedHit: root.Plan["Shared Hit Blocks"] ?? 0,
      sharedRead: root.Plan["Shared Read Blocks"] ?? 0,
      plan: planOutline(root.Plan),
    };
  } finally {
    await client.query("rollback");
  }
}

interface PlanNode {
  "Node Type": string;
  "Join Type"?: string;
  "Index Name"?: string;
  "Index Cond"?: string;
  "Actual Rows"?: number;
  "Actual Loops"?: number;
  "Rows Removed by Join Filter"?: number;
  "Shared Hit Blocks"?: number;
  "Shared Read Blocks"?: number;
  Plans?: PlanNode[];
}
interface ExplainJson {
  Plan: PlanNode;
  "Planning Time": number;
  "Execution Time": number;
}

/** `Limit > LockRows > Nested Loop Anti [Index Scan using outbox_pending_seq (rows=100) ...]`, one line. */
function planOutline(node: PlanNode): string {
  const parts = [
    node["Node Type"],
    node["Join Type"],
    node["Index Name"] ? `using ${node["Index Name"]}` : undefined,
    node["Index Cond"] ? "(index cond)" : undefined,
    `rows=${node["Actual Rows"]}×${node["Actual Loops"]}`,
    node["Rows Removed by Join Filter"]
      ? `join filter removed ${node["Rows Removed by Join Filter"]}`
      : undefined,
  ];
  const label = parts.filter((part) => part !== undefined).join(" ");
  // Parts of the plan that never ran (the wrap-around half of the walk, the gated scan end) say nothing.
  const children = (node.Plans ?? []).filter((child) => child["Actual Loops"] !== 0).map(planOutline);
  if (children.length === 0) return label;
  return `${label} > ${children.length === 1 ? children[0] : `[${children.join("; ")}]`}`;
}
