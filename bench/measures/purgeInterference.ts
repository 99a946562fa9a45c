import pg from "pg";
import { DEFAULT_PURGE_OPTIONS, type PurgeSummary, runPurge } from "../../functions/shared/purge/purge.ts";
import { DEFAULT_RELAY_OPTIONS, type RelayOptions, runRelay } from "../../functions/shared/relay/engine.ts";
import { type BacklogShape, resetOutbox, seedBacklog, seedPublished } from "../lib/benchDatabase.ts";
import type { CpuMeter } from "../lib/cpuMeter.ts";
import { pacedPurge } from "../lib/pacedPurge.ts";
import { createBenchQueue, deleteBenchQueue, relayDestination, relaySqsClient } from "../lib/sqsClient.ts";
import type { BenchSqsEndpoint } from "../lib/sqsEndpoint.ts";

export interface PurgeInterferenceRun {
  relayAlone: number;
  relayDuringPurge: number;
  ratio: number;
  purge: {
    deletedRows: number;
    durationMs: number;
    rowsPerSecond: number;
    stoppedBy: PurgeSummary["stoppedBy"];
  };
  /** Share of the relay's drain during which the purge was running. */
  overlap: number;
  /** Cores Postgres kept busy during each drain (CPU time / wall time): the purge's share shows here. */
  postgresCores: { alone: number; duringPurge: number; duringPacedPurge: number };
  /** The same against a purge that pauses as long as each batch took (lib/pacedPurge.ts): an engine preview. */
  paced: { relayDuringPurge: number; ratio: number; rowsPerSecond: number };
}

interface Drain {
  eventsPerSecond: number;
  overlap: number;
  postgresCores: number;
}

/** The seeded rows are two days old; a one-day retention makes all of them due. */
const RETENTION_HOURS = 24;

/**
 * (7) Relay throughput while the purge (runPurge, default options but a 1-day retention) deletes
 * `publishedRows` two-day-old published rows, against the same relay on the same table with the purge idle.
 * Each purge starts from a freshly seeded table (it empties it); the paced preview gets its own 1M rows. Zero-latency endpoint and default relay
 * options: the most database-bound relay, so the most sensitive to a busy table. Throughput during the purge
 * counts only rounds that ended while the purge was still running.
 */
export async function measurePurgeInterference(
  databaseUrl: string,
  pool: pg.Pool,
  endpoint: BenchSqsEndpoint,
  publishedRows: number,
  backlog: BacklogShape,
  meter: CpuMeter,
): Promise<PurgeInterferenceRun> {
  await resetOutbox(pool);
  await seedPublished(pool, publishedRows, 2);
  await pool.query("vacuum analyze outbox_events");
  await endpoint.setLatency(0);

  await seedBacklog(pool, backlog, "alone");
  const alone = await relayDrain(databaseUrl, endpoint, backlog.events, meter, () => undefined);

  await seedBacklog(pool, backlog, "purged");
  // The purge Lambda's pool: one session of its own.
  const purgePool = new pg.Pool({ connectionString: databaseUrl, max: 1 });
  purgePool.on("error", () => {});
  let purgeEnded: number | undefined;
  const purge = runPurge(
    { pool: purgePool, deadline: Date.now() + 300_000 },
    { ...DEFAULT_PURGE_OPTIONS, retentionHours: RETENTION_HOURS },
  ).then((summary) => {
    purgeEnded = performance.now();
    return summary;
  });
  const during = await relayDrain(databaseUrl, endpoint, backlog.events, meter, () => purgeEnded);
  const summary = await purge;
  if (summary.deletedRows !== publishedRows) {
    throw new Error(
      `purge deleted ${summary.deletedRows} of ${publishedRows} rows (${summary.error ?? summary.stoppedBy})`,
    );
  }

  await seedPublished(pool, publishedRows, 2);
  await pool.query("vacuum analyze outbox_events");
  await seedBacklog(pool, backlog, "paced");
  let pacedEnded: number | undefined;
  const paced = pacedPurge(purgePool, RETENTION_HOURS).then((result) => {
    pacedEnded = performance.now();
    return result;
  });
  const duringPaced = await relayDrain(databaseUrl, endpoint, backlog.events, meter, () => pacedEnded);
  const pacedSummary = await paced;
  await purgePool.end();
  return {
    relayAlone: alone.eventsPerSecond,
    relayDuringPurge: during.eventsPerSecond,
    ratio: during.eventsPerSecond / alone.eventsPerSecond,
    purge: {
      deletedRows: summary.deletedRows,
      durationMs: summary.durationMs,
      rowsPerSecond: summary.deletedRows / (summary.durationMs / 1000),
      stoppedBy: summary.stoppedBy,
    },
    overlap: during.overlap,
    postgresCores: {
      alone: alone.postgresCores,
      duringPurge: during.postgresCores,
      duringPacedPurge: duringPaced.postgresCores,
    },
    paced: {
      relayDuringPurge: duringPaced.eventsPerSecond,
      ratio: duringPaced.eventsPerSecond / alone.eventsPerSecond,
      rowsPerSecond: pacedSummary.deletedRows / (pacedSummary.durationMs / 1000),
    },
  };
}

/**
 * Drains the backlog with the relay; the rate counts rounds that finished before `windowEnd()` (if it has
 * one by then), over the time up to the last such round.
 */
async function relayDrain(
  databaseUrl: string,
  endpoint: BenchSqsEndpoint,
  events: number,
  meter: CpuMeter,
  windowEnd: () => number | undefined,
): Promise<Drain> {
  const options: RelayOptions = { ...DEFAULT_RELAY_OPTIONS, mode: "drain" };
  // A session per parallel round, as the handler sizes its pool.
  const relayPool = new pg.Pool({ connectionString: databaseUrl, max: options.parallelRounds });
  relayPool.on("error", () => {});
  const sqs = relaySqsClient(endpoint.url, options.publishTimeoutMs);
  const queueUrl = await createBenchQueue(sqs, "purge");
  const { destination, destroy } = await relayDestination(endpoint.url, queueUrl, options);
  try {
    const rounds: { at: number; published: number }[] = [];
    const onRound = (report: { published: number }) =>
      rounds.push({ at: performance.now(), published: report.published });
    const started = performance.now();
    const { result: summary, cpu } = await meter.measure(() =>
      runRelay({ pool: relayPool, destination, deadline: Date.now() + 300_000, onRound }, options),
    );
    const ended = performance.now();
    await endpoint.takeDeliveries();
    if (summary.published !== events) throw new Error(`relay published ${summary.published} of ${events}`);
    const end = Math.min(windowEnd() ?? ended, ended);
    const inWindow = rounds.filter((round) => round.at <= end);
    const last = inWindow.at(-1)?.at ?? ended;
    const published = inWindow.reduce((sum, round) => sum + round.published, 0);
    return {
      eventsPerSecond: published / ((last - started) / 1000),
      overlap: (end - started) / (ended - started),
      postgresCores: cpu.postgres / cpu.wallMs,
    };
  } finally {
    await deleteBenchQueue(sqs, queueUrl);
    destroy();
    sqs.destroy();
    await relayPool.end();
  }
}
