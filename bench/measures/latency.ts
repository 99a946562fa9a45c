import pg from "pg";
import {
  DEFAULT_RELAY_OPTIONS,
  type RelayOptions,
  roundReserveMs,
  runRelay,
} from "../../functions/shared/relay/engine.ts";
import { listenForOutboxInserts } from "../../functions/shared/relay/wakeUp.ts";
import { resetOutbox, seedBacklog } from "../lib/benchDatabase.ts";
import { watchDatabase } from "../lib/databaseWatch.ts";
import { tracedPool } from "../lib/roundTrace.ts";
import { createBenchQueue, deleteBenchQueue, relayDestination, relaySqsClient } from "../lib/sqsClient.ts";
import type { AcceptedSend, BenchSqsEndpoint } from "../lib/sqsEndpoint.ts";
import { type StallReport, stallReport } from "../lib/stallReport.ts";
import { percentile } from "../lib/stats.ts";
import { produceSteadily, type SteadyLoad } from "../lib/steadyProducer.ts";
import { epochNow, watchThread } from "../lib/threadPauses.ts";

export interface LatencyRun {
  events: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
  /** The producer's COMMIT duration, ms (the NOTIFY trigger's cost shows here). */
  commitP50: number;
  commitP99: number;
  /** With a hot backlog: events of the hot aggregate published during the run, and their rate. */
  hot?: { rows: number; published: number; eventsPerSecond: number };
  /** The run's rounds, pauses and database view lined up: its slowest rounds and latency spikes, with causes. */
  stalls?: StallReport;
}

const ALL_DELIVERED_TIMEOUT_MS = 30_000;

/**
 * (5) Commit-to-publish latency in dwell mode (the Lambda default) at a steady producer rate: from the
 * producer's COMMIT returning to the endpoint accepting the message, per event. With `notify`, the migration's
 * trigger is enabled and the relay LISTENs (listenForOutboxInserts), as RELAY_LISTEN=true does. With
 * `hotBacklogRows`, one aggregate holds that many waiting rows when the relay starts (statistics from before
 * them), and the relay drains it while the producer's events are timed: the hot aggregate must not cost the
 * others latency, and its own drain rate during the run is reported.
 */
export async function measureLatency(
  databaseUrl: string,
  producerPool: pg.Pool,
  endpoint: BenchSqsEndpoint,
  load: SteadyLoad,
  latencyMs: number,
  notify: boolean,
  hotBacklogRows = 0,
): Promise<LatencyRun> {
  await resetOutbox(producerPool);
  if (hotBacklogRows > 0) {
    // A real hot backlog builds over hours, with autovacuum passing over it; a million rows inserted a second
    // before the run would instead have autovacuum's first pass over them (one core, unthrottled by 0001's
    // settings) and a cold cache compete with the relay on this 2-core machine.
    await seedBacklog(producerPool, { events: hotBacklogRows, aggregates: 1 }, "hot", false);
    await producerPool.query("vacuum analyze outbox_events");
  }
  await producerPool.query(
    `alter table outbox_events ${notify ? "enable" : "disable"} trigger outbox_notify`,
  );
  await endpoint.setLatency(latencyMs);
  const options: RelayOptions = { ...DEFAULT_RELAY_OPTIONS, mode: "dwell" };
  // The relay's own small pool, sized as the handler sizes it: a session per parallel round, plus the LISTEN one.
  // (Until 2026-12-01 it had 3 sessions, from the days of 2 rounds: with 4 rounds one loop always waited for a
  // session, which the stall report showed as pool wait.)
  const relayPool = new pg.Pool({
    connectionString: databaseUrl,
    max: options.parallelRounds + (notify ? 1 : 0),
    application_name: "bench-relay",
  });
  relayPool.on("error", () => {});
  // Open as a warm container's are: the handler's pool outlives its invocations (60 s idle timeout, overlapping
  // scheduled invocations), so a steady relay does not connect. Until 2026-12-02 every run's relay connected
  // its sessions in its first rounds while the producer was already committing: those rounds took 180-270 ms
  // (connect 70-115 ms each on the loaded 2-core machine) and put the run's max and much of its p99 on a cold
  // start, which a container pays once.
  const warm = await Promise.all(Array.from({ length: relayPool.options.max }, () => relayPool.connect()));
  for (const session of warm) session.release();
  const sqs = relaySqsClient(endpoint.url, options.publishTimeoutMs);
  const queueUrl = await createBenchQueue(sqs, notify ? "latency-notify" : "latency-poll");
  const { destination, destroy } = await relayDestination(endpoint.url, queueUrl, options);
  const stop = new AbortController();
  // Set while the watches run; a run that fails stops them in `finally`, or their timers keep the bench alive.
  let stopWatches: (() => Promise<void>) | undefined;
  try {
    await endpoint.takeDeliveries();
    const wakeUp = notify ? await listenForOutboxInserts(relayPool) : undefined;
    // Every round's phases, both threads' pauses and the database's view, for the stall report.
    const traced = tracedPool(relayPool);
    const database = await watchDatabase(databaseUrl, "outbox_events", traced.lastClaim);
    const endpointWatch = await endpoint.watch();
    const relayWatch = watchThread();
    stopWatches = async () => {
      relayWatch.stop();
      await endpointWatch.stop().catch(() => {});
      await database.stop().catch(() => {});
    };
    const startedAt = epochNow();
    const cpuBefore = await processCpu(endpoint);
    const deadline = Date.now() + load.durationMs + roundReserveMs(options) + ALL_DELIVERED_TIMEOUT_MS;
    const relay = runRelay(
      { pool: traced.pool, destination, deadline, signal: stop.signal, ...(wakeUp ? { wakeUp } : {}) },
      options,
    ).finally(() => wakeUp?.close());
    const produced = await produceSteadily(producerPool, load);
    const firstAccepted = await waitForAll(endpoint, produced.committedAt);
    stop.abort();
    await relay;
    const cpuAfter = await processCpu(endpoint);
    stopWatches = undefined;
    const stalls = stallReport({
      cpuMs: {
        relayThread: cpuAfter.relayThread - cpuBefore.relayThread,
        endpointThread: cpuAfter.endpointThread - cpuBefore.endpointThread,
        otherThreads:
          cpuAfter.process -
          cpuBefore.process -
          (cpuAfter.relayThread - cpuBefore.relayThread) -
          (cpuAfter.endpointThread - cpuBefore.endpointThread),
        wallMs: epochNow() - startedAt,
      },
      startedAt,
      rounds: traced.rounds,
      relay: relayWatch.stop(),
      endpoint: await endpointWatch.stop(),
      database: await database.stop(),
      events: [...produced.committedAt].map(([id, committedAt]) => ({
        committedAt,
        publishedAt: firstAccepted.get(id) as number,
      })),
    });
    // Everything else the endpoint accepted during the run is the hot aggregate's.
    const hotTimes = [...firstAccepted].filter(([id]) => !produced.committedAt.has(id)).map(([, at]) => at);
    const latencies = [...produced.committedAt].map(([id, at]) => (firstAccepted.get(id) as number) - at);
    return {
      events: latencies.length,
      p50: percentile(latencies, 50),
      p95: percentile(latencies, 95),
      p99: percentile(latencies, 99),
      max: Math.max(...latencies),
      commitP50: percentile(produced.commitMs, 50),
      commitP99: percentile(produced.commitMs, 99),
      stalls,
      ...(hotBacklogRows > 0
        ? {
            hot: {
              rows: hotBacklogRows,
              published: hotTimes.length,
              eventsPerSecond:
                (hotTimes.length - 1) / ((Math.max(...hotTimes) - Math.min(...hotTimes)) / 1000),
            },
          }
        : {}),
    };
  } finally {
    stop.abort();
    await stopWatches?.();
    await deleteBenchQueue(sqs, queueUrl);
    destroy();
    sqs.destroy();
    await relayPool.end();
    await producerPool.query("alter table outbox_events disable trigger outbox_notify");
  }
}

/** CPU ms so far: this whole process, its main thread (relay and producer), and the endpoint's worker thread. */
async function processCpu(endpoint: BenchSqsEndpoint) {
  const all = process.cpuUsage();
  const main = process.threadCpuUsage();
  return {
    process: (all.user + all.system) / 1000,
    relayThread: (main.user + main.system) / 1000,
    endpointThread: await endpoint.cpuMs(),
  };
}

/** Collects the endpoint's accepted sends until every committed event arrived; bounded. */
async function waitForAll(endpoint: BenchSqsEndpoint, committed: Map<string, number>) {
  const first = new Map<string, number>();
  const give = Date.now() + ALL_DELIVERED_TIMEOUT_MS;
  const note = (sends: AcceptedSend[]) => {
    for (const send of sends) if (!first.has(send.dedupId)) first.set(send.dedupId, send.at);
  };
  for (;;) {
    note(await endpoint.takeDeliveries());
    const missing = [...committed.keys()].filter((id) => !first.has(id)).length;
    if (missing === 0) return first;
    if (Date.now() > give) {
      throw new Error(
        `latency run: ${missing} committed events not published within ${ALL_DELIVERED_TIMEOUT_MS} ms`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
