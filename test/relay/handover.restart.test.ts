import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { migrate } from "../../functions/shared/db/migrate.ts";
import { type LocalPostgres, startPostgres } from "../../local/backends/postgres.ts";
import {
  compareDeliveries,
  type HandoverRig,
  handoverConfig,
  startInvocation,
  steadyProducer,
} from "../support/handover.ts";
import { createFifoQueue, useFakeSqs } from "../support/sqs.ts";

/**
 * Issue 41: the database restarts in the middle of a hand-over (the successor has just completed its first
 * round, its claim of the slot in flight). This file restarts its Postgres, so it has one of its own, embedded
 * even where Docker answers: only that server can restart on the same port and data directory (the shared one
 * serves other files).
 */
let server: LocalPostgres;
let pool: pg.Pool;
let rig: HandoverRig;
let queueName: string;
const aws = useFakeSqs();

beforeAll(async () => {
  server = await startPostgres(undefined, { backend: "embedded" });
  if (server.restart === undefined) {
    throw new Error(`the restart test needs an embedded server (restart()), got ${server.source}`);
  }
  // Two sessions: the runner holds a create-index-concurrently file's lock on a second one (migrate.ts).
  const migrator = new pg.Pool({ connectionString: server.url, max: 2 });
  await migrate(migrator);
  await migrator.end();
  pool = new pg.Pool({ connectionString: server.url, max: 4 });
  pool.on("error", () => {});
  pool.on("connect", (client) => client.on("error", () => {}));
  const queueUrl = await createFifoQueue(aws.sqs, "handover-restart");
  queueName = queueUrl.split("/").pop() ?? "";
  rig = { databaseUrl: server.url, sqs: aws.sqs, sqsEndpoint: aws.fake.url, queueUrl };
}, 60_000);
afterAll(async () => {
  await pool?.end();
  await server?.stop();
});

/** Polls observable state (not a fixed sleep) until `condition` holds. */
async function waitFor(what: string, condition: () => boolean, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

it("Postgres restarting during a hand-over loses and reorders nothing, and the relay resumes claiming", async () => {
  // No proving period: the successor claims its slot at its first completed round, so the restart below lands
  // while that claim is in flight (the proving period is handover.test.ts's).
  const config = handoverConfig(rig, { RELAY_HANDOVER_PROVING_MS: "0" });
  // Long enough to ride out the restart: this test is about the hand-over, not the dwell cap.
  const dwellMs = 45_000;
  const producer = steadyProducer(pool, { intervalMs: 25, groups: 6 });
  const holder = startInvocation(rig, { dwellMs, config });
  await holder.firstRound;
  await waitFor("events published by the holder", () => aws.fake.deliveries(queueName).length >= 20);
  const successor = startInvocation(rig, { dwellMs, config });
  await successor.firstRound;

  // Its slot claim (handover.ts) is under way now. Fast shutdown ends every session; the server stays down
  // until both invocations and the producer have failed against it (or the holder returned: it may have read
  // the successor's claim in the few milliseconds before the shutdown).
  const failed = {
    holder: holder.rounds.failed,
    successor: successor.rounds.failed,
    producer: producer.failures,
  };
  await server.restart?.(() =>
    waitFor(
      "both invocations and the producer to fail against the stopped server",
      () =>
        (holder.rounds.failed > failed.holder || holder.endedAt !== undefined) &&
        successor.rounds.failed > failed.successor &&
        producer.failures > failed.producer,
    ),
  );
  const committedBefore = producer.committed.length;

  // The hand-over completes after the restart: the holder returns, the successor dwells and claims on.
  expect((await holder.done).stoppedBy).toBe("handedOver");
  expect(successor.endedAt).toBeUndefined();
  // The successor's own next round, not the deliveries (the holder may have published some after the restart).
  const resumed = successor.nextRound();
  await waitFor(
    "the producer to commit after the restart",
    () => producer.committed.length >= committedBefore + 40,
  );
  const committed = await producer.stop();
  await expect
    .poll(() => compareDeliveries(committed, aws.fake.deliveries(queueName)).lost, { timeout: 15_000 })
    .toBe(0);
  await resumed;
  expect(successor.endedAt).toBeUndefined();
  successor.stop.abort();
  expect((await successor.done).stoppedBy).toBe("signal");

  const result = compareDeliveries(committed, aws.fake.deliveries(queueName));
  expect(result).toMatchObject({ lost: 0, duplicates: 0, reordered: 0 });
  // What was committed after the restart went out as it came, by the successor alone.
  const after = committed.slice(committedBefore).map((event) => result.latencyMs.get(event.id) ?? Infinity);
  expect(Math.max(...after)).toBeLessThan(2_000);
}, 60_000);
