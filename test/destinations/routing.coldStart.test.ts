import { beforeEach, describe, expect, it } from "vitest";
import { routingDestination } from "../../functions/shared/destinations/routing/router.ts";
import { destinationCheckOnce, relayInvocation } from "../../functions/shared/relay/invocation.ts";
import { relayConfigFromEnv } from "../../functions/shared/relay/settings.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { relayLambdaEnv } from "../support/lambda.ts";
import { writeEvents } from "../support/outboxRows.ts";
import { queueDestination } from "../support/relay.ts";
import { createFifoQueue, useFakeSqs } from "../support/sqs.ts";

/**
 * Issue 40, item 12: the relay's first invocation waited for the whole route table's start check before its first
 * round, so one silent destination (no answer: a blackholed endpoint, a security group that drops) held every
 * route until its check timed out, 12-15 s, although routing.md says the others are relayed as usual. Through the
 * relay's own first-invocation path (destinationCheckOnce, as the Lambda handler and `outbox relay` run it) with
 * the real SQS destinations over the in-process SQS endpoint, one queue of which never answers.
 */
const db = useTestDatabase();
const aws = useFakeSqs();
const quiet = { info() {}, warn() {}, error() {} };
const queueName = (url: string) => url.split("/").pop() as string;

beforeEach(async () => {
  aws.fake.resetFaults();
  aws.fake.clearDeliveries();
  await db.pool.query("delete from outbox_events");
});

function config(queueUrl: string) {
  return relayConfigFromEnv(
    relayLambdaEnv({
      DATABASE_URL: db.url,
      OUTBOX_QUEUE_URL: queueUrl,
      AWS_ENDPOINT_URL: aws.fake.url,
      RELAY_MODE: "drain",
      RELAY_BACKOFF_BASE_MS: "60000",
      RELAY_BACKOFF_MAX_MS: "60000",
    }),
  );
}

describe("a route table's first invocation with one silent destination", () => {
  it("publishes the other routes at once, while the silent route's check waits out its bound", async () => {
    const [silent, healthy] = [
      await createFifoQueue(aws.sqs, "silent"),
      await createFifoQueue(aws.sqs, "healthy"),
    ];
    const destination = routingDestination([
      { match: { aggregateType: ["order"] }, destination: queueDestination(aws.sqs, { queueUrl: silent }) },
      { match: { aggregateType: ["cart"] }, destination: queueDestination(aws.sqs, { queueUrl: healthy }) },
    ]);
    await writeEvents(db.pool, [
      anEvent({ aggregateType: "order", aggregateId: "o-1" }),
      anEvent({ aggregateType: "cart", aggregateId: "c-1" }),
    ]);
    // Every request to the silent queue (its start check included) goes unanswered for longer than the check's bound.
    aws.fake.setFaults({
      latencyMs: (_action, request) => (request.queueName === queueName(silent) ? 30_000 : 0),
    });

    const started = Date.now();
    // A Lambda's deadline a minute away: the start check's bound is its full 15 s (invocation.ts checkTimeoutMs).
    const deadline = started + 60_000;
    const summary = await destinationCheckOnce(destination, quiet)(deadline, (signal) =>
      relayInvocation(
        { pool: db.pool, destination, deadline, logger: quiet, ...(signal ? { signal } : {}) },
        config(healthy),
      ),
    );

    const [delivered] = aws.fake.deliveries(queueName(healthy));
    expect(delivered).toBeDefined();
    // Today's code waited out the silent check (>= 12 s) before the first round.
    expect((delivered?.at ?? Number.POSITIVE_INFINITY) - started).toBeLessThan(3_000);
    expect(summary.published).toBe(1);
    expect(aws.fake.deliveries(queueName(silent))).toEqual([]);
    const { rows } = await db.pool.query(
      "select aggregate_type, processed_at is not null as published, dead_lettered_at is not null as dead from outbox_events order by seq",
    );
    expect(rows).toEqual([
      { aggregate_type: "order", published: false, dead: false },
      { aggregate_type: "cart", published: true, dead: false },
    ]);
  }, 40_000);

  it("still fails loudly when a route can never work, its events left pending, not dead letters", async () => {
    const healthy = await createFifoQueue(aws.sqs, "healthy");
    const missing = `${aws.fake.url}/000000000000/missing-${Date.now()}.fifo`;
    const destination = routingDestination([
      { match: { aggregateType: ["order"] }, destination: queueDestination(aws.sqs, { queueUrl: missing }) },
      { match: { aggregateType: ["cart"] }, destination: queueDestination(aws.sqs, { queueUrl: healthy }) },
    ]);
    await writeEvents(db.pool, [
      anEvent({ aggregateType: "order", aggregateId: "o-1" }),
      anEvent({ aggregateType: "cart", aggregateId: "c-1" }),
    ]);
    const deadline = Date.now() + 60_000;
    const checkOnce = destinationCheckOnce(destination, quiet);

    await expect(
      checkOnce(deadline, (signal) =>
        relayInvocation(
          { pool: db.pool, destination, deadline, logger: quiet, ...(signal ? { signal } : {}) },
          config(healthy),
        ),
      ),
    ).rejects.toThrow(/^route to sqs-fifo:missing-\d+\.fifo: queue .* does not exist/);
    const { rows } = await db.pool.query(
      "select count(*)::int as dead from outbox_events where dead_lettered_at is not null",
    );
    expect(rows).toEqual([{ dead: 0 }]);
  });
});
