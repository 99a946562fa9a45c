import { copyFile, mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SQSClient } from "@aws-sdk/client-sqs";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeSqs, startFakeSqs } from "../cli/dev/aws/fakeSqs.ts";
import { DEFAULT_LOCK_TIMEOUT_MS, defaultMigrationsDir, migrate } from "../functions/shared/db/migrate.ts";
import { DEFAULT_RELAY_OPTIONS, type RelayOptions, runRelay } from "../functions/shared/relay/engine.ts";
import type { Retention } from "../functions/shared/relay/sql/recordOutcomes.ts";
import { LOCAL_AWS } from "../local/backends/awsEndpoint.ts";
import { waitFor } from "./chaos/support/waitFor.ts";
import { type CommittedEvent, checkCommitOrder } from "./support/commitOrder.ts";
import { createEmptyDatabase } from "./support/db.ts";
import { rowStates } from "./support/outboxRows.ts";
import { loadPreviousRelay, PREVIOUS_RELAY_COMMIT } from "./support/previousRelay.ts";
import { queueDestination } from "./support/relay.ts";
import { createFifoQueue } from "./support/sqs.ts";

/**
 * Upgrade in place under traffic, as the earliest users have it: the schema of 0001-0002 with a large outbox,
 * producers writing plain SQL and the relay of that schema (PREVIOUS_RELAY_COMMIT, from git history) running in
 * dwell mode; then every migration after 0002, one file at a time (whatever the folder holds: files added later
 * are covered without touching this test). Checks: no event lost or reordered (per aggregate, delivery order is
 * commit order), no producer INSERT took longer than the runner's lock timeout plus the insert's own time, and
 * the old relay kept working against each new schema (it finishes a round after each file); then the deploy: the
 * current relay takes over and publishes the rest. Prints the time each migration took.
 *
 * Size: UPGRADE_PUBLISHED_ROWS (default 1,000,000) published rows and UPGRADE_PENDING_ROWS (default 10,000)
 * pending ones, made with generate_series. `npm test` runs it by itself (vitest.upgrade.config.ts);
 * `npm run test:upgrade:large` at 5M rows.
 */
const PUBLISHED = Number(process.env.UPGRADE_PUBLISHED_ROWS ?? 1_000_000);
const PENDING = Number(process.env.UPGRADE_PENDING_ROWS ?? 10_000);
const PENDING_AGGREGATES = 1_000;
/**
 * How long the relays may take to publish the rest once the producers stop. A relay publishes about 100 events
 * per round, one per aggregate: a backlog of 10,000 takes tens of seconds, and the large run's 50,000 (plus what
 * its producers wrote meanwhile) took more than the 120 s that the default size is given, once of two runs here.
 */
const DRAIN_TIMEOUT_MS = 120_000 * Math.max(1, PENDING / 10_000);
const PRODUCERS = 4;
const AGGREGATES_PER_PRODUCER = 25;
/** What an INSERT itself may take on a loaded 2-core machine, on top of a wait behind DDL (lock_timeout). */
const INSERT_OWN_TIME_MS = 1_000;
const BASE = ["0001_outbox_events.sql", "0002_notify_trigger.sql"];

let database: Awaited<ReturnType<typeof createEmptyDatabase>>;
let pool: pg.Pool;
let stepDir: string;
let fake: FakeSqs;
let sqs: SQSClient;

beforeAll(async () => {
  database = await createEmptyDatabase();
  pool = new pg.Pool({ connectionString: database.url, max: 20 });
  pool.on("error", () => {});
  stepDir = await mkdtemp(join(tmpdir(), "outbox-upgrade-"));
  for (const name of BASE) await copyFile(join(defaultMigrationsDir(), name), join(stepDir, name));
  await migrate(pool, { migrationsDir: stepDir });
  fake = await startFakeSqs();
  sqs = new SQSClient({ ...LOCAL_AWS, endpoint: fake.url });
});
afterAll(async () => {
  sqs?.destroy();
  await fake?.close();
  await pool?.end();
  await database?.drop();
  await rm(stepDir, { recursive: true, force: true });
});

interface Producer {
  committed: CommittedEvent[];
  latenciesMs: number[];
  errors: string[];
}

/** One producer: a loop of single-INSERT transactions over its own aggregates (so its commit order is theirs). */
async function produce(index: number, stop: AbortSignal): Promise<Producer> {
  const producer: Producer = { committed: [], latenciesMs: [], errors: [] };
  const client = new pg.Client({ connectionString: database.url });
  client.on("error", () => {});
  await client.connect();
  try {
    for (let n = 0; !stop.aborted; n++) {
      const aggregateId = `live-${index}-${n % AGGREGATES_PER_PRODUCER}`;
      const started = performance.now();
      try {
        const { rows } = await client.query<{ id: string; seq: string }>(
          `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload)
           values ('order', $1, 'order.changed', jsonb_build_object('n', $2::integer)) returning id, seq`,
          [aggregateId, n],
        );
        producer.latenciesMs.push(performance.now() - started);
        const row = rows[0];
        if (row !== undefined) producer.committed.push({ id: row.id, seq: BigInt(row.seq), aggregateId });
      } catch (error) {
        producer.errors.push((error as Error).message);
      }
    }
  } finally {
    await client.end();
  }
  return producer;
}

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
};

/** The current relay as one Lambda version runs it, dwelling until stopped; its errors go to `errors`. */
function startRelay(
  destination: ReturnType<typeof queueDestination>,
  options: Partial<RelayOptions>,
  onRound: (claimed: number) => void,
  errors: string[],
) {
  const stop = new AbortController();
  const done = runRelay(
    {
      pool,
      destination,
      deadline: Date.now() + 600_000,
      signal: stop.signal,
      onRound: (report) => onRound(report.claimed),
      logger: { info() {}, warn() {}, error: (_message, fields) => errors.push(String(fields.error)) },
    },
    { ...DEFAULT_RELAY_OPTIONS, mode: "dwell", ...options },
  );
  return { stop: () => stop.abort(), done };
}

describe(`upgrade in place from 0001-0002 under traffic (${PUBLISHED.toLocaleString("en")} published, ${PENDING.toLocaleString("en")} pending rows)`, () => {
  it("applies every later migration while producers write and the previous relay publishes: nothing lost or reordered", async () => {
    const setupStarted = Date.now();
    await pool.query(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, processed_at)
       select 'order', 'old-' || (g % 100000), 'order.created', jsonb_build_object('n', g), now()
       from generate_series(1, $1::integer) as g`,
      [PUBLISHED],
    );
    await pool.query(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload)
       select 'order', 'backlog-' || (g % $2::integer), 'order.created', jsonb_build_object('n', g)
       from generate_series(1, $1::integer) as g`,
      [PENDING, PENDING_AGGREGATES],
    );
    await pool.query("analyze outbox_events");
    const { rows: backlog } = await pool.query<{ id: string; seq: string; aggregate_id: string }>(
      "select id, seq, aggregate_id from outbox_events where processed_at is null order by seq",
    );
    const setupMs = Date.now() - setupStarted;

    const queueUrl = await createFifoQueue(sqs, "upgrade");
    const queueName = queueUrl.split("/").pop() as string;
    const previous = await loadPreviousRelay();
    const stopRelay = new AbortController();
    const rounds: { claimed: number; durationMs: number }[] = [];
    const relayErrors: string[] = [];
    const relay = previous.runRelay(
      {
        pool,
        sqs,
        deadline: Date.now() + 600_000,
        signal: stopRelay.signal,
        onRound: (report) => rounds.push(report),
        logger: { info() {}, warn() {}, error: (_message, fields) => relayErrors.push(String(fields.error)) },
      },
      { ...previous.DEFAULT_RELAY_OPTIONS, queueUrl, mode: "dwell", backoffBaseMs: 10, backoffMaxMs: 100 },
    );
    const stopProducers = new AbortController();
    const producers = Promise.all(
      Array.from({ length: PRODUCERS }, (_, index) => produce(index, stopProducers.signal)),
    );

    const pendingFiles = (await readdir(defaultMigrationsDir()))
      .filter((name) => name.endsWith(".sql") && !BASE.includes(name))
      .sort();
    const timings: { file: string; ms: number; roundsDuring: number }[] = [];
    try {
      // Traffic first: the relay is publishing and the producers are writing before the first migration.
      await waitFor("the previous relay to publish", async () => rounds.some((r) => r.claimed > 0), 30_000);
      for (const file of pendingFiles) {
        await copyFile(join(defaultMigrationsDir(), file), join(stepDir, file));
        const roundsBefore = rounds.length;
        const started = Date.now();
        const result = await migrate(pool, { migrationsDir: stepDir });
        timings.push({ file, ms: Date.now() - started, roundsDuring: rounds.length - roundsBefore });
        expect(result.applied).toEqual([file]);
        // The relay one migration behind keeps working against the schema it does not know yet.
        const roundsAfter = rounds.length;
        await waitFor(
          `the previous relay to finish a round after ${file}`,
          async () => rounds.length > roundsAfter,
          30_000,
        );
      }
    } finally {
      stopProducers.abort();
    }
    const written = await producers;
    // The deploy: the current relay starts while the previous one still runs (Lambda versions overlap), then the
    // previous one stops and the current one publishes the rest. A relay from before 0007 claims more slowly once
    // 0014 has dropped the index its predicate matched (pending_group): it keeps working, and the deploy
    // replaces it.
    const currentRounds: number[] = [];
    const current = startRelay(
      queueDestination(sqs, { queueUrl }),
      {},
      (claimed) => currentRounds.push(claimed),
      relayErrors,
    );
    await waitFor("the current relay to run a round", async () => currentRounds.length > 0, 30_000);
    stopRelay.abort();
    const summary = await relay;
    const pending = async () => {
      const { rows } = await pool.query<{ n: number }>(
        "select count(*)::integer as n from outbox_events where processed_at is null and dead_lettered_at is null",
      );
      return rows[0]?.n;
    };
    await waitFor(
      "the relays to publish every committed event",
      async () => (await pending()) === 0,
      DRAIN_TIMEOUT_MS,
      async () =>
        `${await pending()} still pending after ${rounds.length} rounds of the previous relay and ` +
        `${currentRounds.length} of the current one; relay errors: ${relayErrors.slice(-3).join("; ") || "none"}`,
    );
    current.stop();
    await current.done;

    const latencies = written.flatMap((producer) => producer.latenciesMs);
    console.log(
      [
        `[upgrade] Postgres ${(await pool.query("show server_version")).rows[0]?.server_version}, ` +
          `${PUBLISHED.toLocaleString("en")} published + ${PENDING.toLocaleString("en")} pending rows ` +
          `(setup ${(setupMs / 1000).toFixed(1)} s), ${PRODUCERS} producers, relay ${PREVIOUS_RELAY_COMMIT.slice(0, 7)}`,
        ...timings.map(
          ({ file, ms, roundsDuring }) =>
            `[upgrade]   ${file}: ${(ms / 1000).toFixed(1)} s (${roundsDuring} relay rounds meanwhile)`,
        ),
        `[upgrade] producer INSERTs: ${latencies.length}, p50 ${percentile(latencies, 50).toFixed(1)} ms, ` +
          `p99 ${percentile(latencies, 99).toFixed(1)} ms, max ${Math.max(...latencies).toFixed(1)} ms; ` +
          `relay published ${summary.published} in ${rounds.length} rounds, ${summary.failedRounds} failed`,
      ].join("\n"),
    );

    expect(timings.map((timing) => timing.file)).toEqual(pendingFiles);
    expect(written.flatMap((producer) => producer.errors)).toEqual([]);
    expect(Math.max(...latencies)).toBeLessThan(DEFAULT_LOCK_TIMEOUT_MS + INSERT_OWN_TIME_MS);
    expect(relayErrors).toEqual([]);
    expect(summary.failedRounds).toBe(0);
    const committed = [
      ...backlog.map((row) => ({ id: row.id, seq: BigInt(row.seq), aggregateId: row.aggregate_id })),
      ...written.flatMap((producer) => producer.committed),
    ];
    const report = checkCommitOrder(committed, fake.deliveries(queueName));
    expect(report.committed).toBe(PENDING + latencies.length);
    expect(report.lost).toEqual([]);
    expect(report.seqNotIncreasing).toEqual([]);
    expect(report.notCommitOrder).toEqual([]);
  }, 900_000);

  it("switches a running install between retention modes under traffic: no event lost, none sent twice, no rewrite", async () => {
    const queueUrl = await createFifoQueue(sqs, "retention-switch");
    const queueName = queueUrl.split("/").pop() as string;
    const destination = queueDestination(sqs, { queueUrl });
    const { rows: table } = await pool.query<{ file: string }>(
      "select pg_relation_filenode('outbox_events')::text as file",
    );
    const before = await rowStates(pool);
    const relayErrors: string[] = [];
    const rounds: { retention: Retention; claimed: number }[] = [];
    /** A relay deployed with one mode. */
    const start = (retention: Retention) =>
      startRelay(
        destination,
        { retention, parallelRounds: 2 },
        (claimed) => rounds.push({ retention, claimed }),
        relayErrors,
      );
    const roundsOf = (retention: Retention) =>
      rounds.filter((r) => r.retention === retention && r.claimed > 0);
    const stopProducers = new AbortController();
    const producers = Promise.all(
      Array.from({ length: PRODUCERS }, (_, index) => produce(index, stopProducers.signal)),
    );
    try {
      // keep -> delete -> keep, each switch a deploy: the new version starts before the old one stops.
      let current = start("keep");
      await waitFor("the keep relay to publish", async () => roundsOf("keep").length >= 3, 60_000);
      for (const next of ["delete", "keep"] as const) {
        const seen = roundsOf(next).length;
        const replacement = start(next);
        await waitFor(`the ${next} relay to publish`, async () => roundsOf(next).length >= seen + 3, 60_000);
        current.stop();
        await current.done;
        current = replacement;
        const after = roundsOf(next).length;
        await waitFor(
          `the ${next} relay to publish alone`,
          async () => roundsOf(next).length >= after + 3,
          60_000,
        );
      }
      stopProducers.abort();
      const written = await producers;
      const committed = written.flatMap((producer) => producer.committed);
      await waitFor(
        "every committed event published",
        async () => (await rowStates(pool)).pending === 0,
        120_000,
      );
      current.stop();
      await current.done;

      const deliveries = fake.deliveries(queueName);
      const report = checkCommitOrder(committed, deliveries);
      expect(written.flatMap((producer) => producer.errors)).toEqual([]);
      expect(relayErrors).toEqual([]);
      expect(roundsOf("delete").length).toBeGreaterThan(0);
      expect(report.lost).toEqual([]);
      expect(report.notCommitOrder).toEqual([]);
      const ids = deliveries.map((delivery) => delivery.dedupId);
      expect(ids.length - new Set(ids).size).toBe(0);
      expect(ids.length).toBe(committed.length);
      // Every event is accounted for once: marked rows (keep) plus the counter of deleted ones (delete).
      const after = await rowStates(pool);
      expect(after.published - before.published).toBe(committed.length);
      const { rows: tableAfter } = await pool.query<{ file: string }>(
        "select pg_relation_filenode('outbox_events')::text as file",
      );
      expect(tableAfter).toEqual(table);
    } finally {
      stopProducers.abort();
    }
  }, 900_000);
});
