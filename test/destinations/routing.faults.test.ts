import { beforeEach, describe, expect, it } from "vitest";
import { routingDestination } from "../../functions/shared/destinations/routing/router.ts";
import { relayRound } from "../../functions/shared/relay/engine.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { checkLedger } from "../support/ledger.ts";
import { rowStates, writeEvents } from "../support/outboxRows.ts";
import { drain, drainUntilEmpty, queueDestination, testRelayOptions } from "../support/relay.ts";
import { createFifoQueue, useFakeSqs } from "../support/sqs.ts";

const db = useTestDatabase();
const aws = useFakeSqs();

const queueName = (url: string) => url.split("/").pop() as string;

beforeEach(async () => {
  aws.fake.resetFaults();
  aws.fake.up();
  aws.fake.clearDeliveries();
  await db.pool.query("delete from outbox_events");
});

/** Orders to queue A, carts to queue B; with `down` set, every request to that queue fails as SQS's 500. */
async function twoQueues() {
  const [a, b] = [await createFifoQueue(aws.sqs, "lane-a"), await createFifoQueue(aws.sqs, "lane-b")];
  const destination = routingDestination([
    { match: { aggregateType: ["order"] }, destination: queueDestination(aws.sqs, { queueUrl: a }) },
    { match: { aggregateType: ["cart"] }, destination: queueDestination(aws.sqs, { queueUrl: b }) },
  ]);
  const outage = (queueUrl: string) =>
    aws.fake.setFaults({
      failRequests: (action, request) =>
        action === "SendMessageBatch" && request.queueName === queueName(queueUrl)
          ? { code: "InternalError", status: 500 }
          : false,
    });
  return { a, b, destination, outage };
}

const slow = (overrides = {}) =>
  testRelayOptions("unused-with-routes", { backoffBaseMs: 60_000, backoffMaxMs: 60_000, ...overrides });

describe("routing under one destination's faults (in-process SQS endpoint)", () => {
  it("an outage of one destination does not stop the others, in the same round; its rows back off and never dead-letter", async () => {
    const { a, b, destination, outage } = await twoQueues();
    const written = await writeEvents(db.pool, [
      ...Array.from({ length: 12 }, (_, i) => anEvent({ aggregateType: "order", aggregateId: `o-${i % 4}` })),
      ...Array.from({ length: 12 }, (_, i) => anEvent({ aggregateType: "cart", aggregateId: `c-${i % 4}` })),
    ]);
    outage(a);

    const round = await relayRound(
      { pool: db.pool, destination, deadline: Date.now() + 60_000 },
      slow({ maxAttempts: 1 }),
    );

    // One round: the four cart heads published while every order head failed.
    expect(round.published).toBe(4);
    expect(round.failed).toBe(4);
    expect(round.deadLettered).toBe(0);
    expect(round.destinations).toEqual({
      [`sqs-fifo:${queueName(a)}`]: { published: 0, failed: 4 },
      [`sqs-fifo:${queueName(b)}`]: { published: 4, failed: 0 },
    });
    // The rest of the carts flow while queue A is still down.
    await drain(db.pool, destination, slow({ maxAttempts: 1 }));
    expect(aws.fake.deliveries(queueName(b))).toHaveLength(12);
    expect(aws.fake.deliveries(queueName(a))).toHaveLength(0);
    const { rows } = await db.pool.query(
      "select attempts, transient_failures, dead_lettered_at from outbox_events where attempts + transient_failures > 0",
    );
    expect(rows).toHaveLength(4);
    for (const row of rows)
      expect(row).toMatchObject({ attempts: 0, transient_failures: 1, dead_lettered_at: null });

    aws.fake.resetFaults();
    await db.pool.query("update outbox_events set available_at = now() where transient_failures > 0");
    await drainUntilEmpty(db.pool, destination, testRelayOptions("unused-with-routes"));
    expect(await rowStates(db.pool)).toEqual({ published: 24, pending: 0, dead: 0 });
    const orders = written.filter((row) => row.aggregateId.startsWith("o-"));
    const ledger = checkLedger(orders, aws.fake.deliveries(queueName(a)));
    expect(ledger.lost).toEqual([]);
    expect(ledger.orderViolations).toEqual([]);
  });

  it("a group whose first event's destination fails holds its later events, even those routed elsewhere", async () => {
    const [a, b] = [await createFifoQueue(aws.sqs, "first"), await createFifoQueue(aws.sqs, "later")];
    // One group (aggregate_id "shared-1") whose events go to two queues by event type.
    const destination = routingDestination([
      { match: { eventType: ["order.created"] }, destination: queueDestination(aws.sqs, { queueUrl: a }) },
      { match: { eventType: ["order.*"] }, destination: queueDestination(aws.sqs, { queueUrl: b }) },
    ]);
    const [first, second, third] = await writeEvents(db.pool, [
      anEvent({ aggregateId: "shared-1", eventType: "order.created" }),
      anEvent({ aggregateId: "shared-1", eventType: "order.paid" }),
      anEvent({ aggregateId: "shared-1", eventType: "order.shipped" }),
    ]);
    aws.fake.setFaults({
      failRequests: (action, request) =>
        action === "SendMessageBatch" && request.queueName === queueName(a)
          ? { code: "InternalError", status: 500 }
          : false,
    });

    // Several drains, as several invocations: the later events never overtake the failed first one, whatever
    // the claim takes (one head per group, or the head and its successors in one round's waves).
    for (let i = 0; i < 3; i++) {
      await db.pool.query("update outbox_events set available_at = now() where transient_failures > 0");
      await drain(db.pool, destination, slow());
    }
    expect(aws.fake.deliveries(queueName(b))).toEqual([]);
    const { rows } = await db.pool.query(
      "select id, processed_at is not null as published, dead_lettered_at is not null as dead from outbox_events order by seq",
    );
    expect(rows.map((row) => [row.published, row.dead])).toEqual([
      [false, false],
      [false, false],
      [false, false],
    ]);

    aws.fake.resetFaults();
    await db.pool.query("update outbox_events set available_at = now()");
    await drainUntilEmpty(db.pool, destination, testRelayOptions("unused-with-routes"));
    // Accepted in seq order across the two queues: A took the first before B took either of the others.
    const arrivals = aws.fake
      .deliveries()
      .filter((delivery) => [queueName(a), queueName(b)].includes(delivery.queueName))
      .map((delivery) => delivery.dedupId);
    expect(arrivals).toEqual([first?.id, second?.id, third?.id]);
  });
});
