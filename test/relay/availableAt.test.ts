import { describe, expect, it } from "vitest";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { enqueueCommitted } from "../support/produce.ts";
import { drain, testRelayOptions } from "../support/relay.ts";
import { createFifoQueue, receiveAll, sqsClient } from "../support/sqs.ts";

/**
 * Issue 21, finding 6: available_at = 'infinity' (or years ahead), put in by hand, blocked its group forever with
 * no signal. More than a year ahead is malformed: dead-lettered, naming the field; the write API refuses it.
 */
const db = useTestDatabase();
const sqs = sqsClient();

describe("available_at beyond a year", () => {
  it("is dead-lettered naming the field, and its group's later events and other groups flow", async () => {
    const queueUrl = await createFifoQueue(sqs, "available-at");
    const group = `far-${Date.now()}`;
    const { rows } = await db.pool.query<{ id: string; available_at: string }>(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, available_at)
       values ('order', $1, 'order.created', '{}', 'infinity'), ('order', $1 || '-b', 'order.created', '{}', now() + interval '3 years')
       returning id`,
      [group],
    );
    const [after] = await enqueueCommitted(db.pool, [anEvent({ aggregateId: group })]);
    const [other] = await enqueueCommitted(db.pool, [anEvent()]);
    // A delay within the bound is a delay, not a fault.
    await enqueueCommitted(db.pool, [anEvent({ availableAt: new Date(Date.now() + 30 * 86_400_000) })]);

    await drain(db.pool, sqs, testRelayOptions(queueUrl));

    const received = await receiveAll(sqs, queueUrl, 2);
    expect(received.map((m) => m.MessageAttributes?.outboxId?.StringValue).sort()).toEqual(
      [after?.id, other?.id].sort(),
    );
    const { rows: dead } = await db.pool.query(
      "select id, last_error from outbox_events where dead_lettered_at is not null order by seq",
    );
    expect(dead.map((row) => row.id)).toEqual(rows.map((row) => row.id));
    expect(dead[0].last_error).toMatch(/available_at: is infinity, more than 365 days ahead/);
    const { rows: waiting } = await db.pool.query(
      "select count(*)::int as n from outbox_events where processed_at is null and dead_lettered_at is null",
    );
    expect(waiting[0].n).toBe(1);
  });

  it("is refused by the write API, naming the field and the bound", async () => {
    await expect(
      enqueueCommitted(db.pool, anEvent({ availableAt: new Date(Date.now() + 400 * 86_400_000) })),
    ).rejects.toThrow(/event\.availableAt.*more than 365 days ahead/);
  });
});
