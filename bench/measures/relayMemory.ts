import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import type pg from "pg";
import { DEFAULT_RELAY_OPTIONS } from "../../functions/shared/relay/engine.ts";
import { resetOutbox } from "../lib/benchDatabase.ts";
import { createBenchQueue, deleteBenchQueue, relaySqsClient } from "../lib/sqsClient.ts";
import type { BenchSqsEndpoint } from "../lib/sqsEndpoint.ts";

export interface RelayMemoryRun {
  /** Through the claim check (payloads to an S3 sink, pointers to the queue). */
  claimCheck?: boolean;
  /** RELAY_BATCH_MAX_BYTES of the run. */
  batchMaxBytes: number;
  events: number;
  payloadBytes: number;
  /** Peak resident set of the relay process (process.resourceUsage().maxRSS), MiB. */
  peakRssMiB: number;
  /** RSS of the same process before its first claim (runtime, SDK, pg), MiB. */
  idleRssMiB: number;
  seconds: number;
}

const WORKER = fileURLToPath(new URL("./relayMemoryWorker.ts", import.meta.url));

/**
 * Peak RSS of the relay draining large events with default options (batch 100, 2 parallel rounds), each run in
 * a fresh process so its maxRSS is its own. `batchMaxBytes` 1 GiB stands for the relay before the byte budget:
 * every claimed row's payload loaded at once, 2 rounds × 100 × ~1 MiB.
 */
export async function measureRelayMemory(
  databaseUrl: string,
  pool: pg.Pool,
  endpoint: BenchSqsEndpoint,
  shape: { events: number; payloadBytes: number },
  batchMaxBytes: number,
  s3Url?: string,
): Promise<RelayMemoryRun> {
  await resetOutbox(pool);
  // Payloads over 1 MiB need the table's limit raised (migration 0012), as an install using the claim check does.
  await pool.query("update outbox_limits set max_payload_bytes = $1", [
    Math.max(1_048_576, shape.payloadBytes + 64),
  ]);
  // One event per aggregate, so every claim finds a full batch of heads. md5 text does not compress much,
  // like real payloads; `repeat` of a constant would make the stored rows tiny.
  await pool.query(
    `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload)
     select 'order', 'memory-' || i, 'order.created',
            jsonb_build_object('blob', repeat(md5(i::text), $2::integer / 32))
     from generate_series(1, $1::integer) as i`,
    [shape.events, shape.payloadBytes],
  );
  await pool.query("vacuum analyze outbox_events");
  const sqs = relaySqsClient(endpoint.url, DEFAULT_RELAY_OPTIONS.publishTimeoutMs);
  const queueUrl = await createBenchQueue(sqs, "memory");
  try {
    return await drainInChild(databaseUrl, endpoint, shape, batchMaxBytes, queueUrl, s3Url);
  } finally {
    await deleteBenchQueue(sqs, queueUrl);
    sqs.destroy();
  }
}

async function drainInChild(
  databaseUrl: string,
  endpoint: BenchSqsEndpoint,
  shape: { events: number; payloadBytes: number },
  batchMaxBytes: number,
  queueUrl: string,
  s3Url: string | undefined,
): Promise<RelayMemoryRun> {
  await endpoint.takeDeliveries();
  const child = spawn(process.execPath, [WORKER], {
    env: {
      PATH: process.env.PATH ?? "",
      BENCH_DATABASE_URL: databaseUrl,
      BENCH_SQS_URL: endpoint.url,
      BENCH_QUEUE_URL: queueUrl,
      BENCH_BATCH_MAX_BYTES: String(batchMaxBytes),
      ...(s3Url === undefined ? {} : { BENCH_S3_URL: s3Url }),
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  let stdout = "";
  child.stdout.on("data", (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  if (code !== 0) throw new Error(`relay memory worker exited with ${code}: ${stdout}`);
  const report = JSON.parse(stdout) as {
    published: number;
    peakRssMiB: number;
    idleRssMiB: number;
    ms: number;
    lastError?: string;
  };
  const delivered = new Set((await endpoint.takeDeliveries()).map((delivery) => delivery.dedupId)).size;
  if (report.published !== shape.events || delivered !== shape.events) {
    throw new Error(
      `memory run published ${report.published} and delivered ${delivered} of ${shape.events}: ${report.lastError ?? "no error"}`,
    );
  }
  return {
    ...(s3Url === undefined ? {} : { claimCheck: true }),
    batchMaxBytes,
    events: shape.events,
    payloadBytes: shape.payloadBytes,
    peakRssMiB: report.peakRssMiB,
    idleRssMiB: report.idleRssMiB,
    seconds: report.ms / 1000,
  };
}
