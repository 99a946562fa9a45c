import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { DEFAULT_RELAY_OPTIONS } from "../../functions/shared/relay/engine.ts";
import { cpuQuotaGroup } from "./cpuQuota.ts";
import { createBenchQueue, deleteBenchQueue, relaySqsClient } from "./sqsClient.ts";
import type { BenchSqsEndpoint } from "./sqsEndpoint.ts";

const WORKER = fileURLToPath(new URL("../measures/relayMemoryWorker.ts", import.meta.url));

export interface WorkerDrain {
  published: number;
  peakRssMiB: number;
  idleRssMiB: number;
  /** The drain's wall time, first claim to the empty claim. */
  ms: number;
  /** CPU time of the whole worker process (every thread: JS, GC helpers, libuv) during the drain. */
  cpuMs: number;
  /**
   * CPU time of the relay's JavaScript thread alone: one invocation can never publish faster than one event per
   * threadCpuMs / published, however much CPU its memory buys.
   */
  threadCpuMs: number;
}

/**
 * Drains the outbox into a fresh FIFO queue with the relay in a fresh process (measures/relayMemoryWorker.ts), so its
 * maxRSS and CPU time are its own; with `quotaMemoryMb`, inside a CPU quota group of that Lambda memory's share
 * (lib/cpuQuota.ts), joined before the worker starts its first claim. Every event must have reached the
 * endpoint, or the run is an error, not a number.
 */
export async function drainInWorker(input: {
  databaseUrl: string;
  endpoint: BenchSqsEndpoint;
  /** Names the run's fresh queue. */
  label: string;
  events: number;
  batchMaxBytes: number;
  quotaMemoryMb?: number;
  /** An S3 endpoint: the worker publishes through the claim check (measures/relayMemory.ts, 64 MiB payloads). */
  s3Url?: string;
}): Promise<WorkerDrain> {
  const { endpoint, events } = input;
  const sqs = relaySqsClient(endpoint.url, DEFAULT_RELAY_OPTIONS.publishTimeoutMs);
  const queueUrl = await createBenchQueue(sqs, input.label);
  await endpoint.takeDeliveries();
  const group = input.quotaMemoryMb === undefined ? undefined : cpuQuotaGroup(input.quotaMemoryMb);
  try {
    const child = spawn(process.execPath, [WORKER], {
      env: {
        PATH: process.env.PATH ?? "",
        BENCH_DATABASE_URL: input.databaseUrl,
        BENCH_SQS_URL: endpoint.url,
        BENCH_QUEUE_URL: queueUrl,
        BENCH_BATCH_MAX_BYTES: String(input.batchMaxBytes),
        ...(input.s3Url === undefined ? {} : { BENCH_S3_URL: input.s3Url }),
      },
      stdio: ["pipe", "pipe", "inherit"],
    });
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    let stdout = "";
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    try {
      if (child.pid !== undefined) group?.add(child.pid);
    } catch (error) {
      child.kill();
      throw error;
    }
    child.stdin.end("go\n");
    const code = await exited;
    if (code !== 0) throw new Error(`relay worker exited with ${code}: ${stdout}`);
    const report = JSON.parse(stdout) as WorkerDrain & { lastError?: string };
    const delivered = new Set((await endpoint.takeDeliveries()).map((delivery) => delivery.dedupId)).size;
    if (report.published !== events || delivered !== events) {
      throw new Error(
        `worker run published ${report.published} and delivered ${delivered} of ${events}: ${report.lastError ?? "no error"}`,
      );
    }
    return report;
  } finally {
    group?.remove();
    await deleteBenchQueue(sqs, queueUrl);
    sqs.destroy();
  }
}
