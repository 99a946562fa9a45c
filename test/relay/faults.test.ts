import { beforeEach, describe, expect, it } from "vitest";
import type { SessionPool } from "../../functions/shared/db/session.ts";
import type { OutboxEvent } from "../../functions/shared/produce/enqueue.ts";
import { runRelay } from "../../functions/shared/relay/engine.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { checkLedger } from "../support/ledger.ts";
import {
  clearOutbox,
  rowStates as outboxRowStates,
  publishedRow,
  writeEvents as writeOutboxEvents,
} from "../support/outboxRows.ts";
import { drain, drainUntilEmpty, queueDestination, testRelayOptions } from "../support/relay.ts";
import { createFifoQueue, useFakeSqs } from "../support/sqs.ts";

const db = useTestDatabase();
const aws = useFakeSqs();

beforeEach(async () => {
  aws.fake.resetFaults();
  aws.fake.up();
  await clearOutbox(db.pool);
});

function queueName(url: string) {
  return url.split("/").pop() as string;
}

const writeEvents = (events: OutboxEvent<unknown>[]) => writeOutboxEvents(db.pool, events);
const rowStates = () => outboxRowStates(db.pool);

describe("relay under SQS faults (in-process SQS endpoint)", () => {
  it("records transient failures and backoff while SQS is down, loses nothing, and publishes everything after recovery", async () => {
    const queue = await createFifoQueue(aws.sqs, "outage");
    const written = await writeEvents(
      Array.from({ length: 30 }, (_, i) => anEvent({ aggregateId: `outage-${i % 5}` })),
    );
    aws.fake.down();

    const duringOutage = await drain(
      db.pool,
      aws.sqs,
      testRelayOptions(queue, { backoffBaseMs: 60_000, backoffMaxMs: 60_000 }),
    );

    const { rows } = await db.pool.query(
      "select attempts, transient_failures, last_error, available_at > now() + interval '20 seconds' as backed_off, dead_lettered_at from outbox_events where attempts + transient_failures > 0",
    );
    expect(duringOutage.published).toBe(0);
    expect(rows).toHaveLength(5); // one head per aggregate was tried; the rest waited behind it
    for (const row of rows) {
      // SQS being down says nothing about the message: no attempt is used up.
      expect(row).toMatchObject({
        attempts: 0,
        transient_failures: 1,
        backed_off: true,
        dead_lettered_at: null,
      });
      expect(row.last_error).toMatch(/ECONNRESET|socket hang up|TimeoutError/);
    }

    aws.fake.up();
    await db.pool.query("update outbox_events set available_at = now() where transient_failures > 0"); // fast-forward the backoff
    await drainUntilEmpty(db.pool, aws.sqs, testRelayOptions(queue));

    const ledger = checkLedger(written, aws.fake.deliveries(queueName(queue)));
    expect(ledger.lost).toEqual([]);
    expect(ledger.orderViolations).toEqual([]);
    expect(await rowStates()).toEqual({ published: 30, pending: 0, dead: 0 });
  });

  it("never dead-letters because of whole-request failures (throttling), however many", async () => {
    const queue = await createFifoQueue(aws.sqs, "throttle");
    await writeEvents([anEvent({ aggregateId: "throttled-1" })]);
    aws.fake.setFaults({ throttle: 1 });

    for (let i = 0; i < 5; i++) {
      await db.pool.query("update outbox_events set available_at = now()");
      await drain(
        db.pool,
        aws.sqs,
        testRelayOptions(queue, { maxAttempts: 2, backoffBaseMs: 60_000, backoffMaxMs: 60_000 }),
      );
    }

    const { rows } = await db.pool.query(
      "select attempts, transient_failures, dead_lettered_at, last_error from outbox_events",
    );
    expect(rows[0]).toMatchObject({ attempts: 0, transient_failures: 5, dead_lettered_at: null });
    expect(rows[0].last_error).toMatch(/ThrottlingException/);
    expect(aws.fake.stats.throttled).toBeGreaterThanOrEqual(5);
  });

  it("fails only the failed entry; its aggregate's later events wait while other aggregates flow", async () => {
    const queue = await createFifoQueue(aws.sqs, "one-entry");
    const [bad1, bad2, other1, other2] = await writeEvents([
      anEvent({ aggregateId: "rejected-agg", payload: { n: 1 } }),
      anEvent({ aggregateId: "rejected-agg", payload: { n: 2 } }),
      anEvent({ aggregateId: "healthy-agg", payload: { n: 1 } }),
      anEvent({ aggregateId: "healthy-agg", payload: { n: 2 } }),
    ]);
    aws.fake.setFaults({
      failEntry: (entry) =>
        entry.MessageDeduplicationId === bad1?.id ? { code: "InternalError", senderFault: false } : false,
    });

    const logged: { level: string; message: string; fields: Record<string, unknown> }[] = [];
    const record = (level: string) => (message: string, fields: Record<string, unknown>) =>
      void logged.push({ level, message, fields });
    const logger = { info: record("info"), warn: record("warn"), error: record("error") };

    const summary = await runRelay(
      {
        pool: db.pool,
        destination: queueDestination(aws.sqs, { queueUrl: queue }),
        deadline: Date.now() + 30_000,
        logger,
      },
      testRelayOptions(queue, { backoffBaseMs: 60_000, backoffMaxMs: 60_000 }),
    );

    // The failure line carries what an operator needs to find the event.
    expect(logged).toEqual([
      {
        level: "warn",
        message: "event publish failed; will retry after backoff",
        fields: expect.objectContaining({
          eventId: bad1?.id,
          eventType: "order.created",
          aggregateId: "rejected-agg",
          transientFailure: 1,
          error: expect.stringMatching(/InternalError/),
        }),
      },
    ]);
    const { rows } = await db.pool.query(
      "select id, processed_at is not null as published, attempts, transient_failures, dead_lettered_at is not null as dead from outbox_events",
    );
    const state = new Map(rows.map((row) => [row.id, row]));
    expect(state.get(bad1?.id)).toMatchObject({
      published: false,
      attempts: 0,
      transient_failures: 1,
      dead: false,
    });
    expect(state.get(bad2?.id)).toMatchObject({ published: false, attempts: 0 });
    expect(state.get(other1?.id)).toEqual(publishedRow());
    expect(state.get(other2?.id)).toEqual(publishedRow());
    expect(await rowStates()).toEqual({ published: 2, pending: 2, dead: 0 });
    expect(summary.failed).toBe(1);
    expect(aws.fake.deliveries(queueName(queue)).map((delivery) => delivery.dedupId)).toEqual([
      other1?.id,
      other2?.id,
    ]);
  });

  it("dead-letters at once an entry SQS rejects as invalid, and after max attempts one SQS keeps rejecting as the sender's fault", async () => {
    const queue = await createFifoQueue(aws.sqs, "dead");
    const [invalid, flaky, healthy] = await writeEvents([anEvent(), anEvent(), anEvent()]);
    aws.fake.setFaults({
      failEntry: (entry) => {
        if (entry.MessageDeduplicationId === invalid?.id)
          return { code: "InvalidParameterValue", senderFault: true };
        if (entry.MessageDeduplicationId === flaky?.id)
          return { code: "UnsupportedOperation", senderFault: true };
        return false;
      },
    });

    await drainUntilEmpty(db.pool, aws.sqs, testRelayOptions(queue, { maxAttempts: 3 }));

    const { rows } = await db.pool.query(
      "select id, attempts, dead_lettered_at is not null as dead, processed_at is not null as published from outbox_events",
    );
    const state = new Map(rows.map((row) => [row.id, row]));
    expect(state.get(invalid?.id)).toMatchObject({ attempts: 1, dead: true, published: false });
    expect(state.get(flaky?.id)).toMatchObject({ attempts: 3, dead: true, published: false });
    expect(state.get(healthy?.id)).toEqual(publishedRow({ dead: false }));
    expect(await rowStates()).toEqual({ published: 1, pending: 0, dead: 2 });
  });

  it("never counts server-side entry errors (SenderFault = false) towards max attempts, however many", async () => {
    const queue = await createFifoQueue(aws.sqs, "server-side");
    const written = await writeEvents([
      anEvent({ aggregateId: "server-side-1", payload: { n: 1 } }),
      anEvent({ aggregateId: "server-side-1", payload: { n: 2 } }),
    ]);
    const [first] = written;
    const failures = { InternalError: 0, ServiceUnavailable: 0 };
    aws.fake.setFaults({
      failEntry: (entry) => {
        if (entry.MessageDeduplicationId !== first?.id) return false;
        const code = failures.InternalError < 3 ? "InternalError" : "ServiceUnavailable";
        if (failures[code] >= 3) return false;
        failures[code]++;
        return { code, senderFault: false };
      },
    });

    await drainUntilEmpty(db.pool, aws.sqs, testRelayOptions(queue, { maxAttempts: 2 }));

    const { rows } = await db.pool.query(
      "select attempts, transient_failures, dead_lettered_at, processed_at is not null as published from outbox_events where id = $1",
      [first?.id],
    );
    expect(failures).toEqual({ InternalError: 3, ServiceUnavailable: 3 });
    // Published, not dead-lettered after six failures at maxAttempts 2; the kept row shows how they counted.
    expect(rows[0]).toEqual(publishedRow({ attempts: 0, transient_failures: 6, dead_lettered_at: null }));
    expect(await rowStates()).toEqual({ published: 2, pending: 0, dead: 0 });
    const ledger = checkLedger(written, aws.fake.deliveries(queueName(queue)));
    expect(ledger.lost).toEqual([]);
    expect(ledger.orderViolations).toEqual([]);
  });

  it("never dead-letters for entry errors of the account's configuration (KMS, access, throttling), even as sender faults", async () => {
    const queue = await createFifoQueue(aws.sqs, "kms");
    const written = await writeEvents([
      anEvent({ aggregateId: "kms-1", payload: { n: 1 } }),
      anEvent({ aggregateId: "kms-1", payload: { n: 2 } }),
    ]);
    const [first] = written;
    const codes = ["KmsDisabled", "KmsAccessDenied", "AccessDenied", "ThrottlingException"];
    const seen: string[] = [];
    aws.fake.setFaults({
      failEntry: (entry) => {
        if (entry.MessageDeduplicationId !== first?.id || seen.length === codes.length) return false;
        const code = codes[seen.length] ?? "KmsDisabled";
        seen.push(code);
        return { code, senderFault: true };
      },
    });

    await drainUntilEmpty(db.pool, aws.sqs, testRelayOptions(queue, { maxAttempts: 2 }));

    expect(seen).toEqual(codes);
    const { rows } = await db.pool.query(
      "select attempts, transient_failures, dead_lettered_at, processed_at is not null as published from outbox_events where id = $1",
      [first?.id],
    );
    expect(rows[0]).toEqual(publishedRow({ attempts: 0, transient_failures: 4, dead_lettered_at: null }));
    expect(await rowStates()).toEqual({ published: 2, pending: 0, dead: 0 });
    const ledger = checkLedger(written, aws.fake.deliveries(queueName(queue)));
    expect(ledger.lost).toEqual([]);
    expect(ledger.orderViolations).toEqual([]);
  });

  it("republishes with the same dedup ids when the relay dies between publish and record", async () => {
    const queue = await createFifoQueue(aws.sqs, "crash");
    const written = await writeEvents(
      Array.from({ length: 8 }, (_, i) => anEvent({ aggregateId: `crash-${i}` })),
    );
    // The relay's session is killed while SQS holds the (accepted) batch: its record step cannot commit.
    let killed = false;
    aws.fake.setFaults({
      latencyMs: (action) => {
        if (action !== "SendMessageBatch" || killed) return 0;
        killed = true;
        void db.pool.query(
          "select pg_terminate_backend(pid) from pg_stat_activity where state = 'idle in transaction' and datname = current_database()",
        );
        return 200;
      },
    });

    // The crashed round rolls back; the same drain's next round claims the rows again and republishes them.
    const run = await drain(db.pool, aws.sqs, testRelayOptions(queue));

    const deliveries = aws.fake.deliveries(queueName(queue));
    const ledger = checkLedger(written, deliveries);
    expect(killed).toBe(true);
    expect(run).toMatchObject({ failedRounds: 1, published: 8 });
    expect(ledger.lost).toEqual([]);
    expect(ledger.duplicates).toBe(8); // each event sent twice, with the same deduplication id
    expect(deliveries.filter((delivery) => delivery.duplicate)).toHaveLength(8);
    expect(await rowStates()).toEqual({ published: 8, pending: 0, dead: 0 });
  });

  it("keeps every event and per-aggregate order with four relays at once and random publish failures", async () => {
    const queue = await createFifoQueue(aws.sqs, "four-relays");
    const events = Array.from({ length: 2_000 }, (_, i) =>
      anEvent({ aggregateId: `agg-${i % 50}`, payload: { i } }),
    );
    const written = await writeEvents(events);
    let random = 42;
    const nextRandom = () => {
      random = (random * 1_103_515_245 + 12_345) % 2 ** 31;
      return random / 2 ** 31;
    };
    aws.fake.setFaults({
      failEntry: () => (nextRandom() < 0.1 ? { code: "InternalError", senderFault: false } : false),
      throttle: (action) => action === "SendMessageBatch" && nextRandom() < 0.03,
    });
    const options = testRelayOptions(queue, { batchSize: 25, maxAttempts: 100 });

    await Promise.all(
      Array.from({ length: 4 }, async () => {
        for (;;) {
          const summary = await runRelay(
            { pool: db.pool, destination: queueDestination(aws.sqs, options), deadline: Date.now() + 30_000 },
            options,
          );
          const { pending } = await rowStates();
          if (pending === 0) return summary;
        }
      }),
    );

    const ledger = checkLedger(written, aws.fake.deliveries(queueName(queue)));
    expect(aws.fake.stats.failedEntries + aws.fake.stats.throttled).toBeGreaterThan(50); // the faults really happened
    expect(ledger.lost).toEqual([]);
    expect(ledger.orderViolations).toEqual([]);
    expect(await rowStates()).toEqual({ published: 2_000, pending: 0, dead: 0 });
  });

  it("keeps every event and per-aggregate order with parallel rounds overlapping their publishes", async () => {
    const queue = await createFifoQueue(aws.sqs, "parallel-rounds");
    const events = Array.from({ length: 1_500 }, (_, i) =>
      anEvent({ aggregateId: `par-${i % 40}`, payload: { i } }),
    );
    const written = await writeEvents(events);
    let random = 7;
    const nextRandom = () => {
      random = (random * 1_103_515_245 + 12_345) % 2 ** 31;
      return random / 2 ** 31;
    };
    aws.fake.setFaults({
      latencyMs: () => Math.floor(nextRandom() * 15),
      failEntry: () => (nextRandom() < 0.1 ? { code: "InternalError", senderFault: false } : false),
    });
    const options = testRelayOptions(queue, { batchSize: 20, maxAttempts: 100, parallelRounds: 3 });
    // Counts sessions checked out at once: each round holds one from claim to commit.
    let inUse = 0;
    let mostInUse = 0;
    const countingPool: SessionPool = {
      async connect() {
        const client = await db.pool.connect();
        mostInUse = Math.max(mostInUse, ++inUse);
        const release = client.release.bind(client);
        return Object.assign(client, {
          release: (destroy?: boolean | Error) => {
            inUse--;
            release(destroy);
          },
        });
      },
    };

    await runRelay(
      { pool: countingPool, destination: queueDestination(aws.sqs, options), deadline: Date.now() + 30_000 },
      options,
    );
    await drainUntilEmpty(db.pool, aws.sqs, options);

    const ledger = checkLedger(written, aws.fake.deliveries(queueName(queue)));
    expect(mostInUse).toBe(3);
    expect(aws.fake.stats.failedEntries).toBeGreaterThan(20);
    expect(ledger.lost).toEqual([]);
    expect(ledger.orderViolations).toEqual([]);
    expect(await rowStates()).toEqual({ published: 1_500, pending: 0, dead: 0 });
  });
});
