import { describe, expect, it } from "vitest";
import { createInboxHandler, type InboxRecordHandler } from "../../functions/shared/consumer/index.ts";
import { type EnqueuedEvent, enqueue } from "../../functions/shared/produce/enqueue.ts";
import {
  eventBridgeRecordOf,
  sqsEventOf,
  sqsRecordFromMessage,
  sqsRecordOf,
} from "../../functions/shared/testing/index.ts";
import {
  CONSUMER_SCHEMA,
  createConsumerTables,
  effects,
  lambdaContextWithRemaining,
} from "../support/consumer.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { enqueueCommitted } from "../support/produce.ts";
import { drain, testRelayOptions } from "../support/relay.ts";
import { createFifoQueue, receiveAll, useFakeSqs } from "../support/sqs.ts";

const db = useTestDatabase();
const aws = useFakeSqs();

const writeEffect: InboxRecordHandler = async (event, { client }) => {
  await client.query(
    `insert into ${CONSUMER_SCHEMA}.effects (outbox_id, aggregate_id, event_type) values ($1, $2, $3)`,
    [event.id, event.aggregateId, event.eventType],
  );
};

const context = lambdaContextWithRemaining(() => 60_000);

describe("aws-outbox-relay/testing", () => {
  it("builds from an outbox row the record of exactly the message the relay sends for it", async () => {
    const queueUrl = await createFifoQueue(aws.sqs, "testing-helper");
    await enqueueCommitted(db.pool, [
      anEvent({ aggregateId: "order-h1", payload: { total: 4200, lines: [{ sku: "a" }] } }),
      anEvent({
        aggregateId: "order-h2",
        eventType: "order.paid",
        headers: { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", tenant: "t-1" },
      }),
    ]);
    const { rows } = await db.pool.query("select * from outbox_events order by seq");
    await drain(db.pool, aws.sqs, testRelayOptions(queueUrl));
    const received = await receiveAll(aws.sqs, queueUrl, rows.length);
    expect(received).toHaveLength(rows.length);

    for (const row of rows) {
      const sent = received.find((message) => message.MessageAttributes?.outboxId?.StringValue === row.id);
      if (sent === undefined) throw new Error(`the relay sent nothing for ${row.id}`);
      const built = sqsRecordOf(row);
      const delivered = sqsRecordFromMessage(sent);
      expect(built.messageAttributes, row.aggregate_id).toEqual(delivered.messageAttributes);
      expect(JSON.parse(built.body)).toEqual(JSON.parse(delivered.body));
      expect(built.attributes.MessageGroupId).toBe(delivered.attributes.MessageGroupId);
      expect(built.attributes.MessageDeduplicationId).toBe(delivered.attributes.MessageDeduplicationId);
    }
  });

  it("builds records the inbox applies against Postgres, from a row and from an enqueued event", async () => {
    await createConsumerTables(db.pool);
    const event = anEvent({ aggregateId: "order-h3", eventType: "order.shipped" });
    const client = await db.pool.connect();
    let enqueued: EnqueuedEvent;
    try {
      await client.query("begin");
      enqueued = await enqueue(client, event);
      await client.query("commit");
    } finally {
      client.release();
    }
    const [other] = await enqueueCommitted(db.pool, [anEvent({ aggregateId: "order-h4" })]);
    const { rows } = await db.pool.query("select * from outbox_events where id = $1", [other?.id]);
    const handler = createInboxHandler(writeEffect, { pool: db.pool, schema: CONSUMER_SCHEMA });

    const result = await handler(
      sqsEventOf(sqsRecordOf({ ...event, ...enqueued }), sqsRecordOf(rows[0])),
      context,
    );

    expect(result).toEqual({ batchItemFailures: [] });
    expect((await effects(db.pool)).sort()).toEqual([enqueued.id, other?.id].sort());
    // A redelivery (receive count 2) of the same event is a duplicate: applied once.
    await handler(sqsEventOf(sqsRecordOf(rows[0], { receiveCount: 2 })), context);
    expect(await effects(db.pool)).toHaveLength(2);
  });

  it("builds the EventBridge delivery of an event, which the inbox applies with the bus's source as its origin", async () => {
    await createConsumerTables(db.pool);
    const [written] = await enqueueCommitted(db.pool, [
      anEvent({
        aggregateId: "order-h5",
        headers: { tenant: "t-2" },
        payload: { total: 4200 },
      }),
    ]);
    const { rows } = await db.pool.query("select * from outbox_events where id = $1", [written?.id]);
    const seen: { origin: string; headers: Record<string, string>; payload: unknown }[] = [];
    const handler = createInboxHandler(
      async (event, session) => {
        seen.push({ origin: event.origin, headers: event.headers, payload: event.payload });
        await writeEffect(event, session);
      },
      { pool: db.pool, schema: CONSUMER_SCHEMA },
    );

    const record = eventBridgeRecordOf(rows[0], { source: "orders-service" });
    const result = await handler(sqsEventOf(record), context);

    expect(record.messageAttributes).toEqual({});
    expect(result).toEqual({ batchItemFailures: [] });
    expect(await effects(db.pool)).toContain(written?.id);
    expect(seen).toEqual([
      { origin: "orders-service", headers: { tenant: "t-2" }, payload: { total: 4200 } },
    ]);
  });
});
