import { availableParallelism } from "node:os";
import { CreateEventBusCommand, EventBridgeClient } from "@aws-sdk/client-eventbridge";
import type pg from "pg";
import { createDestination } from "../../functions/shared/destinations/create.ts";
import type { Destination } from "../../functions/shared/destinations/destination.ts";
import { DEFAULT_RELAY_OPTIONS, type RelayOptions, runRelay } from "../../functions/shared/relay/engine.ts";
import type { Retention } from "../../functions/shared/relay/sql/recordOutcomes.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";
import { type BacklogShape, resetOutbox, seedBacklog } from "../lib/benchDatabase.ts";
import type { CpuMeter, CpuReading } from "../lib/cpuMeter.ts";
import { type LoadVariant, type PhaseTotals, profiledPool } from "../lib/roundProfile.ts";
import { createBenchQueue, deleteBenchQueue, relayDestination, relaySqsClient } from "../lib/sqsClient.ts";
import type { BenchSqsEndpoint } from "../lib/sqsEndpoint.ts";

let buses = 0;

export interface RelayTuning {
  batchSize: number;
  concurrency: number;
  /**
   * runRelay loops sharing one pool and SQS client (default 1, what the handler runs). Two loops are what a
   * pipelined engine would do: one loop's claim and record overlap the other's publish. Safe by the claim's
   * design (an aggregate's head is claimed by one loop; its successors are not heads until it is published).
   */
  loops?: number;
  /** Where the relay publishes: an SQS FIFO queue (default) or an EventBridge bus, both on the same endpoint. */
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
  const sqs = relaySqsClient(endpoint.url, options.publishTimeoutMs);
  let destroyDestination = () => {};
  let queueUrl: string | undefined;
  const events = new EventBridgeClient({
    ...LOCAL_AWS,
    endpoint: endpoint.url,
    maxAttempts: 3,
    requestHandler: { connectionTimeout: 3_000, requestTimeout: options.publishTimeoutMs },
  });
  try {
    const label = `relay-${tuning.batchSize}x${tuning.concurrency}`;
    let destination: Destination;
    if (tuning.destination === "eventbridge") {
      // A fresh bus per run, as a fresh queue per SQS run.
      const busName = `bench-${label}-${++buses}`;
      await events.send(new CreateEventBusCommand({ Name: busName }));
      const created = createDestination(
        { kind: "eventbridge", eventBusName: busName, source: "bench" },
        {
          sockets: options.concurrency * options.parallelRounds,
          requestTimeoutMs: options.publishTimeoutMs,
          endpoint: endpoint.url,
          ...LOCAL_AWS,
        },
      );
      destination = created.destination;
      destroyDestination = created.destroy;
    } else {
      queueUrl = await createBenchQueue(sqs, label);
      const created = relayDestination(endpoint.url, queueUrl, options);
      destination = created.destination;
      destroyDestination = created.destroy;
    }
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
    if (queueUrl !== undefined) await deleteBenchQueue(sqs, queueUrl);
    destroyDestination();
    sqs.destroy();
    events.destroy();
  }
}
