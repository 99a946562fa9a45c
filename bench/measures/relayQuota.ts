import type pg from "pg";
import { DEFAULT_RELAY_OPTIONS } from "../../functions/shared/relay/engine.ts";
import { type BacklogShape, resetOutbox, seedBacklog } from "../lib/benchDatabase.ts";
import { vcpuShare } from "../lib/cpuQuota.ts";
import { drainInWorker } from "../lib/relayWorker.ts";
import type { BenchSqsEndpoint } from "../lib/sqsEndpoint.ts";

export interface RelayQuotaRun {
  /** The Lambda memory whose CPU share the run had; null: no quota (the machine's shared cores). */
  memoryMb: number | null;
  /** memoryMb / 1,769 (lib/cpuQuota.ts); null without a quota. */
  vcpu: number | null;
  sqsLatencyMs: number;
  eventsPerSecond: number;
  /** CPU of the relay's whole process (all threads) per event, µs. */
  cpuUsPerEvent: number;
  /**
   * CPU of the relay's JavaScript thread per event, µs: 1e6 / this is what one invocation can never exceed.
   * Absent from results before 2026-12-02 10:00.
   */
  threadUsPerEvent?: number;
}

/**
 * One relay invocation's throughput on a Lambda's CPU share: the relay as the Lambda runs it, in a process of its
 * own (default options, drain, the handler's SQS FIFO destination) under a CPU quota of `memoryMb`'s share,
 * draining `shape` into the endpoint at `sqsLatencyMs` per request.
 */
export async function measureRelayQuota(
  databaseUrl: string,
  pool: pg.Pool,
  endpoint: BenchSqsEndpoint,
  shape: BacklogShape,
  memoryMb: number | null,
  sqsLatencyMs: number,
): Promise<RelayQuotaRun> {
  await resetOutbox(pool);
  await seedBacklog(pool, shape);
  await endpoint.setLatency(sqsLatencyMs);
  const report = await drainInWorker({
    databaseUrl,
    endpoint,
    label: `quota-${memoryMb ?? "none"}`,
    events: shape.events,
    batchMaxBytes: DEFAULT_RELAY_OPTIONS.batchMaxBytes,
    ...(memoryMb === null ? {} : { quotaMemoryMb: memoryMb }),
  });
  return {
    memoryMb,
    vcpu: memoryMb === null ? null : vcpuShare(memoryMb),
    sqsLatencyMs,
    eventsPerSecond: report.published / (report.ms / 1000),
    cpuUsPerEvent: (report.cpuMs * 1000) / report.published,
    threadUsPerEvent: (report.threadCpuMs * 1000) / report.published,
  };
}
