import type pg from "pg";
import { DEFAULT_RELAY_OPTIONS } from "../../functions/shared/relay/engine.ts";
import { goArticleRelay } from "../baseline/goArticleRelay.ts";
import { type BacklogShape, resetOutbox, seedBacklog } from "../lib/benchDatabase.ts";
import { createBenchQueue, deleteBenchQueue, relaySqsClient } from "../lib/sqsClient.ts";
import type { BenchSqsEndpoint } from "../lib/sqsEndpoint.ts";

/** (4) Events per second of the seed-style baseline (baseline/goArticleRelay.ts) against the same endpoint. */
export async function measureSeedBaseline(
  pool: pg.Pool,
  endpoint: BenchSqsEndpoint,
  shape: BacklogShape,
  latencyMs: number,
): Promise<number> {
  await resetOutbox(pool);
  await seedBacklog(pool, shape);
  await endpoint.setLatency(latencyMs);
  const sqs = relaySqsClient(endpoint.url, DEFAULT_RELAY_OPTIONS.publishTimeoutMs);
  const queueUrl = await createBenchQueue(sqs, "go-article");
  try {
    await endpoint.takeDeliveries();
    const started = performance.now();
    const published = await goArticleRelay(pool, sqs, queueUrl, DEFAULT_RELAY_OPTIONS.batchSize);
    const seconds = (performance.now() - started) / 1000;
    const delivered = (await endpoint.takeDeliveries()).length;
    if (published !== shape.events || delivered !== shape.events) {
      throw new Error(`baseline published ${published} and delivered ${delivered} of ${shape.events}`);
    }
    return published / seconds;
  } finally {
    await deleteBenchQueue(sqs, queueUrl);
    sqs.destroy();
  }
}
