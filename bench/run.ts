/**
 * `npm run bench`: every measurement of docs/benchmarks.md in one run, on one Postgres and one SQS endpoint,
 * so the ratios compare numbers taken minutes apart on the same machine. Writes bench/results/<time>.json and
 * prints the markdown tables. `npm run bench -- claim purge` runs only the named parts.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { cpus } from "node:os";
import { DEFAULT_RELAY_OPTIONS } from "../functions/shared/relay/engine.ts";
import { defaultRelayMemory } from "../infra/relayTiming.ts";
import { type BacklogShape, startBenchDatabase } from "./lib/benchDatabase.ts";
import { CpuMeter } from "./lib/cpuMeter.ts";
import { startS3Sink } from "./lib/s3Sink.ts";
import { startBenchSqsEndpoint } from "./lib/sqsEndpoint.ts";
import { repeated } from "./lib/stats.ts";
import { measureClaimAtScale } from "./measures/claimAtScale.ts";
import {
  CONSUMER_VARIANTS,
  type ConsumerVariant,
  consumerMarkdown,
  measureConsumer,
  prepareConsumerBench,
  summarizeConsumer,
} from "./measures/consumerThroughput.ts";
import { measureDbLimit } from "./measures/dbLimit.ts";
import { type EnqueueShape, measureEnqueueGuards } from "./measures/enqueueThroughput.ts";
import { measureHandover } from "./measures/handover.ts";
import { measureLatency } from "./measures/latency.ts";
import { measureLoadSql } from "./measures/loadAb.ts";
import { measurePurgeInterference } from "./measures/purgeInterference.ts";
import { measureRelayBundle } from "./measures/relayBundle.ts";
import { measureRelayMemory } from "./measures/relayMemory.ts";
import { profileRelay } from "./measures/relayProfile.ts";
import { measureRelayQuota, type RelayQuotaRun } from "./measures/relayQuota.ts";
import { measureRelay, type RelayRun, type RelayTuning } from "./measures/relayThroughput.ts";
import { measureRecordVariants, measureRetentionModes, retentionMarkdown } from "./measures/retention.ts";
import { measureSdkPipeline } from "./measures/sdkPipeline.ts";
import { measureSeedBaseline } from "./measures/seedBaseline.ts";
import { measureSizeCheck } from "./measures/sizeCheck.ts";
import { walPerEventMarkdown } from "./measures/walPerEvent.ts";
import {
  type BenchResults,
  type DestinationThroughput,
  markdownReport,
  type TunedThroughput,
} from "./report.ts";

/** The machine is shared and noisy: every throughput is measured this many times, interleaved; medians reported. */
const REPEATS = 3;
/** 20 events per aggregate: every claim finds a full batch of heads until the very end of the drain. */
const BACKLOG: BacklogShape = { events: 20_000, aggregates: 1_000 };
const DEFAULT_TUNING: RelayTuning = {
  batchSize: DEFAULT_RELAY_OPTIONS.batchSize,
  concurrency: DEFAULT_RELAY_OPTIONS.concurrency,
};
/**
 * Bigger batches amortise the per-round SQL; concurrency above 50 is moot: the SDK's agent opens at most 50
 * sockets. `loops: 2` previews pipelined rounds (see measures/relayThroughput.ts); it is not a relay option.
 */
const ZERO_LATENCY_TUNINGS: RelayTuning[] = [
  DEFAULT_TUNING,
  { ...DEFAULT_TUNING, loops: 2 },
  { batchSize: 100, concurrency: 10 },
  { batchSize: 500, concurrency: 50 },
  { batchSize: 1000, concurrency: 50 },
];
const SQS_LATENCY_MS = 20;
const LATENCY_TUNINGS: RelayTuning[] = [
  DEFAULT_TUNING,
  { ...DEFAULT_TUNING, loops: 2 },
  { batchSize: 100, concurrency: 10 },
  { batchSize: 500, concurrency: 50 },
  { batchSize: 1000, concurrency: 50 },
];
/**
 * Lambda memory sizes whose CPU share the quota part gives the relay (null: no quota): what payloads alone need
 * (448 MB, the default until 2026-12-02), the construct's default (relayMemory in infra/relayTiming.ts, sized for
 * its throughput target too), 1,024 MB, and 1,769 MB, one whole vCPU.
 */
const QUOTA_MEMORY_MB: (number | null)[] = [
  ...new Set([defaultRelayMemory().payloadMb, defaultRelayMemory().memoryMb, 1_024, 1_769]),
].sort((a, b) => a - b);
QUOTA_MEMORY_MB.push(null);
const QUOTA_REPEATS = 2;
/** Every kind of place the relay publishes to; 6 kinds x 2 latencies: two runs each keep the part near 10 minutes. */
const DESTINATIONS = ["sqs-fifo", "sqs", "sns-fifo", "sns", "kinesis", "eventbridge"] as const;
const DESTINATION_REPEATS = 2;
const BASELINE_BACKLOG: BacklogShape = { events: 10_000, aggregates: 1_000 };
/** At 20 ms per SendMessage the baseline does ~45 events/s: 500 events keep a run near 10 s. */
const BASELINE_20MS_BACKLOG: BacklogShape = { events: 500, aggregates: 500 };
const STEADY_LOAD = { eventsPerSecond: 300, durationMs: 8_000, aggregates: 1_000 };
/** The latency target's rate: commit→publish p99 ≤ 100 ms at 3,000 events/s without NOTIFY. */
const TARGET_LOAD = { eventsPerSecond: 3_000, durationMs: 8_000, aggregates: 1_000 };
const PUBLISHED_ROWS = 1_000_000;
/** OUTBOX_RETENTION side by side (14): runs per mode, interleaved (each run takes both modes through every stage). */
const RETENTION_REPEATS = Number(process.env.BENCH_RETENTION_REPEATS ?? REPEATS);
const CLAIM_PENDING: BacklogShape = { events: 10_000, aggregates: 1_000 };
const PURGE_BACKLOG: BacklogShape = { events: 20_000, aggregates: 1_000 };
/** Many writers on many aggregates (the target's case) and the same writers all on one hot aggregate. */
const ENQUEUE_SHAPES: EnqueueShape[] = [
  { name: "many aggregates", writers: 16, aggregates: 10_000 },
  { name: "hot aggregate", writers: 16, aggregates: 1 },
];
const ENQUEUE_DURATION_MS = 5_000;
/**
 * The hand-over part: EventBridge's 60 s ticks scaled to 20 s (k·T + U[0, T)), 100 events/s, three minutes per
 * configuration (BENCH_HANDOVER_RUN_MS shortens it for a smoke run); killed successors die 2 s after they start;
 * the idle-stop run stops invocations after 2 s without a claim. T is a third of a minute, not a tenth: a
 * hand-over's overlap (a process's start-up, the 5 s proving period) is real time, so a shorter T would make it
 * most of every tick; meanAliveAt60s rescales the overlap to a 1-minute schedule.
 */
const HANDOVER = {
  tickMs: 20_000,
  runMs: Number(process.env.BENCH_HANDOVER_RUN_MS ?? 180_000),
  eventsPerSecond: 100,
  killAfterMs: 2_000,
  idleStopMs: 2_000,
};
/** ~1 MiB events (the largest SQS takes, with the relay's attributes): 2 full batches of 100 per round. */
const MEMORY_LOAD = { events: 400, payloadBytes: 1_040_000 };
/**
 * The claim check's largest payloads: 4 of 64 MiB (less the JSON around the string), one per aggregate, so all 4
 * parallel rounds claim one at once and only the round holding the oversize gate may load its row (engine.ts).
 */
const LARGE_MEMORY_LOAD = { events: 4, payloadBytes: 67_108_864 - 64 };
/** The relay before its byte budget: every claimed payload in memory at once. */
const UNBOUNDED_BATCH_BYTES = 1_073_741_824;
/** 5 invocations at a time (OutboxConsumer's default maxConcurrency), 10 records each, 4 records per group. */
const CONSUMER_SHAPE = { messages: 4_000, groups: 1_000, pollers: 5 };
/** Rows waiting in one aggregate for the hot-aggregate claim (6) and latency (10) measurements. */
const HOT_ROWS = 1_000_000;
/** One aggregate drains at tens of events/s (one per round): a few seconds per run. */
const HOT_DRAIN: { sqsLatencyMs: number; events: number }[] = [
  { sqsLatencyMs: 0, events: 300 },
  { sqsLatencyMs: SQS_LATENCY_MS, events: 150 },
];

const PARTS = [
  "throughput",
  "load",
  "profile",
  "sdk",
  "latency20",
  "baseline",
  "latency",
  "claim",
  "hot",
  "purge",
  "bundle",
  "enqueue",
  "sizecheck",
  "memory",
  "consumer",
  "destinations",
  "quota",
  "wal",
  "handover",
] as const;
type Part = (typeof PARTS)[number];

const requested = process.argv.slice(2);
for (const part of requested) {
  if (!PARTS.includes(part as Part)) throw new Error(`unknown part ${part}; parts: ${PARTS.join(", ")}`);
}
const runs = (part: Part) => requested.length === 0 || requested.includes(part);
const log = (message: string) =>
  console.error(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}`);

const started = Date.now();
log("starting Postgres and the SQS endpoint");
const db = await startBenchDatabase();
const endpoint = await startBenchSqsEndpoint();
const meter = await CpuMeter.create(db.pool, () => endpoint.cpuMs());
const { rows } = await db.pool.query<{ server_version: string }>("show server_version");
const results: BenchResults = {
  startedAt: new Date(started).toISOString(),
  durationSeconds: 0,
  machine: {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? "unknown",
    node: process.version,
    postgres: rows[0]?.server_version ?? "unknown",
    postgresSource: db.server.source,
  },
  postgresSettings: { fsync: "off", synchronous_commit: "off", full_page_writes: "off", ...db.settings },
  backlog: BACKLOG,
};

try {
  if (runs("throughput")) {
    log(`(1)+(2) DB limit and relay at 0 ms, ${BACKLOG.events} events over ${BACKLOG.aggregates} aggregates`);
    const batchSizes = [...new Set(ZERO_LATENCY_TUNINGS.map((t) => t.batchSize))];
    const dbRuns = new Map<number, number[]>(batchSizes.map((size) => [size, []]));
    const relayRuns = new Map<RelayTuning, RelayRun[]>(ZERO_LATENCY_TUNINGS.map((t) => [t, []]));
    for (let i = 0; i < REPEATS; i++) {
      for (const size of batchSizes) dbRuns.get(size)?.push(await measureDbLimit(db.pool, BACKLOG, size));
      for (const tuning of ZERO_LATENCY_TUNINGS) {
        relayRuns.get(tuning)?.push(await measureRelay(db.pool, endpoint, BACKLOG, tuning, 0, meter));
      }
    }
    results.dbLimit = batchSizes.map((batchSize) => ({
      batchSize,
      rowsPerSecond: repeated(dbRuns.get(batchSize) ?? []),
    }));
    results.relayZeroLatency = summarize(relayRuns);
  }
  if (runs("load")) {
    log(
      "payload load: the direct statement against the walk alone, SQL per round, then the relay at 0 and 20 ms",
    );
    const sql = await measureLoadSql(db.pool, BACKLOG);
    const relay: NonNullable<BenchResults["loadAb"]>["relay"] = [];
    for (const sqsLatencyMs of [0, SQS_LATENCY_MS]) {
      const byVariant = { walk: [] as RelayRun[], direct: [] as RelayRun[] };
      for (let i = 0; i < REPEATS; i++) {
        for (const variant of ["walk", "direct"] as const) {
          byVariant[variant].push(
            await measureRelay(db.pool, endpoint, BACKLOG, DEFAULT_TUNING, sqsLatencyMs, meter, variant),
          );
        }
      }
      const [walk, direct] = summarize(new Map([[DEFAULT_TUNING, byVariant.walk]])).concat(
        summarize(new Map([[DEFAULT_TUNING, byVariant.direct]])),
      );
      if (walk === undefined || direct === undefined) throw new Error("no relay runs");
      relay.push({ sqsLatencyMs, walk, direct });
    }
    results.loadAb = { sql, relay };
  }
  if (runs("profile")) {
    log("CPU profile of the relay thread, default options, 0 ms");
    results.relayProfile = await profileRelay(db.pool, endpoint, BACKLOG, DEFAULT_TUNING, meter);
  }
  if (runs("sdk")) {
    log("the relay's SQS path alone: prepare and the SDK's pipeline against an in-process handler");
    results.sdkPipeline = await measureSdkPipeline();
  }
  if (runs("latency20")) {
    log(`(3) relay with ${SQS_LATENCY_MS} ms per SQS request`);
    const relayRuns = new Map<RelayTuning, RelayRun[]>(LATENCY_TUNINGS.map((t) => [t, []]));
    for (let i = 0; i < REPEATS; i++) {
      for (const tuning of LATENCY_TUNINGS) {
        relayRuns
          .get(tuning)
          ?.push(await measureRelay(db.pool, endpoint, BACKLOG, tuning, SQS_LATENCY_MS, meter));
      }
    }
    results.relay20ms = summarize(relayRuns);
  }
  if (runs("baseline")) {
    log(`(4) seed-style baseline, ${BASELINE_BACKLOG.events} events`);
    const baseline: number[] = [];
    for (let i = 0; i < REPEATS; i++)
      baseline.push(await measureSeedBaseline(db.pool, endpoint, BASELINE_BACKLOG, 0));
    results.seedBaseline = { events: BASELINE_BACKLOG.events, eventsPerSecond: repeated(baseline) };
    const baseline20: number[] = [];
    for (let i = 0; i < REPEATS; i++) {
      baseline20.push(await measureSeedBaseline(db.pool, endpoint, BASELINE_20MS_BACKLOG, SQS_LATENCY_MS));
    }
    results.seedBaseline20ms = {
      events: BASELINE_20MS_BACKLOG.events,
      eventsPerSecond: repeated(baseline20),
    };
  }
  if (runs("latency")) {
    log(`(5) latency at ${TARGET_LOAD.eventsPerSecond} events/s, polling and LISTEN/NOTIFY, alternating`);
    const latency: NonNullable<BenchResults["latency"]> = {
      ...TARGET_LOAD,
      sqsLatencyMs: SQS_LATENCY_MS,
      polling: [],
      notify: [],
    };
    for (let i = 0; i < REPEATS; i++) {
      latency.polling.push(
        await measureLatency(db.server.url, db.pool, endpoint, TARGET_LOAD, SQS_LATENCY_MS, false),
      );
      latency.notify.push(
        await measureLatency(db.server.url, db.pool, endpoint, TARGET_LOAD, SQS_LATENCY_MS, true),
      );
    }
    results.latency = latency;
  }
  if (runs("claim")) {
    log(
      `(6) claim with ${PUBLISHED_ROWS} published and ${CLAIM_PENDING.events} pending rows, then + ${HOT_ROWS} in one`,
    );
    results.claimAtScale = await measureClaimAtScale(db.pool, PUBLISHED_ROWS, CLAIM_PENDING, HOT_ROWS);
  }
  if (runs("hot")) {
    log(
      "(10) hot aggregate: one aggregate's drain rate; normal traffic's latency while a hot backlog drains",
    );
    const drain = [];
    for (const { sqsLatencyMs, events } of HOT_DRAIN) {
      const rates: number[] = [];
      for (let i = 0; i < REPEATS; i++) {
        const shape = { events, aggregates: 1 };
        rates.push(
          (await measureRelay(db.pool, endpoint, shape, DEFAULT_TUNING, sqsLatencyMs, meter)).eventsPerSecond,
        );
      }
      drain.push({ sqsLatencyMs, events, eventsPerSecond: repeated(rates) });
    }
    const hot: NonNullable<BenchResults["hotAggregate"]> = {
      drain,
      hotRows: HOT_ROWS,
      sqsLatencyMs: SQS_LATENCY_MS,
      withoutBacklog: [],
      withBacklog: [],
    };
    for (let i = 0; i < REPEATS; i++) {
      hot.withoutBacklog.push(
        await measureLatency(db.server.url, db.pool, endpoint, STEADY_LOAD, SQS_LATENCY_MS, false),
      );
      hot.withBacklog.push(
        await measureLatency(db.server.url, db.pool, endpoint, STEADY_LOAD, SQS_LATENCY_MS, false, HOT_ROWS),
      );
    }
    results.hotAggregate = hot;
  }
  if (runs("purge")) {
    log(`(7) relay throughput while the purge deletes ${PUBLISHED_ROWS} rows`);
    const purgeRuns = [];
    for (let i = 0; i < REPEATS; i++) {
      purgeRuns.push(
        await measurePurgeInterference(
          db.server.url,
          db.pool,
          endpoint,
          PUBLISHED_ROWS,
          PURGE_BACKLOG,
          meter,
        ),
      );
    }
    results.purge = { publishedRows: PUBLISHED_ROWS, backlogEvents: PURGE_BACKLOG.events, runs: purgeRuns };
  }
  if (runs("bundle")) {
    log("relay bundle size and cold start");
    results.bundle = await measureRelayBundle({
      DATABASE_URL: db.server.url,
      OUTBOX_QUEUE_URL: `${endpoint.url}/000000000000/bench.fifo`,
      AWS_REGION: "us-east-1",
      AWS_ACCESS_KEY_ID: "test",
      AWS_SECRET_ACCESS_KEY: "test",
    });
  }
  if (runs("enqueue")) {
    log("(8) enqueue throughput with and without the commit-order trigger");
    results.enqueue = await measureEnqueueGuards(
      db.server.url,
      db.pool,
      ENQUEUE_SHAPES,
      REPEATS,
      ENQUEUE_DURATION_MS,
      meter,
    );
  }
  if (runs("sizecheck")) {
    log("the write API's size check and payload checks, ms per MiB, at 16 MiB");
    results.sizeCheck = measureSizeCheck();
  }
  if (runs("memory")) {
    results.relayMemory = [];
    log(`relay peak RSS draining ${LARGE_MEMORY_LOAD.events} payloads of 64 MiB through the claim check`);
    const sink = await startS3Sink();
    try {
      results.relayMemory.push(
        await measureRelayMemory(
          db.server.url,
          db.pool,
          endpoint,
          LARGE_MEMORY_LOAD,
          DEFAULT_RELAY_OPTIONS.batchMaxBytes,
          sink.url,
        ),
      );
    } finally {
      await sink.close();
    }
    log(`claim check, 64 MiB payloads: ${JSON.stringify(results.relayMemory[0])}`);
    log(`relay peak RSS draining ${MEMORY_LOAD.events} events of ~1 MiB, default options, then unbounded`);
    for (const budget of [DEFAULT_RELAY_OPTIONS.batchMaxBytes, UNBOUNDED_BATCH_BYTES]) {
      results.relayMemory.push(
        await measureRelayMemory(db.server.url, db.pool, endpoint, MEMORY_LOAD, budget),
      );
    }
  }
  if (runs("consumer")) {
    log(`(9) consumer records/s, inbox against a plain handler, ${CONSUMER_SHAPE.messages} messages`);
    await prepareConsumerBench(db.pool);
    const consumerRuns = new Map<ConsumerVariant, number[]>(CONSUMER_VARIANTS.map((v) => [v, []]));
    for (let i = 0; i < REPEATS; i++) {
      for (const variant of CONSUMER_VARIANTS) {
        consumerRuns
          .get(variant)
          ?.push(await measureConsumer(db.pool, endpoint.url, CONSUMER_SHAPE, variant));
      }
    }
    results.consumer = summarizeConsumer(CONSUMER_SHAPE, consumerRuns);
  }
  if (runs("destinations")) {
    log(`relay to each destination (${DESTINATIONS.join(", ")}), 0 and 20 ms, default options, interleaved`);
    const cases = [0, SQS_LATENCY_MS].flatMap((latencyMs) =>
      DESTINATIONS.map((destination) => ({ destination, latencyMs })),
    );
    const byCase = new Map(cases.map((c) => [c, [] as RelayRun[]]));
    for (let i = 0; i < DESTINATION_REPEATS; i++) {
      for (const c of cases) {
        const tuning = { ...DEFAULT_TUNING, destination: c.destination };
        byCase.get(c)?.push(await measureRelay(db.pool, endpoint, BACKLOG, tuning, c.latencyMs, meter));
      }
    }
    results.destinations = cases.map((c): DestinationThroughput => {
      const caseRuns = byCase.get(c) ?? [];
      const sorted = [...caseRuns].sort((a, b) => a.eventsPerSecond - b.eventsPerSecond);
      const middle = sorted[Math.floor((sorted.length - 1) / 2)] as RelayRun;
      return {
        ...c,
        eventsPerSecond: repeated(caseRuns.map((run) => run.eventsPerSecond)),
        cpuPer1k: middle.cpuPer1k,
      };
    });
  }
  // The CPU-share figures belong with the throughput ones (issue 33): `throughput` runs them too.
  if (runs("quota") || runs("throughput")) {
    log(
      `relay process under a Lambda CPU share (${QUOTA_MEMORY_MB.map((mb) => mb ?? "no quota").join(", ")} MB), SQS +${SQS_LATENCY_MS} ms`,
    );
    const quotaRuns: RelayQuotaRun[] = [];
    for (let i = 0; i < QUOTA_REPEATS; i++) {
      for (const memoryMb of QUOTA_MEMORY_MB) {
        quotaRuns.push(
          await measureRelayQuota(db.server.url, db.pool, endpoint, BACKLOG, memoryMb, SQS_LATENCY_MS),
        );
      }
    }
    results.relayQuota = quotaRuns;
  }
  if (runs("handover")) {
    log(
      `hand-over under a jittered schedule: T = ${HANDOVER.tickMs} ms, ${HANDOVER.runMs} ms each: plain, successors killed, idle stop`,
    );
    const { killAfterMs, idleStopMs, ...shape } = HANDOVER;
    results.handover = [
      await measureHandover(db.server.url, db.pool, endpoint, {
        ...shape,
        killAfterMs: null,
        idleStopMs: null,
      }),
      await measureHandover(db.server.url, db.pool, endpoint, { ...shape, killAfterMs, idleStopMs: null }),
      await measureHandover(db.server.url, db.pool, endpoint, { ...shape, killAfterMs: null, idleStopMs }),
    ];
  }
  if (runs("wal")) {
    log(
      "(13)+(14) retention modes side by side: WAL by stage and record type, dead tuples, DB-only limit, relay 0/20 ms, claim; record variants",
    );
    results.retention = {
      modes: await measureRetentionModes(
        db.pool,
        endpoint,
        meter,
        {
          backlog: BACKLOG,
          claimBacklog: CLAIM_PENDING,
          repeats: RETENTION_REPEATS,
          latencyMs: SQS_LATENCY_MS,
        },
        log,
      ),
      recordVariants: await measureRecordVariants(db.pool, CLAIM_PENDING),
    };
  }
} finally {
  await endpoint.close();
  await db.stop();
}

results.durationSeconds = Math.round((Date.now() - started) / 1000);
const file = new URL(
  `./results/${results.startedAt.replaceAll(":", "-").slice(0, 19)}.json`,
  import.meta.url,
);
await mkdir(new URL("./results/", import.meta.url), { recursive: true });
await writeFile(file, `${JSON.stringify(results, null, 2)}\n`);
console.log(markdownReport(results));
if (results.consumer !== undefined) console.log(`\n${consumerMarkdown(results.consumer)}`);
if (results.walPerEvent !== undefined) console.log(`\n${walPerEventMarkdown(results.walPerEvent)}`);
if (results.retention !== undefined) {
  console.log(`\n${retentionMarkdown(results.retention.modes, results.retention.recordVariants)}`);
}
log(`results written to ${file.pathname}`);

/** Median run per tuning, with its round profile. */
function summarize(byTuning: Map<RelayTuning, RelayRun[]>): TunedThroughput[] {
  return [...byTuning].map(([tuning, runs]) => {
    const sorted = [...runs].sort((a, b) => a.eventsPerSecond - b.eventsPerSecond);
    const middle = sorted[Math.floor((sorted.length - 1) / 2)] as RelayRun;
    return {
      tuning,
      eventsPerSecond: repeated(runs.map((run) => run.eventsPerSecond)),
      msPerRound: middle.msPerRound,
      rounds: middle.rounds,
      cpuPer1k: middle.cpuPer1k,
      machineBusy: middle.machineBusy,
      cpuRuns: runs.map((run) => run.cpuPer1k),
    };
  });
}
