import type { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { FakeSqs } from "../../cli/dev/aws/fakeSqs.ts";
import { eventBridgeDestination } from "../../functions/shared/destinations/eventBridge/eventBridge.ts";
import type { OutboxEvent } from "../../functions/shared/produce/enqueue.ts";
import { useTestDatabase } from "../support/db.ts";
import {
  createBusToQueue,
  eventBridgeClient,
  eventsAsDeliveries,
  type FakeBus,
  startFakeBus,
} from "../support/eventBridge.ts";
import { anEvent } from "../support/factories.ts";
import { checkLedger } from "../support/ledger.ts";
import {
  clearOutbox,
  rowStates as outboxRowStates,
  publishedRow,
  writeEvents as writeOutboxEvents,
} from "../support/outboxRows.ts";
import { drain, drainUntilEmpty, TEST_RETENTION, testRelayOptions } from "../support/relay.ts";
import { receiveAll, sqsClient } from "../support/sqs.ts";

const db = useTestDatabase();
const SOURCE = "com.example.orders";

const writeEvents = (events: OutboxEvent<unknown>[]) => writeOutboxEvents(db.pool, events);
const rowStates = () => outboxRowStates(db.pool);

/** Relay options without a queue: the destination is passed to drain() instead. */
const options = (overrides = {}) => testRelayOptions("unused-with-a-bus", overrides);

describe("relay to an EventBridge bus, read back through a rule and a queue (emulator)", () => {
  const events = eventBridgeClient();
  const sqs = sqsClient();
  afterAll(() => {
    events.destroy();
    sqs.destroy();
  });

  it("publishes every pending row once, marks them published, and the rule delivers them with the envelope", async () => {
    await clearOutbox(db.pool);
    const { busName, queueUrl } = await createBusToQueue(events, sqs, SOURCE, "relay-bus");
    const written = await writeEvents(
      Array.from({ length: 6 }, (_, i) =>
        anEvent({ aggregateId: `bus-order-${i % 3}`, headers: { tenant: "t-1" } }),
      ),
    );
    const destination = eventBridgeDestination(events, { eventBusName: busName, source: SOURCE });

    // moto routes an event to an SQS target in ~0.6 s (measured: 10 events in 5.7-6.4 s), so the publish
    // timeout is generous: a timed-out request that moto completes anyway would be sent again (at least once).
    await drainUntilEmpty(db.pool, destination, options({ publishTimeoutMs: 30_000 }));

    expect(await rowStates()).toEqual({ published: 6, pending: 0, dead: 0 });
    const received = (await receiveAll(sqs, queueUrl, 6)).map((message) => JSON.parse(message.Body ?? ""));
    expect(received).toHaveLength(6);
    expect(received.map((event) => event.detail.outboxId).sort()).toEqual(
      written.map((row) => row.id).sort(),
    );
    const first = received.find((event) => event.detail.outboxId === written[0]?.id);
    expect(first).toMatchObject({
      source: SOURCE,
      "detail-type": "order.created",
      detail: {
        aggregateType: "order",
        aggregateId: "bus-order-0",
        eventType: "order.created",
        seq: String(written[0]?.seq),
        headers: { tenant: "t-1" },
        payload: anEventPayloadShape,
      },
    });
  });
});

const anEventPayloadShape = { total: 4200, currency: "EUR" };

describe("relay to an EventBridge bus under faults (in-process endpoint)", () => {
  let bus: FakeBus;
  let fake: FakeSqs;
  let events: EventBridgeClient;
  let busName: string;

  beforeAll(async () => {
    bus = await startFakeBus(SOURCE, "relay-faults");
    ({ fake, events, busName } = bus);
  });
  afterAll(() => bus.close());
  beforeEach(async () => {
    fake.resetFaults();
    fake.resetStats();
    fake.up();
    fake.events.reset();
    fake.events.clearEvents();
    await clearOutbox(db.pool);
  });

  const destination = () => eventBridgeDestination(events, { eventBusName: busName, source: SOURCE });

  it("partial failures: only accepted entries are published; the rest retry and arrive, in order per aggregate", async () => {
    const written = await writeEvents(
      Array.from({ length: 60 }, (_, i) => anEvent({ aggregateId: `partial-${i % 6}` })),
    );
    let n = 0;
    // Every third entry fails on the bus's side, alternating throttling and internal failure.
    fake.events.failEntry = () => {
      n++;
      if (n % 3 !== 0) return false;
      return { code: n % 2 === 0 ? "ThrottlingException" : "InternalFailure" };
    };

    await drainUntilEmpty(db.pool, destination(), options({ maxAttempts: 2 }));

    const ledger = checkLedger(written, eventsAsDeliveries(fake.events.events(busName)));
    expect(ledger.lost).toEqual([]);
    expect(ledger.orderViolations).toEqual([]);
    expect(ledger.duplicates).toBe(0); // a failed entry was not accepted: its retry is its first delivery
    expect(fake.events.stats.failedEntries).toBeGreaterThan(10);
    // Throttled and internally failed entries are the bus's fault: they never use up attempts (max 2 here).
    expect(await rowStates()).toEqual({ published: 60, pending: 0, dead: 0 });
    // The kept rows also show how the failures counted; in delete no row is left, and dead: 0 is the proof.
    if (TEST_RETENTION === "keep") {
      const { rows } = await db.pool.query(
        "select max(attempts)::int as attempts, max(transient_failures)::int as transient from outbox_events",
      );
      expect(rows[0]).toMatchObject({ attempts: 0 });
      expect(rows[0].transient).toBeGreaterThan(0);
    }
  });

  it("an entry the bus refuses as invalid is dead-lettered on its own; the others, even of its batch, are published", async () => {
    const [poison, ...healthy] = await writeEvents([
      anEvent({ aggregateId: "poison-agg" }),
      anEvent({ aggregateId: "ok-1" }),
      anEvent({ aggregateId: "ok-2" }),
    ]);
    fake.events.failEntry = (entry) =>
      JSON.parse(entry.Detail ?? "{}").outboxId === poison?.id ? { code: "MalformedDetail" } : false;

    await drainUntilEmpty(db.pool, destination(), options());

    const { rows } = await db.pool.query(
      "select id, dead_lettered_at is not null as dead, processed_at is not null as published, last_error from outbox_events",
    );
    const byId = new Map(rows.map((row) => [row.id, row]));
    expect(byId.get(poison?.id)).toMatchObject({ dead: true, published: false });
    expect(byId.get(poison?.id)?.last_error).toMatch(/MalformedDetail/);
    for (const row of healthy) expect(byId.get(row.id)).toEqual(publishedRow({ dead: false }));
  });

  it("an outage (bus unreachable, then throttling every request) dead-letters nothing; all arrive after recovery", async () => {
    const written = await writeEvents(
      Array.from({ length: 20 }, (_, i) => anEvent({ aggregateId: `outage-${i % 5}` })),
    );
    // A long backoff, so each drain tries each head once; the test fast-forwards it.
    const slow = options({ maxAttempts: 1, backoffBaseMs: 60_000, backoffMaxMs: 60_000 });
    fake.down();
    const during = await drain(db.pool, destination(), slow);
    fake.up();
    fake.setFaults({ throttle: (action) => action === "PutEvents" });
    await db.pool.query("update outbox_events set available_at = now()");
    await drain(db.pool, destination(), slow);

    expect(during.published).toBe(0);
    expect(await rowStates()).toEqual({ published: 0, pending: 20, dead: 0 });
    const { rows } = await db.pool.query(
      "select attempts, transient_failures from outbox_events where transient_failures > 0",
    );
    expect(rows).toHaveLength(5); // one head per aggregate was tried, twice
    for (const row of rows) expect(row).toMatchObject({ attempts: 0, transient_failures: 2 });

    fake.resetFaults();
    await db.pool.query("update outbox_events set available_at = now()");
    await drainUntilEmpty(db.pool, destination(), options({ maxAttempts: 1 }));
    const ledger = checkLedger(written, eventsAsDeliveries(fake.events.events(busName)));
    expect(ledger.lost).toEqual([]);
    expect(ledger.orderViolations).toEqual([]);
    expect(await rowStates()).toEqual({ published: 20, pending: 0, dead: 0 });
  });

  it("packs requests by the bus's size limit: two 600 KB events go in two requests, never refused as one", async () => {
    await writeEvents([
      anEvent({ aggregateId: "big-1", payload: { blob: "x".repeat(600_000) } }),
      anEvent({ aggregateId: "big-2", payload: { blob: "y".repeat(600_000) } }),
      anEvent({ aggregateId: "small", payload: { n: 1 } }),
    ]);
    const entriesPerRequest: number[] = [];
    fake.setFaults({
      latencyMs: (action, request) => {
        if (action === "PutEvents") entriesPerRequest.push((request.input.Entries as unknown[]).length);
        return 0;
      },
    });

    await drainUntilEmpty(db.pool, destination(), options());

    expect(entriesPerRequest.sort()).toEqual([1, 2]); // one big alone; the other big with the small one
    expect(fake.stats.failedRequests).toBe(0); // no request over the limit, so no ValidationException split
    expect(await rowStates()).toEqual({ published: 3, pending: 0, dead: 0 });
  });

  it("never puts two events of one aggregate in one PutEvents request", async () => {
    await writeEvents(Array.from({ length: 30 }, (_, i) => anEvent({ aggregateId: `one-per-${i % 3}` })));
    const perRequest: string[][] = [];
    fake.setFaults({
      latencyMs: (action, request) => {
        if (action === "PutEvents") {
          const entries = request.input.Entries as { Detail: string }[];
          perRequest.push(entries.map((entry) => JSON.parse(entry.Detail).aggregateId));
        }
        return 0;
      },
    });

    await drainUntilEmpty(db.pool, destination(), options({ batchSize: 100 }));

    expect(perRequest.length).toBeGreaterThanOrEqual(10);
    for (const aggregates of perRequest) expect(new Set(aggregates).size).toBe(aggregates.length);
    expect(await rowStates()).toEqual({ published: 30, pending: 0, dead: 0 });
  });
});
