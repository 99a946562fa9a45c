import type pg from "pg";
import { withTransaction } from "../../functions/shared/db/session.ts";
import { DEFAULT_RELAY_OPTIONS } from "../../functions/shared/relay/engine.ts";
import type { Retention } from "../../functions/shared/relay/sql/recordOutcomes.ts";
import { type BacklogShape, resetOutbox, seedBacklog } from "../lib/benchDatabase.ts";
import type { CpuMeter } from "../lib/cpuMeter.ts";
import type { BenchSqsEndpoint } from "../lib/sqsEndpoint.ts";
import { median } from "../lib/stats.ts";
import { formatNumber, markdownTable } from "../lib/table.ts";
import { timeClaims } from "./claimAtScale.ts";
import { measureDbLimit } from "./dbLimit.ts";
import { measureRelay, type RelayRun } from "./relayThroughput.ts";
import { lsn, lsnDiff, measureWalPerEvent, type WalPerEventRun } from "./walPerEvent.ts";

export const RETENTIONS: readonly Retention[] = ["keep", "delete"];

/** One retention mode's figures, each the median of the runs (interleaved with the other mode's). */
export interface RetentionModeRun {
  retention: Retention;
  wal: WalPerEventRun[];
  /** Rows per second, claim + record only (measures/dbLimit.ts). */
  dbLimit: number[];
  relay0ms: RelayRun[];
  relay20ms: RelayRun[];
  /** Claim p50/p99 (ms) over a fresh backlog right after the DB-only drains published `published` events. */
  claimAfterPublished: { published: number; p50: number; p99: number };
}

/** WAL per event of one way to record "published", SQL only (no SQS), on the bench's backlog. */
export interface RecordVariant {
  variant: string;
  walBytesPerEvent: number;
  /** Share of the updated rows that were HOT updates (pg_stat_user_tables), where the variant updates. */
  hotShare: number | null;
}

/**
 * Ways to record that a batch of 250 rows was published, each on a freshly seeded backlog, one statement per batch
 * in its own transaction as the relay's round does. `mark` is the shipped keep mode; `delete` the new mode without
 * its group marks and counter (the relay measurement has them); `hot mark` updates a column no index mentions on a
 * table with fillfactor 70, the floor any in-place "published" flag could reach (the relay's processed_at is in
 * every partial index's predicate, so it is never HOT); `mark (keep), fillfactor 50` is the shipped mark on a table
 * whose pages keep half their room free, so the new version lands on the old one's page: Postgres then logs only
 * the bytes that changed (heapam.c, log_heap_update's prefix/suffix compression, same page and wal_level below
 * logical) and no second lock record, at twice the table's pages; `status table` inserts the id into a narrow table with a
 * primary key, the floor of a side table.
 */
const VARIANTS: { variant: string; setup?: string; record: string; teardown?: string }[] = [
  {
    variant: "mark (keep)",
    record: "update outbox_events set processed_at = clock_timestamp() where id = any($1)",
  },
  {
    variant: "mark (keep), fillfactor 50",
    setup: "alter table outbox_events set (fillfactor = 50)",
    record: "update outbox_events set processed_at = clock_timestamp() where id = any($1)",
    teardown: "alter table outbox_events reset (fillfactor)",
  },
  { variant: "delete", record: "delete from outbox_events where id = any($1)" },
  {
    variant: "hot mark, fillfactor 70",
    setup: "alter table outbox_events set (fillfactor = 70)",
    record: "update outbox_events set last_error = 'published' where id = any($1)",
    teardown: "alter table outbox_events reset (fillfactor)",
  },
  {
    variant: "status table",
    setup: "create table bench_published (id uuid primary key, published_at timestamptz not null)",
    record: "insert into bench_published select unnest($1::uuid[]), clock_timestamp()",
    teardown: "drop table bench_published",
  },
];

export async function measureRecordVariants(pool: pg.Pool, shape: BacklogShape): Promise<RecordVariant[]> {
  const results: RecordVariant[] = [];
  for (const { variant, setup, record, teardown } of VARIANTS) {
    await resetOutbox(pool);
    if (setup !== undefined) await pool.query(setup);
    try {
      await seedBacklog(pool, shape);
      await pool.query("vacuum outbox_events");
      const { rows: ids } = await pool.query<{ id: string }>("select id from outbox_events order by seq");
      const before = await tableWrites(pool);
      const from = await lsn(pool);
      const batch = DEFAULT_RELAY_OPTIONS.batchSize;
      for (let i = 0; i < ids.length; i += batch) {
        const slice = ids.slice(i, i + batch).map((row) => row.id);
        await withTransaction(pool, (client) => client.query(record, [slice]));
      }
      const walBytes = await lsnDiff(pool, { from, to: await lsn(pool) });
      await pool.query("select pg_stat_force_next_flush()");
      const after = await tableWrites(pool);
      const updates = after.updates - before.updates;
      results.push({
        variant,
        walBytesPerEvent: walBytes / ids.length,
        hotShare: updates > 0 ? (after.hot - before.hot) / updates : null,
      });
    } finally {
      if (teardown !== undefined) await pool.query(teardown);
    }
  }
  await resetOutbox(pool);
  return results;
}

async function tableWrites(pool: pg.Pool): Promise<{ updates: number; hot: number }> {
  const { rows } = await pool.query<{ n_tup_upd: string; n_tup_hot_upd: string }>(
    "select n_tup_upd, n_tup_hot_upd from pg_stat_user_tables where relname = 'outbox_events'",
  );
  return { updates: Number(rows[0]?.n_tup_upd ?? 0), hot: Number(rows[0]?.n_tup_hot_upd ?? 0) };
}

/**
 * (14) Each retention mode side by side in one run, `repeats` times interleaved: WAL per event by stage and dead
 * tuples (walPerEvent.ts), the DB-only limit (claim + record), the relay draining the backlog at 0 and 20 ms, and
 * the claim's p50/p99 on a fresh backlog behind the events the DB-only drains published (keep: their rows wait for
 * the purge; delete: only their dead versions wait for vacuum, with autovacuum as configured).
 */
export async function measureRetentionModes(
  pool: pg.Pool,
  endpoint: BenchSqsEndpoint,
  meter: CpuMeter,
  options: { backlog: BacklogShape; claimBacklog: BacklogShape; repeats: number; latencyMs: number },
  log: (message: string) => void = () => {},
): Promise<RetentionModeRun[]> {
  const tuning = {
    batchSize: DEFAULT_RELAY_OPTIONS.batchSize,
    concurrency: DEFAULT_RELAY_OPTIONS.concurrency,
  };
  const runs = new Map(
    RETENTIONS.map((retention) => [
      retention,
      {
        retention,
        wal: [] as WalPerEventRun[],
        dbLimit: [] as number[],
        relay0ms: [] as RelayRun[],
        relay20ms: [] as RelayRun[],
        claimAfterPublished: { published: 0, p50: 0, p99: 0 },
      },
    ]),
  );
  for (let i = 0; i < options.repeats; i++) {
    for (const retention of RETENTIONS) {
      const run = runs.get(retention);
      if (run === undefined) continue;
      log(`retention ${retention}, run ${i + 1}: WAL by stage`);
      run.wal.push(await measureWalPerEvent(pool, endpoint, options.backlog.events, 1_000, retention));
      log(`retention ${retention}, run ${i + 1}: relay at 0 and ${options.latencyMs} ms, DB-only limit`);
      const mode = { ...tuning, retention };
      run.relay0ms.push(await measureRelay(pool, endpoint, options.backlog, mode, 0, meter));
      run.relay20ms.push(await measureRelay(pool, endpoint, options.backlog, mode, options.latencyMs, meter));
      // Last: its published rows (or dead versions) stay for the claim timing below.
      run.dbLimit.push(await measureDbLimit(pool, options.backlog, tuning.batchSize, retention));
      if (i === options.repeats - 1) {
        await seedBacklog(pool, options.claimBacklog, "claim");
        const claims = await timeClaims(pool, 300);
        run.claimAfterPublished = { published: options.backlog.events, p50: claims.p50, p99: claims.p99 };
      }
    }
  }
  await endpoint.setLatency(0);
  return [...runs.values()];
}

export function retentionMarkdown(runs: RetentionModeRun[], variants: RecordVariant[]): string {
  const n = (value: number, digits = 0) => formatNumber(value, digits);
  const med = (values: number[]) => median(values);
  const keep = runs.find((run) => run.retention === "keep");
  /** " (1.62× keep)" beside a figure of another mode than keep, measured in the same run. */
  const ratio = (run: RetentionModeRun, figure: (r: RetentionModeRun) => number) =>
    keep === undefined || run === keep ? "" : ` (${n(figure(run) / figure(keep), 2)}× keep)`;
  const modes = markdownTable(
    [
      "retention",
      "WAL enqueue",
      "relay",
      "purge",
      "vacuum",
      "total",
      "vacuum removed",
      "DB-only limit",
      "relay 0 ms",
      "relay 20 ms",
      "relay CPU per 1k events (0 ms)",
      "claim p50 / p99",
    ],
    runs.map((run) => [
      run.retention,
      `${n(med(run.wal.map((w) => w.bytesPerEvent.enqueue)))} B`,
      `${n(med(run.wal.map((w) => w.bytesPerEvent.relay)))} B`,
      `${n(med(run.wal.map((w) => w.bytesPerEvent.purge)))} B`,
      `${n(med(run.wal.map((w) => w.bytesPerEvent.vacuum)))} B`,
      `**${n(med(run.wal.map((w) => w.bytesPerEvent.total)))} B**`,
      n(med(run.wal.map((w) => w.deadTuplesPerEvent ?? 0)), 2),
      `${n(med(run.dbLimit))} rows/s${ratio(run, (r) => med(r.dbLimit))}`,
      `${n(med(run.relay0ms.map((r) => r.eventsPerSecond)))} ev/s${ratio(run, (r) => med(r.relay0ms.map((x) => x.eventsPerSecond)))}`,
      `${n(med(run.relay20ms.map((r) => r.eventsPerSecond)))} ev/s`,
      `${n(med(run.relay0ms.map((r) => r.cpuPer1k.relay)))} ms`,
      `${n(run.claimAfterPublished.p50, 1)} / ${n(run.claimAfterPublished.p99, 1)} ms`,
    ]),
  );
  const record = markdownTable(
    ["record variant", "WAL per event", "HOT share"],
    variants.map((v) => [
      v.variant,
      `${n(v.walBytesPerEvent)} B`,
      v.hotShare === null ? "" : n(v.hotShare, 2),
    ]),
  );
  const stages = ["enqueue", "relay", "purge", "vacuum"] as const;
  const where = markdownTable(
    ["retention", "stage", "where the bytes go (WAL record type: bytes per event, count per event)"],
    runs.flatMap((run) => {
      const records = run.wal.find((w) => w.records !== undefined)?.records;
      if (records === undefined) return [];
      return stages.map((stage) => [
        run.retention,
        stage,
        records[stage]
          .slice(0, 6)
          .map((r) => `${r.type} ${n(r.bytesPerEvent)} B (${n(r.count / (run.wal[0]?.events ?? 1), 2)})`)
          .join(", ") || "nothing",
      ]);
    }),
  );
  return `${modes}\n\n${where}\n\n${record}`;
}
