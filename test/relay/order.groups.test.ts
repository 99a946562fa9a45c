import type pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { enqueue } from "../../functions/shared/produce/enqueue.ts";
import { waitFor } from "../chaos/support/waitFor.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { enqueueCommitted } from "../support/produce.ts";
import { drain, testRelayOptions } from "../support/relay.ts";
import { openSession, type Session, waitsOnLock } from "../support/sessions.ts";
import { createFifoQueue, receiveAll, sqsClient } from "../support/sqs.ts";

/**
 * Issue 21, finding 2: the FIFO group is aggregate_id, so Order/42 and Shipment/42 share a group, and the group
 * is the ordering unit: the claim and the commit-order lock must key on it, not on (aggregate_type, aggregate_id).
 */
const db = useTestDatabase();
const sqs = sqsClient();
const sessions: pg.Client[] = [];

async function session(): Promise<Session> {
  const opened = await openSession(db.url);
  sessions.push(opened.client);
  return opened;
}

afterAll(async () => {
  await Promise.all(sessions.map((client) => client.end().catch(() => {})));
});

describe("one ordering unit: the message group (aggregate_id)", () => {
  it("delivers two aggregate types sharing an id in commit order, within one round", async () => {
    const queueUrl = await createFifoQueue(sqs, "groups");
    const group = `g42-${Date.now()}`;
    const [shipment] = await enqueueCommitted(db.pool, [
      anEvent({ aggregateType: "Shipment", aggregateId: group, eventType: "shipment.created" }),
    ]);
    const [order] = await enqueueCommitted(db.pool, [
      anEvent({ aggregateType: "Order", aggregateId: group, eventType: "order.created" }),
    ]);

    await drain(db.pool, sqs, testRelayOptions(queueUrl));

    const received = await receiveAll(sqs, queueUrl, 2);
    expect(received.map((m) => m.MessageAttributes?.outboxId?.StringValue)).toEqual([
      shipment?.id,
      order?.id,
    ]);
  });

  it("makes a writer of Order/42 wait for an open writer of Shipment/42 (one commit-order lock per group)", async () => {
    const group = `g43-${Date.now()}`;
    const [first, second] = [await session(), await session()];
    await first.client.query("begin");
    await enqueue(first.client, anEvent({ aggregateType: "Shipment", aggregateId: group }));
    await second.client.query("begin");
    const secondInsert = enqueue(second.client, anEvent({ aggregateType: "Order", aggregateId: group }));

    await waitFor(
      "the Order writer to wait for the Shipment writer",
      () => waitsOnLock(db.pool, second.pid),
      10_000,
    );
    await first.client.query("commit");
    const inserted = await secondInsert;
    await second.client.query("commit");

    const { rows } = await db.pool.query<{ aggregate_type: string }>(
      "select aggregate_type from outbox_events where aggregate_id = $1 order by seq",
      [group],
    );
    expect(rows.map((row) => row.aggregate_type)).toEqual(["Shipment", "Order"]);
    expect(inserted.seq).toBeGreaterThan(0n);
  });
});
