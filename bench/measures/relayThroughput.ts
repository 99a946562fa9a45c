import { availableParallelism } from "node:os";
import type pg from "pg";
import type { Destination } from "../../functions/shared/destinations/destination.ts";
import { DEFAULT_RELAY_OPTIONS, type RelayOptions, runRelay } from "../../functions/shared/relay/engine.ts";
import type { Retention } from "../../functions/shared/relay/sql/recordOutcomes.ts";
import { type BacklogShape, resetOutbox, seedBacklog } from "../lib/benchDatabase.ts";
import { benchDestination } from "../lib/benchDestination.ts";
import type { CpuMeter, CpuReading } from "../lib/cpuMeter.ts";
import { type LoadVariant, type PhaseTotals, profiledPool } from "../lib/roundProfile.ts";
import type { BenchSqsEndpoint } from "../lib/sqsEndpoint.ts";

export interface RelayTuning {
  batchSize: number;
  concurrency: number;
  /**
   * runRelay loops sharing one pool and SQS client (default 1, what the handler runs). Two loops are what a
   * pipelined engine would do: one loop's claim and record overlap the other's publish. Safe by the claim's
   * design (an aggregate's head is claimed by one loop; its successors are not heads until it is published).
   */
  loops?: number;
  /** Where the relay publishes (default an SQS FIFO queue): a fresh place of this kind on the bench endpoint. */
  destination?: Destination["kind"];
  /** OUTBOX_RETENTION (default keep). */
  retention?: Retention;
}

export interface RelayRun {
  eventsPerSecond: number;
  rounds: number;
  /** Mean milliseconds per round in each phase (see lib/roundProfile.ts). */
  msPerRound: PhaseTotals;
  /** CPU ms per 1,000 events: relay thread, SQS endpoint thread, Postgres (see lib/cpuMeter.ts). */
  cpuPer1k: CpuReading;
  /** CPU used by the three over wall time × cores: well under 1 means waiting, not computing, is the limit. */
  machineBusy: number;
}

/**
 * (2)/(3) The relay engine as the Lambda runs it (runRelay, drain mode, the destination and client built by the
 * handler's own destinations/create.ts)
 * draining a backlog into the endpoint; events per second from the first claim to the empty claim at the end.
 * Every event must have reached the endpoint, or the run is an error, not a number.
 */
export async function measureRelay(
  pool: pg.Pool,
  endpoint: BenchSqsEndpoint,
  shape: BacklogShape,
  tuning: RelayTuning,
  latencyMs: number,
  meter: CpuMeter,
  variant: LoadVariant = "direct",
): Promise<RelayRun> {
  await resetOutbox(pool);
  await seedBacklog(pool, shape);
  await endpoint.setLatency(latencyMs);
  const options: RelayOptions = {
    ...DEFAULT_RELAY_OPTIONS,
    batchSize: tuning.batchSize,
    concurrency: tuning.concurrency,
    mode: "drain",
    retention: tuning.retention ?? DEFAULT_RELAY_OPTIONS.retention,
  };
  const label = `relay-${tuning.batchSize}x${tuning.concurrency}`;
  const place = await benchDestination(tuning.destination ?? "sqs-fifo", endpoint.url, options, label);
  try {
    const { destination } = place;
    await endpoint.takeDeliveries();
    const profiled = profiledPool(pool, variant);
    const deps = { pool: profiled.pool, destination, deadline: Date.now() + 600_000 };
    const { result: summaries, cpu } = await meter.measure(() =>
      Promise.all(Array.from({ length: tuning.loops ?? 1 }, () => runRelay(deps, options))),
    );
    const published = summaries.reduce((sum, summary) => sum + summary.published, 0);
    const rounds = summaries.reduce((sum, summary) => sum + summary.rounds, 0);
    const delivered = new Set((await endpoint.takeDeliveries()).map((delivery) => delivery.dedupId)).size;
    if (published !== shape.events || delivered !== shape.events) {
      throw new Error(
        `relay run published ${published} and delivered ${delivered} of ${shape.events} events (${summaries.map((s) => s.lastError ?? "no error").join("; ")})`,
      );
    }
    const msPerRound = { ...profiled.totals };
    for (const phase of Object.keys(msPerRound) as (keyof PhaseTotals)[]) msPerRound[phase] /= rounds;
    const per1k = (ms: number) => (ms * 1000) / published;
    return {
      eventsPerSecond: published / (cpu.wallMs / 1000),
      rounds,
      msPerRound,
      cpuPer1k: { relay: per1k(cpu.relay), endpoint: per1k(cpu.endpoint), postgres: per1k(cpu.postgres) },
      machineBusy: (cpu.relay + cpu.endpoint + cpu.postgres) / (cpu.wallMs * availableParallelism()),
    };
  } finally {
    await place.destroy();
  }
}
