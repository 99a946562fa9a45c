import pg from "pg";
import { migrate } from "../../functions/shared/db/migrate.ts";
import { type LocalPostgres, startPostgres } from "../../local/backends/postgres.ts";

export interface BenchDatabase {
  server: LocalPostgres;
  pool: pg.Pool;
  /** Settings applied on top of the harness's (fsync=off, synchronous_commit=off, full_page_writes=off). */
  settings: Record<string, string>;
  stop(): Promise<void>;
}

/**
 * On top of the harness's throwaway-data flags: room for the 1M-row table in memory (~350 MB with its
 * indexes), and enough WAL that inserting it does not set off a checkpoint storm mid-measurement. Planner
 * costs stay at their defaults, which are also RDS's.
 */
const BENCH_SETTINGS: Record<string, string> = {
  shared_buffers: "1GB",
  max_wal_size: "8GB",
  checkpoint_timeout: "30min",
  maintenance_work_mem: "256MB",
};

/** One Postgres for the whole bench: BENCH_DATABASE_URL if set, else an embedded Postgres 17 tuned as above. */
export async function startBenchDatabase(): Promise<BenchDatabase> {
  const server = await startPostgres(process.env.BENCH_DATABASE_URL);
  const settings: Record<string, string> = {};
  if (server.restart !== undefined) {
    const admin = new pg.Client({ connectionString: server.url });
    await admin.connect();
    for (const [name, value] of Object.entries(BENCH_SETTINGS)) {
      await admin.query(`alter system set ${name} = '${value}'`);
      settings[name] = value;
    }
    await admin.end();
    await server.restart(); // shared_buffers needs a restart
  }
  const pool = new pg.Pool({ connectionString: server.url, max: 30 });
  pool.on("error", () => {}); // an idle session ended by the server must not crash the bench
  await migrate(pool);
  return {
    server,
    pool,
    settings,
    async stop() {
      await pool.end();
      await server.stop();
    },
  };
}

export interface BacklogShape {
  events: number;
  aggregates: number;
}

/**
 * Pending events as the write API stores them (a ~180-byte order payload, a traceparent header), aggregate
 * `i % aggregates`, so every aggregate has events/aggregates of them, interleaved in seq order: each claim
 * finds one head per aggregate, the realistic case for a busy service. Inserted by generate_series in seq
 * order; ANALYZE afterwards (unless `analyze` is false) so the claim is planned with statistics that know
 * about the backlog.
 */
export async function seedBacklog(
  pool: pg.Pool,
  shape: BacklogShape,
  prefix = "order",
  analyze = true,
): Promise<void> {
  await pool.query(
    `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, headers)
     select 'order', $3::text || '-' || (g % $2::integer), 'order.created',
            jsonb_build_object('orderId', g, 'customer', 'c-' || (g % 997), 'total', 4200, 'currency', 'EUR',
                               'lines', jsonb_build_array(jsonb_build_object('sku', 'sku-' || (g % 31), 'qty', 2,
                                                                             'price', 2100))),
            jsonb_build_object('traceparent', '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01')
     from generate_series(1, $1::integer) as g
     order by g`,
    [shape.events, shape.aggregates, prefix],
  );
  if (analyze) await pool.query("analyze outbox_events");
}

/**
 * Rows the relay published `publishedDaysAgo` days ago, what a week of traffic leaves for the purge. Same
 * payload as the backlog so the heap looks alike; processed_at spread over an hour, oldest first.
 */
export async function seedPublished(pool: pg.Pool, rows: number, publishedDaysAgo = 2): Promise<void> {
  await pool.query(
    `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, headers, created_at,
                                available_at, processed_at)
     select 'order', 'old-' || (g % 50000), 'order.created',
            jsonb_build_object('orderId', g, 'customer', 'c-' || (g % 997), 'total', 4200, 'currency', 'EUR',
                               'lines', jsonb_build_array(jsonb_build_object('sku', 'sku-' || (g % 31), 'qty', 2,
                                                                             'price', 2100))),
            jsonb_build_object('traceparent', '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'),
            t, t, t + interval '50 milliseconds'
     from generate_series(1, $1::integer) as g,
          lateral (select now() - $2::integer * interval '1 day' + g * interval '3.6 milliseconds') as at(t)
     order by g`,
    [rows, publishedDaysAgo],
  );
}

/** Empties the outbox between measurements, so each starts from the same table (no dead tuples). */
export async function resetOutbox(pool: pg.Pool): Promise<void> {
  await pool.query("truncate outbox_events");
}

export async function pendingCount(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(
    "select count(*)::integer as n from outbox_events where processed_at is null and dead_lettered_at is null",
  );
  return rows[0]?.n ?? 0;
}
