import pg from "pg";
import { enqueue } from "../../functions/shared/produce/enqueue.ts";
import { resetOutbox } from "../lib/benchDatabase.ts";
import type { CpuMeter } from "../lib/cpuMeter.ts";
import { type Repeated, repeated } from "../lib/stats.ts";
import { formatNumber, markdownTable, verdict } from "../lib/table.ts";

/**
 * (8) What the per-aggregate order guarantee (migration 0005) costs producers: committed events per second
 * through the write API, one event per transaction (begin, enqueue, commit: the shape of a service's request),
 * with the guarantee's trigger enabled and disabled on the same table in the same run.
 *
 * - `guarded`: migration 0005 as shipped: advisory lock per aggregate, then seq.
 * - `unguarded`: the trigger disabled: seq from the identity default, no lock (the schema before 0005).
 * - `guarded+version`: a variant measured to decide whether to ship a gapless per-aggregate version: the same
 *   lock plus an upsert into an aggregates table (one row per aggregate, last_version + 1 under the lock).
 *   Installed here only, never by a migration.
 */
export type EnqueueGuard = "unguarded" | "guarded" | "guarded+version";
export const ENQUEUE_GUARDS: readonly EnqueueGuard[] = ["unguarded", "guarded", "guarded+version"];

export interface EnqueueShape {
  name: string;
  writers: number;
  /** Each transaction appends to one aggregate drawn at random from this many. */
  aggregates: number;
}

export interface EnqueueRun {
  guard: EnqueueGuard;
  eventsPerSecond: number;
  /**
   * Postgres CPU (all backends) per event, in µs: what the guard costs the server, much less sensitive than
   * events/s to the other work on a shared machine. NaN for a remote server.
   */
  postgresCpuUsPerEvent: number;
}

const SHIPPED_TRIGGER = "outbox_commit_order";
const VERSION_TRIGGER = "bench_commit_order_versioned";

const PAYLOAD = {
  orderId: 1,
  customer: "c-1",
  total: 4200,
  currency: "EUR",
  lines: [{ sku: "sku-1", qty: 2, price: 2100 }],
};

/** Installs the version variant beside the shipped trigger, disabled. Idempotent. */
export async function installVersionVariant(pool: pg.Pool): Promise<void> {
  await pool.query(`
    create table if not exists bench_aggregate_versions (
      aggregate_type text not null, aggregate_id text not null, last_version bigint not null,
      primary key (aggregate_type, aggregate_id));
    create or replace function bench_commit_order_versioned() returns trigger language plpgsql as $$
    declare
      version bigint;
    begin
      perform pg_advisory_xact_lock(outbox_aggregate_lock_key(new.aggregate_type, new.aggregate_id));
      insert into bench_aggregate_versions as v values (new.aggregate_type, new.aggregate_id, 1)
        on conflict (aggregate_type, aggregate_id) do update set last_version = v.last_version + 1
        returning last_version into version;
      new.seq := nextval('outbox_events_seq_seq'::regclass);
      new.headers := new.headers || jsonb_build_object('aggregateVersion', version::text);
      return new;
    end;
    $$;
    drop trigger if exists ${VERSION_TRIGGER} on outbox_events;
    create trigger ${VERSION_TRIGGER} before insert on outbox_events
      for each row execute function bench_commit_order_versioned();
    alter table outbox_events disable trigger ${VERSION_TRIGGER};`);
}

async function selectGuard(pool: pg.Pool, guard: EnqueueGuard): Promise<void> {
  const enable = (trigger: string, on: boolean) =>
    `alter table outbox_events ${on ? "enable" : "disable"} trigger ${trigger}`;
  await pool.query(enable(SHIPPED_TRIGGER, guard === "guarded"));
  await pool.query(enable(VERSION_TRIGGER, guard === "guarded+version"));
}

/** Writers commit one event per transaction for `durationMs`; committed events per second. */
export async function measureEnqueue(
  databaseUrl: string,
  pool: pg.Pool,
  shape: EnqueueShape,
  guard: EnqueueGuard,
  durationMs: number,
  meter: CpuMeter,
): Promise<EnqueueRun> {
  await resetOutbox(pool);
  await pool.query("truncate bench_aggregate_versions");
  await selectGuard(pool, guard);
  const writers = new pg.Pool({ connectionString: databaseUrl, max: shape.writers });
  try {
    // Connect every writer before the clock starts.
    const clients = await Promise.all(Array.from({ length: shape.writers }, () => writers.connect()));
    const started = performance.now();
    const stopAt = started + durationMs;
    const { result: counts, cpu } = await meter.measure(() =>
      Promise.all(
        clients.map(async (client) => {
          let committed = 0;
          while (performance.now() < stopAt) {
            await client.query("begin");
            await enqueue(client, {
              aggregateType: "order",
              aggregateId: `order-${Math.floor(Math.random() * shape.aggregates)}`,
              eventType: "order.created",
              payload: PAYLOAD,
              headers: { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" },
            });
            await client.query("commit");
            committed++;
          }
          client.release();
          return committed;
        }),
      ),
    );
    const seconds = (performance.now() - started) / 1000;
    const events = counts.reduce((sum, n) => sum + n, 0);
    return {
      guard,
      eventsPerSecond: events / seconds,
      postgresCpuUsPerEvent: (cpu.postgres * 1000) / events,
    };
  } finally {
    await writers.end();
    await selectGuard(pool, "guarded");
  }
}

/** The ratio the guarantee must keep on many aggregates (guarded ÷ unguarded). */
export const ENQUEUE_TARGET_RATIO = 0.8;

export interface EnqueueResults {
  durationMs: number;
  shapes: {
    shape: EnqueueShape;
    byGuard: Record<EnqueueGuard, Repeated>;
    postgresCpuUsPerEvent: Record<EnqueueGuard, Repeated>;
  }[];
}

/** Every shape × guard `repeats` times, guards interleaved so drift of the shared machine hits them alike. */
export async function measureEnqueueGuards(
  databaseUrl: string,
  pool: pg.Pool,
  shapes: readonly EnqueueShape[],
  repeats: number,
  durationMs: number,
  meter: CpuMeter,
): Promise<EnqueueResults> {
  await installVersionVariant(pool);
  const results: EnqueueResults = { durationMs, shapes: [] };
  for (const shape of shapes) {
    const runs = new Map<EnqueueGuard, EnqueueRun[]>(ENQUEUE_GUARDS.map((guard) => [guard, []]));
    for (let i = 0; i < repeats; i++) {
      for (const guard of ENQUEUE_GUARDS) {
        runs.get(guard)?.push(await measureEnqueue(databaseUrl, pool, shape, guard, durationMs, meter));
      }
    }
    const summary = (pick: (run: EnqueueRun) => number) =>
      Object.fromEntries(
        ENQUEUE_GUARDS.map((guard) => [guard, repeated((runs.get(guard) ?? []).map(pick))]),
      ) as Record<EnqueueGuard, Repeated>;
    results.shapes.push({
      shape,
      byGuard: summary((run) => run.eventsPerSecond),
      postgresCpuUsPerEvent: summary((run) => run.postgresCpuUsPerEvent),
    });
  }
  await pool.query(`drop trigger if exists ${VERSION_TRIGGER} on outbox_events`);
  return results;
}

export function enqueueTable(results: EnqueueResults): string {
  const rows = results.shapes.map(({ shape, byGuard, postgresCpuUsPerEvent: cpu }) => {
    const base = byGuard.unguarded.median;
    const cell = (guard: EnqueueGuard) =>
      `${formatNumber(byGuard[guard].median)} (${formatNumber(byGuard[guard].min)}–${formatNumber(byGuard[guard].max)})` +
      `${guard === "unguarded" ? "" : ` = ${formatNumber(byGuard[guard].median / base, 2)} ×`}; ` +
      `${formatNumber(cpu[guard].median)} µs PG CPU/ev`;
    const many = shape.aggregates > 1;
    const ratio = byGuard.guarded.median / base;
    return [
      `${shape.name}: ${shape.writers} writers × ${formatNumber(shape.aggregates)} aggregate${many ? "s" : ""}`,
      cell("unguarded"),
      cell("guarded"),
      cell("guarded+version"),
      many ? `≥ ${ENQUEUE_TARGET_RATIO} ×` : "–",
      many ? verdict(ratio >= ENQUEUE_TARGET_RATIO) : "",
    ];
  });
  return markdownTable(
    [
      "shape (one event per transaction)",
      "unguarded: ev/s (spread)",
      "guarded (0005)",
      "guarded + version (not shipped)",
      "target",
      "",
    ],
    rows,
  );
}
