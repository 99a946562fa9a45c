import type pg from "pg";
import { outboxNames } from "../../functions/shared/outbox/names.ts";
import { resetOutbox } from "../lib/benchDatabase.ts";
import { drainInWorker } from "../lib/relayWorker.ts";
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
  await pool.query(`update ${outboxNames().related("limits")} set max_payload_bytes = $1`, [
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
  const report = await drainInWorker({
    databaseUrl,
    endpoint,
    label: "memory",
    events: shape.events,
    batchMaxBytes,
    ...(s3Url === undefined ? {} : { s3Url }),
  });
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
