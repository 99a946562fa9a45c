import type { Message } from "@aws-sdk/client-sqs";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { runRelay } from "../../functions/shared/relay/engine.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { publishedRow, rowStates } from "../support/outboxRows.ts";
import { enqueueCommitted } from "../support/produce.ts";
import { drain, queueDestination, testRelayOptions } from "../support/relay.ts";
import { createFifoQueue, receiveAll, sqsClient } from "../support/sqs.ts";

const db = useTestDatabase();
const sqs = sqsClient();

function attribute(message: Message | undefined, name: string) {
  return message?.MessageAttributes?.[name]?.StringValue;
}

describe(`relay against a real SQS FIFO emulator (${inject("awsSource")})`, () => {
  let queueUrl: string;
  beforeAll(async () => {
    queueUrl = await createFifoQueue(sqs, "conformance");
  });

  it("publishes with group id, dedup id, attributes and body as specified, and records rows published", async () => {
    const event = anEvent({
      aggregateType: "order",
      aggregateId: "order-42",
      eventType: "order.created",
      payload: { total: 12.5, items: [{ sku: "A-1", qty: 2 }], note: "a, b: c" },
      headers: {
        traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        correlationId: "c-1",
      },
    });
    const { id, seq } = await enqueueCommitted(db.pool, event);
    const { rows: stored } = await db.pool.query("select created_at from outbox_events where id = $1", [id]);
    const before = await rowStates(db.pool);

    const summary = await drain(db.pool, sqs, testRelayOptions(queueUrl));

    expect(summary).toMatchObject({
      claimed: 1,
      published: 1,
      failed: 0,
      deadLettered: 0,
      stoppedBy: "drained",
    });
    const [message] = await receiveAll(sqs, queueUrl, 1);
    expect(message?.Attributes?.MessageGroupId).toBe("order-42");
    expect(message?.Attributes?.MessageDeduplicationId).toBe(id);
    expect(JSON.parse(message?.Body ?? "")).toEqual(event.payload);
    expect(message?.Body).not.toMatch(/": |, "/); // compact JSON, as the write API sized it
    expect(attribute(message, "eventType")).toBe("order.created");
    expect(attribute(message, "aggregateType")).toBe("order");
    expect(attribute(message, "aggregateId")).toBe("order-42");
    expect(attribute(message, "outboxId")).toBe(id);
    expect(attribute(message, "createdAt")).toBe(stored[0].created_at.toISOString());
    expect(attribute(message, "seq")).toBe(String(seq));
    expect(attribute(message, "traceparent")).toBe(event.headers?.traceparent);
    expect(attribute(message, "correlationId")).toBe("c-1");
    const { rows } = await db.pool.query(
      "select processed_at is not null as published, attempts from outbox_events where id = $1",
      [id],
    );
    expect(rows[0]).toEqual(publishedRow({ attempts: 0 }));
    expect((await rowStates(db.pool)).published).toBe(before.published + 1);
  });

  it("does not deliver a republished event (same outbox id) twice within the dedup window", async () => {
    const queue = await createFifoQueue(sqs, "dedup");
    const ids = (
      await enqueueCommitted(db.pool, [
        anEvent({ aggregateId: "dedup-a" }),
        anEvent({ aggregateId: "dedup-b" }),
      ])
    ).map((row) => row.id);
    const { rows: enqueued } = await db.pool.query("select * from outbox_events where id = any($1::uuid[])", [
      ids,
    ]);
    await drain(db.pool, sqs, testRelayOptions(queue));
    // As if the relay died after SQS accepted the batch but before its commit: the rows are pending again, as
    // they were before the drain marked (keep) or deleted (delete) them.
    await db.pool.query("delete from outbox_events where id = any($1::uuid[])", [ids]);
    await db.pool.query(
      `insert into outbox_events overriding system value
       select * from json_populate_recordset(null::outbox_events, $1::json)`,
      [JSON.stringify(enqueued)],
    );

    const second = await drain(db.pool, sqs, testRelayOptions(queue));

    expect(second.published).toBe(2);
    const messages = await receiveAll(sqs, queue, 3, 2_000);
    expect(messages.map((message) => attribute(message, "outboxId")).sort()).toEqual([...ids].sort());
  });

  it("delivers each aggregate's events in seq order", async () => {
    const queue = await createFifoQueue(sqs, "order");
    const events = Array.from({ length: 30 }, (_, i) =>
      anEvent({ aggregateId: `agg-${i % 3}`, payload: { i } }),
    );
    await enqueueCommitted(db.pool, events);

    await drain(db.pool, sqs, testRelayOptions(queue, { batchSize: 7 }));

    const messages = await receiveAll(sqs, queue, 30);
    const byGroup = new Map<string, number[]>();
    for (const message of messages) {
      const group = message.Attributes?.MessageGroupId ?? "";
      byGroup.set(group, [...(byGroup.get(group) ?? []), Number(message.Attributes?.SequenceNumber)]);
      expect(JSON.parse(message.Body ?? "").i % 3).toBe(Number(group.slice(-1)));
    }
    for (const [group, sequence] of byGroup) {
      const payloads = messages
        .filter((message) => message.Attributes?.MessageGroupId === group)
        .map((message) => JSON.parse(message.Body ?? "").i);
      expect(payloads).toEqual([...payloads].sort((a, b) => a - b));
      expect(sequence).toHaveLength(10);
    }
  });

  it("dead-letters a row that can never be sent and keeps publishing the others", async () => {
    const queue = await createFifoQueue(sqs, "poison");
    const [healthy] = await enqueueCommitted(db.pool, [anEvent({ aggregateId: "healthy-1" })]);
    const { rows } = await db.pool.query(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload)
       values ('order', 'bad group id', 'order.created', '{}'), ('order', 'bad group id', 'order.updated', '{}')
       returning id`,
    );
    const [poison, successor] = rows.map((row) => row.id);

    const summary = await drain(db.pool, sqs, testRelayOptions(queue));

    expect(summary.deadLettered).toBe(2);
    const { rows: states } = await db.pool.query(
      "select id, processed_at is not null as published, dead_lettered_at is not null as dead, attempts, last_error from outbox_events where id = any($1::uuid[])",
      [[healthy?.id, poison, successor]],
    );
    const state = new Map(states.map((row) => [row.id, row]));
    expect(state.get(healthy?.id)).toEqual(publishedRow({ dead: false }));
    expect(state.get(poison)).toMatchObject({ published: false, dead: true, attempts: 1 });
    expect(state.get(poison).last_error).toMatch(/aggregate_id: contains " "/);
    const { rows: view } = await db.pool.query("select id from outbox_dead_letters where id = $1", [poison]);
    expect(view).toHaveLength(1);
  });

  it("in strict mode, a dead letter blocks the rest of its aggregate; by default it does not", async () => {
    const queue = await createFifoQueue(sqs, "strict");
    const { rows } = await db.pool.query(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, dead_lettered_at, attempts)
       values ('order', 'strict-1', 'order.created', '{}', now(), 10) returning id`,
    );
    const [next] = await enqueueCommitted(db.pool, [anEvent({ aggregateId: "strict-1" })]);

    const strict = await drain(db.pool, sqs, testRelayOptions(queue, { strictOrder: true }));
    const { rows: blocked } = await db.pool.query("select processed_at from outbox_events where id = $1", [
      next?.id,
    ]);
    const relaxed = await drain(db.pool, sqs, testRelayOptions(queue, { strictOrder: false }));
    const { rows: flowed } = await db.pool.query(
      "select processed_at is not null as published from outbox_events where id = $1",
      [next?.id],
    );

    expect(rows).toHaveLength(1);
    expect(strict.published).toBe(0);
    expect(blocked[0].processed_at).toBeNull();
    expect(relaxed.published).toBe(1);
    expect(flowed[0]).toEqual(publishedRow());
  });

  it("does not claim an aggregate's later event while an earlier one is in backoff", async () => {
    const queue = await createFifoQueue(sqs, "backoff");
    const [first, second] = await enqueueCommitted(db.pool, [
      anEvent({ aggregateId: "waiting-1" }),
      anEvent({ aggregateId: "waiting-1" }),
    ]);
    await db.pool.query("update outbox_events set available_at = now() + interval '1 hour' where id = $1", [
      first?.id,
    ]);

    const summary = await drain(db.pool, sqs, testRelayOptions(queue));

    const { rows } = await db.pool.query("select processed_at from outbox_events where id = $1", [
      second?.id,
    ]);
    expect(rows[0].processed_at).toBeNull();
    expect(summary.published).toBe(0);
  });

  it("stops claiming in time for its deadline and leaves no row locked", async () => {
    const queue = await createFifoQueue(sqs, "deadline");
    await enqueueCommitted(
      db.pool,
      Array.from({ length: 20 }, () => anEvent()),
    );
    const options = testRelayOptions(queue, {
      mode: "dwell",
      publishTimeoutMs: 300,
      statementTimeoutMs: 100,
    });
    const before = await rowStates(db.pool);
    const deadline = Date.now() + 3_000;

    const summary = await runRelay(
      { pool: db.pool, destination: queueDestination(sqs, options), deadline },
      options,
    );

    expect(Date.now()).toBeLessThanOrEqual(deadline);
    expect(summary.stoppedBy).toBe("deadline");
    // How many rounds fit, and whether moto answers within the publish timeout, depends on the machine's load;
    // rounds ran, and what was reported published is what was recorded.
    expect(summary.rounds).toBeGreaterThan(0);
    expect((await rowStates(db.pool)).published - before.published).toBe(summary.published);
    // Every row can be locked at once without waiting: the relay holds nothing.
    const { rowCount } = await db.pool.query("select id from outbox_events for update nowait");
    expect(rowCount).toBeGreaterThan(0);
  });

  it("does not start a round when the deadline is closer than one round's reserve", async () => {
    const queue = await createFifoQueue(sqs, "no-time");
    const [event] = await enqueueCommitted(db.pool, [anEvent()]);

    const summary = await runRelay(
      {
        pool: db.pool,
        destination: queueDestination(sqs, { queueUrl: queue }),
        deadline: Date.now() + 1_000,
      },
      testRelayOptions(queue),
    );

    expect(summary).toMatchObject({ rounds: 0, claimed: 0, stoppedBy: "deadline" });
    const { rows } = await db.pool.query("select processed_at from outbox_events where id = $1", [event?.id]);
    expect(rows[0].processed_at).toBeNull();
  });
});
