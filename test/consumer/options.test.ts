import { describe, expect, it } from "vitest";
import { pollOnce } from "../../cli/dev/aws/sqsEventSource.ts";
import { createInboxHandler, type SessionClient } from "../../functions/shared/consumer/index.ts";
import { CONSUMER_SCHEMA, createConsumerTables, effects, recorder, sendAgain } from "../support/consumer.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { enqueueCommitted } from "../support/produce.ts";
import { drain, testRelayOptions } from "../support/relay.ts";
import { createFifoQueue, sqsClient } from "../support/sqs.ts";

const db = useTestDatabase();

async function publish(queueUrl: string, events: ReturnType<typeof anEvent>[]) {
  await createConsumerTables(db.pool);
  const written = await enqueueCommitted(db.pool, events);
  await drain(db.pool, sqsClient(), testRelayOptions(queueUrl));
  return written.map((row) => row.id);
}

describe("createInboxHandler's options", () => {
  it("runs each record's transaction on a session lent by withClient, and rolls back a failed one", async () => {
    const sqs = sqsClient();
    const queueUrl = await createFifoQueue(sqs, "inbox-with-client");
    const [kept, failed] = await publish(queueUrl, [
      anEvent({ aggregateId: "order-w1" }),
      anEvent({ aggregateId: "order-w2", eventType: "order.fails" }),
    ]);
    let lent = 0;
    const withClient = async <T>(work: (client: SessionClient) => Promise<T>) => {
      const client = await db.pool.connect();
      lent++;
      try {
        return await work(client);
      } finally {
        client.release();
      }
    };
    const log = recorder();
    const handler = createInboxHandler(
      async (event, { client }) => {
        await client.query(
          `insert into ${CONSUMER_SCHEMA}.effects (outbox_id, aggregate_id, event_type) values ($1, $2, $3)`,
          [event.id, event.aggregateId, event.eventType],
        );
        if (event.eventType === "order.fails") throw new Error("after writing");
      },
      { withClient, schema: CONSUMER_SCHEMA, ...log },
    );

    const first = await pollOnce(sqs, queueUrl, handler);
    const [keptMessage] = first.messages.filter(
      (message) => message.MessageAttributes?.outboxId?.StringValue === kept,
    );
    if (keptMessage === undefined) throw new Error("the kept event was not received");
    await sendAgain(sqs, queueUrl, keptMessage);
    const again = await pollOnce(sqs, queueUrl, handler);

    expect(first).toMatchObject({ received: 2, failed: 1 });
    expect(again).toMatchObject({ received: 1, failed: 0 });
    expect(lent).toBe(3);
    const applied = await effects(db.pool);
    expect(applied.filter((id) => id === kept)).toEqual([kept]);
    expect(applied).not.toContain(failed);
    // The two groups of the first batch run side by side: either may finish first.
    const statuses = log.outcomes.map((outcome) => outcome.status);
    expect(statuses.slice(0, 2).sort()).toEqual(["failed", "processed"]);
    expect(statuses[2]).toBe("duplicate");
  });

  it("bounds each record's transaction by statementTimeoutMs: a statement that runs longer fails its record", async () => {
    const sqs = sqsClient();
    const queueUrl = await createFifoQueue(sqs, "inbox-timeout");
    await publish(queueUrl, [anEvent({ aggregateId: "order-slow" })]);
    const log = recorder();
    const handler = createInboxHandler(
      async (_event, { client }) => {
        await client.query("select pg_sleep(5)");
      },
      { pool: db.pool, schema: CONSUMER_SCHEMA, statementTimeoutMs: 200, ...log },
    );

    const result = await pollOnce(sqs, queueUrl, handler);

    expect(result).toMatchObject({ received: 1, failed: 1 });
    expect(log.logs.find((line) => line.level === "error")?.fields.error).toMatch(/statement timeout/);
  });

  it("refuses bad options at creation, naming the option and the limit", () => {
    expect(() => createInboxHandler(() => {}, { pool: db.pool, groupConcurrency: 0 })).toThrow(
      /groupConcurrency must be an integer from 1 to 10, got 0/,
    );
    expect(() => createInboxHandler(() => {}, { pool: db.pool, statementTimeoutMs: 50 })).toThrow(
      /statementTimeoutMs must be an integer from 100/,
    );
    expect(() => createInboxHandler(() => {}, {})).toThrow(
      /exactly one of options.pool and options.withClient/,
    );
    expect(() => createInboxHandler(() => {}, { pool: db.pool, table: "in;box" })).toThrow(
      /table: "in;box" is not an accepted identifier/,
    );
    expect(() =>
      createInboxHandler({ "order.placed": "not a function" } as never, { pool: db.pool }),
    ).toThrow(/the route for "order.placed" is not a function/);
  });
});
