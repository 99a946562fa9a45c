import type { DestinationKind } from "../functions/shared/destinations/destination.ts";
import { DEFAULT_RELAY_OPTIONS } from "../functions/shared/relay/engine.ts";
import type { CpuReading } from "./lib/cpuMeter.ts";
import type { PhaseTotals } from "./lib/roundProfile.ts";
import type { StallReport } from "./lib/stallReport.ts";
import type { Repeated } from "./lib/stats.ts";
import { listRuns, markdownTable, formatNumber as n, verdict, verdictOfRuns } from "./lib/table.ts";
import type { ClaimAtScale } from "./measures/claimAtScale.ts";
import type { ConsumerThroughput } from "./measures/consumerThroughput.ts";
import { type EnqueueResults, enqueueTable } from "./measures/enqueueThroughput.ts";
import type { HandoverRun } from "./measures/handover.ts";
import type { LatencyRun } from "./measures/latency.ts";
import type { LoadSqlAb } from "./measures/loadAb.ts";
import type { PurgeInterferenceRun } from "./measures/purgeInterference.ts";
import type { RelayBundle } from "./measures/relayBundle.ts";
import type { RelayMemoryRun } from "./measures/relayMemory.ts";
import type { RelayProfile } from "./measures/relayProfile.ts";
import type { RelayQuotaRun } from "./measures/relayQuota.ts";
import type { RelayTuning } from "./measures/relayThroughput.ts";
import type { RecordVariant, RetentionModeRun } from "./measures/retention.ts";
import type { SdkPipelineResult } from "./measures/sdkPipeline.ts";
import type { SizeCheckShape } from "./measures/sizeCheck.ts";
import type { WalPerEventRun } from "./measures/walPerEvent.ts";

export const TARGETS = {
  relayToDbLimit: 0.6,
  relayToBaseline: 10,
  /** Default options against a 20 ms SQS. */
  relayAt20msEventsPerSecond: 10_000,
  /** Commit→publish p99 at 3,000 events/s, polling and NOTIFY alike, in every run. */
  dwellP99Ms: 100,
  /** ... and no event waits longer than this in any run: a second-long stall is a miss even if p99 is fine. */
  dwellMaxMs: 500,
  /** The relay thread's CPU per event draining at 0 ms, default options (µs = CPU ms per 1,000 events). */
  relayCpuUsPerEvent: 35,
  claimP99Ms: 10,
  purgeRatio: 0.8,
  /** The Lambda's memory; "well under" is read as ≤ 75 % of it, the rest is headroom. */
  relayPeakRssMiB: 512,
  /** Normal traffic's commit→publish p99 while a hot aggregate's backlog drains ÷ the same without it. */
  hotBacklogLatencyRatio: 1.5,
} as const;

export interface TunedThroughput {
  tuning: RelayTuning;
  eventsPerSecond: Repeated;
  /** Mean ms per round by phase, from the median run. */
  msPerRound: PhaseTotals;
  rounds: number;
  /** CPU ms per 1,000 events by party, and the three's share of the machine, from the median run. */
  cpuPer1k: CpuReading;
  machineBusy: number;
  /** The same per run, in run order (absent in results from before 2026-12-01's issue 23). */
  cpuRuns?: CpuReading[];
}

export interface BenchResults {
  startedAt: string;
  durationSeconds: number;
  machine: { cpus: number; cpuModel: string; node: string; postgres: string; postgresSource: string };
  postgresSettings: Record<string, string>;
  backlog: { events: number; aggregates: number };
  dbLimit?: { batchSize: number; rowsPerSecond: Repeated }[];
  relayZeroLatency?: TunedThroughput[];
  relay20ms?: TunedThroughput[];
  seedBaseline?: { events: number; eventsPerSecond: Repeated };
  seedBaseline20ms?: { events: number; eventsPerSecond: Repeated };
  latency?: {
    eventsPerSecond: number;
    durationMs: number;
    sqsLatencyMs: number;
    polling: LatencyRun[];
    notify: LatencyRun[];
  };
  claimAtScale?: ClaimAtScale;
  hotAggregate?: {
    /** One aggregate's backlog drained alone (default options): its ceiling, at 0 and 20 ms per request. */
    drain: { sqsLatencyMs: number; events: number; eventsPerSecond: Repeated }[];
    /** Latency runs (polling, SQS +20 ms) alternating without and with a hot backlog of `hotRows`. */
    hotRows: number;
    sqsLatencyMs: number;
    withoutBacklog: LatencyRun[];
    withBacklog: LatencyRun[];
  };
  purge?: { publishedRows: number; backlogEvents: number; runs: PurgeInterferenceRun[] };
  relayProfile?: RelayProfile;
  sdkPipeline?: SdkPipelineResult;
  bundle?: RelayBundle;
  enqueue?: EnqueueResults;
  /** The write API's size check (outbox/jsonbSize.ts) and its checks before the INSERT, ms per MiB (measures/sizeCheck.ts). */
  sizeCheck?: SizeCheckShape[];
  relayMemory?: RelayMemoryRun[];
  consumer?: ConsumerThroughput;
  /** (13) WAL bytes per event by stage, and SendMessageBatch requests per event (measures/walPerEvent.ts). */
  walPerEvent?: WalPerEventRun[];
  /** (14) Each OUTBOX_RETENTION mode side by side, and ways to record "published" (measures/retention.ts). */
  retention?: { modes: RetentionModeRun[]; recordVariants: RecordVariant[] };
  /** The relay's process under the CPU share of a Lambda memory size, SQS +20 ms (measures/relayQuota.ts). */
  relayQuota?: RelayQuotaRun[];
  /** The relay's hand-over under a scaled jittered schedule, without and with killed successors (measures/handover.ts). */
  handover?: HandoverRun[];
  /** The same relay and backlog to an SQS FIFO queue and to an EventBridge bus, at each endpoint latency. */
  destinations?: DestinationThroughput[];
  /** The payload load's direct statement against the walk alone (as before it), interleaved in one run. */
  loadAb?: {
    sql: LoadSqlAb;
    relay: { sqsLatencyMs: number; walk: TunedThroughput; direct: TunedThroughput }[];
  };
}

export interface DestinationThroughput {
  destination: Exclude<DestinationKind, "routes">;
  latencyMs: number;
  eventsPerSecond: Repeated;
  cpuPer1k: CpuReading;
}

const tuningLabel = (t: RelayTuning) =>
  `batch ${t.batchSize}, concurrency ${t.concurrency}${(t.loops ?? 1) > 1 ? `, ${t.loops} loops (pipelining preview)` : ""}`;
const pipelined = (t: RelayTuning) => (t.loops ?? 1) > 1;
const isDefault = (t: RelayTuning) =>
  t.batchSize === DEFAULT_RELAY_OPTIONS.batchSize &&
  t.concurrency === DEFAULT_RELAY_OPTIONS.concurrency &&
  !pipelined(t);
const medianOf = (values: number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor((values.length - 1) / 2)] ?? NaN;

/** The fastest configuration the relay supports today (pipelining previews excluded). */
function best(runs: TunedThroughput[] | undefined) {
  return runs
    ?.filter((run) => !pipelined(run.tuning))
    .reduce((a, b) => (b.eventsPerSecond.median > a.eventsPerSecond.median ? b : a));
}

/** The summary table: every measurement, its target and whether this run met it. */
export function summaryTable(r: BenchResults): string {
  const rows: (string | number)[][] = [];
  const dbAt = (batch: number) => r.dbLimit?.find((d) => d.batchSize === batch)?.rowsPerSecond.median;
  const relayDefault = r.relayZeroLatency?.find((t) => isDefault(t.tuning));
  const relayBest = best(r.relayZeroLatency);
  for (const d of r.dbLimit ?? []) {
    rows.push([
      `1. DB limit: claim + mark, no publish (batch ${d.batchSize})`,
      `${n(d.rowsPerSecond.median)} rows/s`,
      spread(d.rowsPerSecond),
      "–",
      "",
    ]);
  }
  for (const [label, t] of [
    ["default", relayDefault],
    ["best", relayBest],
  ] as const) {
    if (t === undefined) continue;
    const db = dbAt(t.tuning.batchSize);
    const ratio = db === undefined ? NaN : t.eventsPerSecond.median / db;
    // Runs were interleaved (DB limit i, then relay i): each relay run against the DB limit taken beside it.
    const dbRuns = r.dbLimit?.find((d) => d.batchSize === t.tuning.batchSize)?.rowsPerSecond.runs ?? [];
    const ratios = t.eventsPerSecond.runs.map((rate, i) => rate / (dbRuns[i] ?? NaN));
    rows.push([
      `2. relay → zero-latency SQS, ${label} (${tuningLabel(t.tuning)})`,
      `${n(t.eventsPerSecond.median)} ev/s = ${n(ratio, 2)} × (1)`,
      `runs: ${listRuns(t.eventsPerSecond.runs)} ev/s = ${listRuns(ratios, 2)} ×`,
      `≥ ${TARGETS.relayToDbLimit} × (1)`,
      verdictOfRuns(ratios, (x) => x >= TARGETS.relayToDbLimit),
    ]);
  }
  if (relayDefault?.cpuRuns !== undefined) {
    // CPU ms per 1,000 events is µs per event. Far steadier than events/s on a shared machine.
    const relayUs = relayDefault.cpuRuns.map((cpu) => cpu.relay);
    rows.push([
      `2. relay thread CPU per event, zero-latency SQS, default (${tuningLabel(relayDefault.tuning)})`,
      `${n(medianOf(relayUs), 1)} µs`,
      `runs: ${listRuns(relayUs, 1)} µs; SQS endpoint ${n(relayDefault.cpuPer1k.endpoint, 1)}, Postgres ${n(relayDefault.cpuPer1k.postgres, 1)} µs (median run)`,
      `≤ ${TARGETS.relayCpuUsPerEvent} µs`,
      verdictOfRuns(relayUs, (us) => us <= TARGETS.relayCpuUsPerEvent),
    ]);
  }
  if (r.sdkPipeline !== undefined) {
    // The floor under the row above: what the SQS path costs with no socket, database or other thread.
    const s = r.sdkPipeline;
    const total = s.sdkUs.map((us, i) => us + (s.prepareUs[i] ?? 0));
    rows.push([
      "2. relay's SQS path alone (prepare + SDK pipeline, in-process handler), CPU per event",
      `${n(medianOf(total), 1)} µs`,
      `runs: ${listRuns(total, 1)} µs = prepare ${listRuns(s.prepareUs, 1)} + SDK ${listRuns(s.sdkUs, 1)} (canned handler's ${n(medianOf(s.handlerUs), 1)} µs taken out)`,
      "–",
      "",
    ]);
  }
  const best20 = best(r.relay20ms);
  const default20 = r.relay20ms?.find((t) => isDefault(t.tuning));
  for (const [label, t] of [
    ["default", default20],
    ["best", best20],
  ] as const) {
    if (t === undefined) continue;
    rows.push([
      `3. relay → SQS + 20 ms/request, ${label} (${tuningLabel(t.tuning)})`,
      `${n(t.eventsPerSecond.median)} ev/s`,
      `runs: ${listRuns(t.eventsPerSecond.runs)} ev/s`,
      `≥ ${n(TARGETS.relayAt20msEventsPerSecond)} ev/s in every run`,
      verdictOfRuns(t.eventsPerSecond.runs, (rate) => rate >= TARGETS.relayAt20msEventsPerSecond),
    ]);
  }
  if (r.seedBaseline) {
    const base = r.seedBaseline.eventsPerSecond.median;
    rows.push([
      `4. seed-style baseline (Go article), zero-latency SQS`,
      `${n(base)} ev/s`,
      spread(r.seedBaseline.eventsPerSecond),
      "–",
      "",
    ]);
    for (const [label, t] of [
      ["default", relayDefault],
      ["best", relayBest],
    ] as const) {
      if (t === undefined) continue;
      const ratio = t.eventsPerSecond.median / base;
      // The baseline's runs came after all relay runs (a part of their own): each relay run ÷ the median baseline.
      const ratios = t.eventsPerSecond.runs.map((rate) => rate / base);
      rows.push([
        `4. relay ${label} ÷ baseline`,
        `${n(ratio, 1)} ×`,
        `runs: ${listRuns(ratios, 1)} ×`,
        `≥ ${TARGETS.relayToBaseline} ×`,
        verdictOfRuns(ratios, (x) => x >= TARGETS.relayToBaseline),
      ]);
    }
  }
  if (r.seedBaseline20ms) {
    const base = r.seedBaseline20ms.eventsPerSecond.median;
    rows.push([
      `4. seed-style baseline, SQS + ${20} ms/request (${r.seedBaseline20ms.events} events)`,
      `${n(base)} ev/s`,
      spread(r.seedBaseline20ms.eventsPerSecond),
      "–",
      "",
    ]);
    for (const [label, t] of [
      ["default", default20],
      ["best", best20],
    ] as const) {
      if (t === undefined) continue;
      const ratio = t.eventsPerSecond.median / base;
      rows.push([`4. relay ${label} ÷ baseline, both at 20 ms`, `${n(ratio, 1)} ×`, "", "–", ""]);
    }
  }
  if (r.latency) {
    const l = r.latency;
    for (const [label, runs] of [
      ["polling (no NOTIFY)", l.polling],
      ["LISTEN/NOTIFY", l.notify],
    ] as const) {
      const p99 = medianOf(runs.map((run) => run.p99));
      rows.push([
        `5. commit→publish latency, dwell, ${label}, ${l.eventsPerSecond} ev/s, SQS +${l.sqsLatencyMs} ms`,
        `p50 ${n(medianOf(runs.map((run) => run.p50)))} / p95 ${n(medianOf(runs.map((run) => run.p95)))} / p99 ${n(p99)} ms`,
        `p99 runs: ${listRuns(runs.map((run) => run.p99))} ms; max runs: ${listRuns(runs.map((run) => run.max))} ms; producer COMMIT p99 ${n(medianOf(runs.map((run) => run.commitP99)), 2)} ms`,
        `p99 ≤ ${n(TARGETS.dwellP99Ms)} ms and max ≤ ${n(TARGETS.dwellMaxMs)} ms in every run`,
        verdictOfRuns(runs, (run) => run.p99 <= TARGETS.dwellP99Ms && run.max <= TARGETS.dwellMaxMs),
      ]);
    }
  }
  if (r.claimAtScale) {
    const c = r.claimAtScale;
    const onBigTable = `6. claim (batch ${DEFAULT_RELAY_OPTIONS.batchSize}), ${n(c.publishedRows)} published + ${n(c.pendingRows)} pending rows,`;
    for (const [label, t] of [
      [`${onBigTable} statistics from before the backlog (no row pending at ANALYZE)`, c.stale],
      [`${onBigTable} statistics that saw the backlog`, c.fresh],
      [
        `${onBigTable} + one aggregate with ${n(c.hot.hotRows)} waiting rows (statistics from before it)`,
        c.hot,
      ],
      ...(c.afterPublishedBy ?? []).map(
        ({ retention, recordMs, claims }) =>
          [
            `6. claim over ${n(c.pendingRows)} pending rows right after ${n(c.publishedRows)} events were published with retention ${retention} (recorded in ${n(recordMs / 1000, 1)} s), before vacuum`,
            claims,
          ] as const,
      ),
    ] as const) {
      // Results from before issue 23 have one set of claims per state.
      const p99Runs = t.runs?.map((run) => run.p99) ?? [t.p99];
      rows.push([
        label,
        `p50 ${n(t.p50, 2)} / p99 ${n(t.p99, 2)} ms`,
        `p99 runs: ${listRuns(p99Runs, 2)} ms (${t.claims} claims); slowest ${listRuns(t.slowest, 1)} ms; EXPLAIN ${n(t.explain.executionMs, 2)} ms, ${n(t.explain.sharedHit)} buffers hit: ${t.explain.plan}`,
        `p99 ≤ ${TARGETS.claimP99Ms} ms in every run`,
        verdictOfRuns(p99Runs, (p99) => p99 <= TARGETS.claimP99Ms),
      ]);
    }
  }
  if (r.hotAggregate) {
    const h = r.hotAggregate;
    for (const d of h.drain) {
      rows.push([
        `10. one aggregate alone: its drain rate (the per-aggregate ceiling), SQS +${d.sqsLatencyMs} ms, ${d.events} events`,
        `${n(d.eventsPerSecond.median)} ev/s`,
        spread(d.eventsPerSecond),
        "–",
        "",
      ]);
    }
    const p99 = (runs: LatencyRun[]) => medianOf(runs.map((run) => run.p99));
    const ratio = p99(h.withBacklog) / p99(h.withoutBacklog);
    // Alternated (without i, then with i): each pair's ratio.
    const ratios = h.withBacklog.map((run, i) => run.p99 / (h.withoutBacklog[i]?.p99 ?? NaN));
    const hotRates = h.withBacklog.map((run) => run.hot?.eventsPerSecond ?? NaN);
    rows.push([
      `10. commit→publish latency of normal traffic while one aggregate with ${n(h.hotRows)} waiting rows drains (polling, SQS +${h.sqsLatencyMs} ms)`,
      `p50 ${n(medianOf(h.withBacklog.map((run) => run.p50)))} / p99 ${n(p99(h.withBacklog))} ms = ${n(ratio, 2)} × without (p99 ${n(p99(h.withoutBacklog))} ms)`,
      `p99 runs with: ${listRuns(h.withBacklog.map((run) => run.p99))} ms, without: ${listRuns(h.withoutBacklog.map((run) => run.p99))} ms (pairs ${listRuns(ratios, 2)} ×); hot aggregate drained at ${listRuns(hotRates)} ev/s meanwhile`,
      `≤ ${TARGETS.hotBacklogLatencyRatio} × without in every pair`,
      verdictOfRuns(ratios, (x) => x <= TARGETS.hotBacklogLatencyRatio),
    ]);
  }
  if (r.purge) {
    const p = r.purge;
    const ratio = medianOf(p.runs.map((run) => run.ratio));
    rows.push([
      `7. relay while purge deletes ${n(p.publishedRows)} published rows`,
      `${n(ratio, 2)} × relay alone`,
      `ratios ${p.runs.map((run) => n(run.ratio, 2)).join(", ")}; purge ${n(medianOf(p.runs.map((run) => run.purge.rowsPerSecond)))} rows/s; Postgres busy ${n(medianOf(p.runs.map((run) => run.postgresCores.alone)), 2)} cores alone, ${n(medianOf(p.runs.map((run) => run.postgresCores.duringPurge)), 2)} during the purge`,
      `≥ ${TARGETS.purgeRatio} × in every run`,
      verdictOfRuns(p.runs, (run) => run.ratio >= TARGETS.purgeRatio),
    ]);
    const pacedRatio = medianOf(p.runs.map((run) => run.paced.ratio));
    rows.push([
      "7. same, purge paused as long as each batch took (engine change preview)",
      `${n(pacedRatio, 2)} × relay alone`,
      `ratios ${p.runs.map((run) => n(run.paced.ratio, 2)).join(", ")}; purge ${n(medianOf(p.runs.map((run) => run.paced.rowsPerSecond)))} rows/s; Postgres busy ${n(medianOf(p.runs.map((run) => run.postgresCores.duringPacedPurge)), 2)} cores`,
      `≥ ${TARGETS.purgeRatio} × in every run`,
      verdictOfRuns(p.runs, (run) => run.paced.ratio >= TARGETS.purgeRatio),
    ]);
  }
  if (r.bundle) {
    const b = r.bundle;
    rows.push([
      "relay Lambda bundle (esbuild, ESM, minified but names, SDK bundled)",
      `${n(b.bytes / 1024)} KiB (${n(b.gzipBytes / 1024)} KiB gzip)`,
      "no source map",
      "–",
      "",
    ]);
    rows.push([
      "relay cold start: import of the bundle in a fresh node",
      `${n(b.importMs)} ms`,
      `process start → handler ready ${n(b.processToReadyMs)} ms (median of ${b.samples})`,
      "–",
      "",
    ]);
  }
  for (const shape of r.sizeCheck ?? []) {
    rows.push([
      `enqueue's size check, ${shape.name} (${n(shape.bytes / 1_048_576)} MiB)`,
      `${n(shape.sizeMsPerMiB, 2)} ms/MiB`,
      `all checks before the INSERT (serialize, SQS characters, size): ${n(shape.checksMsPerMiB)} ms/MiB; median of ${shape.samples}`,
      "linear, no stack overflow",
      "",
    ]);
  }
  for (const m of r.relayMemory ?? []) {
    const bounded = m.batchMaxBytes < 1_073_741_824;
    rows.push([
      bounded
        ? `relay peak RSS, ${m.events} events of ~1 MiB, default options (budget ${n(m.batchMaxBytes / 1_048_576)} MiB per round)`
        : `same, no byte budget (every claimed payload loaded: the relay before the budget)`,
      `${n(m.peakRssMiB)} MiB`,
      `idle ${n(m.idleRssMiB)} MiB; drained in ${n(m.seconds, 1)} s`,
      bounded ? `well under ${TARGETS.relayPeakRssMiB} MiB` : "–",
      bounded ? verdict(m.peakRssMiB <= TARGETS.relayPeakRssMiB * 0.75) : "",
    ]);
  }
  return markdownTable(["measurement", "result (median)", "spread / detail", "target", ""], rows);
}

/** Where a round's time goes, per tuning: the profile behind the throughput numbers. */
export function phaseTable(r: BenchResults): string {
  const rows: (string | number)[][] = [];
  for (const [latency, runs] of [
    ["0 ms", r.relayZeroLatency],
    ["20 ms", r.relay20ms],
  ] as const) {
    for (const t of runs ?? []) {
      const p = t.msPerRound;
      const load = p.load ?? 0; // results from before the load phase was split out of the claim
      const total = p.claim + load + p.publish + p.record + p.tx;
      const c = t.cpuPer1k;
      rows.push([
        latency,
        tuningLabel(t.tuning),
        `${n(t.eventsPerSecond.median)} ev/s`,
        `${n(p.claim, 2)} / ${n(load, 2)} / ${n(p.publish, 2)} / ${n(p.record, 2)} / ${n(p.tx, 2)}`,
        `${n((100 * p.publish) / total)} %`,
        `${n(c.relay)} / ${n(c.endpoint)} / ${n(c.postgres)}`,
        `${n(100 * t.machineBusy)} %`,
      ]);
    }
  }
  return markdownTable(
    [
      "SQS latency",
      "relay options",
      "throughput",
      "ms per round: claim / load / publish / record / tx",
      "publish share",
      "CPU ms per 1k events: relay / SQS endpoint / Postgres",
      "2 cores busy",
    ],
    rows,
  );
}

function spread(r: Repeated): string {
  return `${r.runs.length} runs: ${n(r.min)}–${n(r.max)}`;
}

/** The relay thread's CPU by package, per event (from one profiled run). */
export function profileTable(p: RelayProfile): string {
  const rows = p.shares.map((share) => [share.where, n(share.usPerEvent, 1), `${n(100 * share.share)} %`]);
  const listed = p.shares.reduce((sum, share) => sum + share.usPerEvent, 0);
  rows.push([
    "everything else",
    n(p.busyUsPerEvent - listed, 1),
    `${n((100 * (p.busyUsPerEvent - listed)) / p.busyUsPerEvent)} %`,
  ]);
  rows.push(["**all busy time**", n(p.busyUsPerEvent, 1), "100 %"]);
  return `${tuningLabel(p.tuning)}, ${n(p.eventsPerSecond)} ev/s under the profiler\n\n${markdownTable(["where", "µs per event", "share of busy time"], rows)}`;
}

/** The payload load, direct statement vs the walk alone: SQL per round, then the relay's throughput. */
export function loadAbTable(a: NonNullable<BenchResults["loadAb"]>): string {
  const sqlRows = (["walk", "direct"] as const).map((variant) => {
    const t = a.sql[variant];
    return [
      variant === "walk" ? "walk alone (before)" : "direct statement (as shipped)",
      `${n(t.loadP50, 2)} / ${n(t.loadP99, 2)} ms`,
      t.statements,
      `${n(t.explain.executionMs, 2)} ms + ${n(t.explain.planningMs, 2)} ms planning, ${n(t.explain.sharedHit)} buffers`,
      `${n(t.claimP50, 2)} ms`,
    ];
  });
  const relayRows = a.relay.flatMap((r) =>
    (["walk", "direct"] as const).map((variant) => {
      const t = r[variant];
      const p = t.msPerRound;
      return [
        `${r.sqsLatencyMs} ms`,
        variant,
        `${n(t.eventsPerSecond.median)} ev/s${variant === "direct" ? ` = ${n(t.eventsPerSecond.median / r.walk.eventsPerSecond.median, 2)} ×` : ""}`,
        spread(t.eventsPerSecond),
        `${n(p.claim, 2)} / ${n(p.load, 2)} / ${n(p.publish, 2)} / ${n(p.record, 2)} / ${n(p.tx, 2)}`,
        `${n(t.cpuPer1k.postgres)}`,
      ];
    }),
  );
  return [
    `Claims of ${a.sql.batchSize} rows, ${a.sql.walk.rounds} rounds per variant, interleaved:`,
    markdownTable(
      [
        "load",
        "client ms p50 / p99",
        "statements",
        "EXPLAIN of its data statement (median)",
        "claim p50 (control)",
      ],
      sqlRows,
    ),
    markdownTable(
      [
        "SQS latency",
        "load",
        "throughput (default options)",
        "spread",
        "ms per round: claim / load / publish / record / tx",
        "Postgres CPU ms per 1k events",
      ],
      relayRows,
    ),
  ].join("\n\n");
}

/**
 * The latency runs' stall report (lib/stallReport.ts): per run the phase tails, both threads' pauses and what
 * the database did; then every latency spike and each run's slowest rounds, with the evidence that overlaps them.
 */
export function stallTable(r: BenchResults): string {
  const labelled = [
    ...(r.latency?.polling ?? []).map((run, i) => [`5. polling #${i + 1}`, run] as const),
    ...(r.latency?.notify ?? []).map((run, i) => [`5. NOTIFY #${i + 1}`, run] as const),
    ...(r.hotAggregate?.withoutBacklog ?? []).map((run, i) => [`10. without #${i + 1}`, run] as const),
    ...(r.hotAggregate?.withBacklog ?? []).map((run, i) => [`10. hot backlog #${i + 1}`, run] as const),
  ].filter(([, run]) => run.stalls !== undefined);
  if (labelled.length === 0) return "";
  const ms = (value: number | undefined) => (value === undefined ? "–" : n(value, 1));
  const runRows = labelled.map(([label, run]) => {
    const st = run.stalls as StallReport;
    const p = (name: string) => `${ms(st.phases[name]?.p99)} / ${ms(st.phases[name]?.max)}`;
    const thread = (t: StallReport["relayThread"]) =>
      `${ms(t.delayMaxMs)} / ${n(t.gcTotalMs)} (${t.gcCount}) / ${ms(Math.max(0, ...t.long.filter((x) => x.what.endsWith("GC")).map((x) => x.ms)))} / ${n(t.heapUsedMiB.end)}`;
    const counters = st.database.counters;
    const moved = (name: string) => (counters[name]?.end ?? 0) - (counters[name]?.start ?? 0);
    const db = [
      `${moved("autovacuums")} autovacuum, ${moved("autoanalyzes")} autoanalyze, ${moved("checkpoints")} checkpoints`,
      `${st.database.conditions.filter((c) => c.what.startsWith("lock wait")).length} lock-wait spells`,
      `${st.database.plans.length} claim plan${st.database.plans.length === 1 ? "" : "s"}`,
    ].join(", ");
    const cpu = st.cpuMs;
    return [
      label,
      `${n(run.p99)} / ${n(run.max)}`,
      st.rounds,
      cpu === undefined
        ? "–"
        : `${n(cpu.relayThread)} / ${n(cpu.endpointThread)} / ${n(cpu.otherThreads)} in ${n(cpu.wallMs)}`,
      p("round"),
      `${p("claim")}; ${p("publish")}; ${p("record")}; ${p("commit")}`,
      `${p("connect")}; ${p("idle")}`,
      thread(st.relayThread),
      thread(st.endpointThread),
      db,
    ];
  });
  const eventRows = labelled.flatMap(([label, run]) => {
    const st = run.stalls as StallReport;
    return [
      ...st.spikes.map((spike) => [
        label,
        `spike: ${spike.events} events > ${st.spikeThresholdMs} ms, max ${n(spike.maxMs)} ms`,
        `+${n(spike.fromMs)}…${n(spike.toMs)} ms`,
        spike.cause,
      ]),
      ...st.slowestRounds
        .slice(0, 3)
        .map((round) => [
          label,
          `round of ${n(round.totalMs)} ms, ${round.rows} rows`,
          `+${n(round.atMs)} ms`,
          round.cause,
        ]),
    ];
  });
  return [
    markdownTable(
      [
        "run",
        "p99 / max ms",
        "rounds",
        "CPU ms: relay thread / endpoint thread / other threads (GC helpers, JIT, libuv) in wall ms",
        "round ms p99 / max",
        "claim; publish; record; commit (p99 / max)",
        "pool wait; idle wait (p99 / max)",
        "relay thread: loop delay max / GC ms (count) / longest GC / heap MiB",
        "SQS endpoint thread: the same",
        "database during the run",
      ],
      runRows,
    ),
    markdownTable(["run", "what", "when (since the relay started)", "overlapping, largest first"], eventRows),
  ].join("\n\n");
}

/** Everything `npm run bench` prints: the summary against the targets, then the profiles behind it. */
export function markdownReport(r: BenchResults): string {
  const m = r.machine;
  const sections = [
    `## Bench ${r.startedAt} (${m.cpus} × ${m.cpuModel}, Node ${m.node}, Postgres ${m.postgres} ${m.postgresSource}, ${r.durationSeconds} s)`,
    summaryTable(r),
  ];
  if (r.relayZeroLatency || r.relay20ms) sections.push("### Where a relay round's time goes", phaseTable(r));
  if (r.loadAb) sections.push("### Payload load: direct statement vs the walk alone", loadAbTable(r.loadAb));
  const stalls = stallTable(r);
  if (stalls !== "") sections.push("### Stalls: latency runs' rounds, pauses and the database", stalls);
  if (r.relayProfile) sections.push("### Where the relay thread's CPU goes", profileTable(r.relayProfile));
  if (r.enqueue) sections.push("### Enqueue with the order guarantee", enqueueTable(r.enqueue));
  if (r.destinations) sections.push("### Destinations", destinationTable(r.destinations));
  if (r.relayQuota)
    sections.push("### One relay invocation on a Lambda's CPU share", quotaTable(r.relayQuota));
  if (r.handover) sections.push("### Hand-over between relay invocations", handoverTable(r.handover));
  return sections.join("\n\n");
}

/**
 * Default options; one row per destination and endpoint latency, medians of the repeats. SQS FIFO and EventBridge
 * are the relay's single destinations; the others are reached through a route table of one route.
 */
export function destinationTable(runs: DestinationThroughput[]): string {
  const label = {
    "sqs-fifo": "SQS FIFO (SendMessageBatch)",
    sqs: "SQS standard (SendMessageBatch, one route)",
    "sns-fifo": "SNS FIFO (PublishBatch, one route)",
    sns: "SNS standard (PublishBatch, one route)",
    kinesis: "Kinesis (PutRecords, one route)",
    eventbridge: "EventBridge (PutEvents)",
  } as const;
  return markdownTable(
    ["destination", "endpoint latency", "events/s (median, min–max)", "relay CPU ms / 1k events"],
    runs.map((run) => [
      label[run.destination],
      `${run.latencyMs} ms`,
      `${n(run.eventsPerSecond.median)} (${n(run.eventsPerSecond.min)}–${n(run.eventsPerSecond.max)})`,
      n(run.cpuPer1k.relay, 1),
    ]),
  );
}

/**
 * One row per memory size (its CPU share), every run listed: the relay's events/s per invocation, its process's
 * CPU per event and its JavaScript thread's. Sizes in ascending order, "no quota" last.
 */
export function quotaTable(runs: RelayQuotaRun[]): string {
  const sizes = [...new Set(runs.map((run) => run.memoryMb))].sort(
    (a, b) => (a ?? Number.POSITIVE_INFINITY) - (b ?? Number.POSITIVE_INFINITY),
  );
  return markdownTable(
    [
      "Lambda memory (vCPU share)",
      "SQS latency",
      "events/s per invocation (runs)",
      "process CPU µs / event (runs)",
      "relay thread CPU µs / event (runs)",
    ],
    sizes.map((memoryMb) => {
      const of = runs.filter((run) => run.memoryMb === memoryMb);
      const first = of[0] as RelayQuotaRun;
      return [
        memoryMb === null
          ? "no quota (the machine's shared cores)"
          : `${n(memoryMb)} MB (${n(first.vcpu ?? 0, 2)})`,
        `${first.sqsLatencyMs} ms`,
        of.map((run) => n(run.eventsPerSecond)).join(" / "),
        of.map((run) => n(run.cpuUsPerEvent)).join(" / "),
        of.map((run) => (run.threadUsPerEvent === undefined ? "–" : n(run.threadUsPerEvent))).join(" / "),
      ];
    }),
  );
}

function handoverTable(runs: HandoverRun[]): string {
  const rows = runs.map(
    (run) =>
      `| ${run.idleStopMs !== null ? `idle stop ${run.idleStopMs} ms` : run.killAfterMs === null ? "none" : `every 3rd killed, after ${run.killAfterMs} ms`} | ` +
      `${run.tickMs} | ${run.provingMs} | ${run.invocations} | ` +
      `${run.meanAlive.toFixed(2)} (${run.meanAliveAt60s.toFixed(2)}) | ${run.noneAliveMs} | ${run.latencyMs.p50} / ${run.latencyMs.p99} / ${run.latencyMs.max} | ` +
      `${run.afterQuietMs === undefined ? "" : run.afterQuietMs.map((ms) => Math.round(ms)).join(", ")} | ` +
      `${run.produced} | ${run.lost} | ${run.pendingAtEnd} | ${run.reordered} | ${run.duplicates} |`,
  );
  return [
    "| configuration | T (ms) | proving (ms) | invocations | mean alive (at 60 s) | ms with none alive | commit→accept p50 / p99 / max (ms) | first event after a quiet spell (ms) | events | lost | pending at end | reordered | sent twice |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ...rows,
  ].join("\n");
}
