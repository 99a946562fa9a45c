import pg from "pg";
import { describe, expect, it } from "vitest";
import { pollOnce } from "../../cli/dev/aws/sqsEventSource.ts";
import {
  createInboxHandler,
  type InboxEvent,
  type InboxRecordHandler,
  InboxUnavailableError,
} from "../../functions/shared/consumer/index.ts";
import { freePort } from "../../local/backends/freePort.ts";
import {
  CONSUMER_SCHEMA,
  createConsumerTables,
  effects,
  inboxIds,
  makeVisibleAgain,
  outboxIdOf,
  recorder,
  sendAgain,
} from "../support/consumer.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { enqueueCommitted } from "../support/produce.ts";
import { drain, testRelayOptions } from "../support/relay.ts";
import { createFifoQueue, sqsClient } from "../support/sqs.ts";

const db = useTestDatabase();

/** The effect every test handler has: one row in the consumer's own table, written in the record's transaction. */
const writeEffect: InboxRecordHandler = async (event, { client }) => {
  await client.query(
    `insert into ${CONSUMER_SCHEMA}.effects (outbox_id, aggregate_id, event_type) values ($1, $2, $3)`,
    [event.id, event.aggregateId, event.eventType],
  );
};

/** Events written through the write API and published by the real relay, so the consumer reads real messages. */
async function publish(queueUrl: string, events: ReturnType<typeof anEvent>[]) {
  await createConsumerTables(db.pool);
  const written = await enqueueCommitted(db.pool, events);
  await drain(db.pool, sqsClient(), testRelayOptions(queueUrl));
  return written.map((row) => row.id);
}

describe("createInboxHandler against Postgres and the SQS emulator", () => {
  it("hands the user the relay's message as a typed event, trace context included", async () => {
    const sqs = sqsClient();
    const queueUrl = await createFifoQueue(sqs, "inbox-parse");
    const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const [id] = await publish(queueUrl, [
      anEvent({
        aggregateType: "order",
        aggregateId: "order-parse",
        eventType: "order.placed",
        payload: { total: 4200, lines: [{ sku: "a", qty: 2 }] },
        headers: { traceparent, correlationId: "c-1" },
      }),
    ]);
    const seen: InboxEvent[] = [];
    const handler = createInboxHandler((event) => void seen.push(event), {
      pool: db.pool,
      schema: CONSUMER_SCHEMA,
    });

    const result = await pollOnce(sqs, queueUrl, handler);

    expect(result).toMatchObject({ received: 1, failed: 0 });
    const [event] = seen;
    expect(event).toMatchObject({
      id,
      eventType: "order.placed",
      aggregateType: "order",
      aggregateId: "order-parse",
      payload: { total: 4200, lines: [{ sku: "a", qty: 2 }] },
      headers: { traceparent, correlationId: "c-1" },
      trace: { traceparent },
      delivery: { receiveCount: 1 },
    });
    expect(typeof event?.sequenceNumber).toBe("bigint");
    expect(event?.createdAt).toBeInstanceOf(Date);
  });

  it("applies a delivery of the same outbox id after SQS's dedup window only once", async () => {
    const sqs = sqsClient();
    const queueUrl = await createFifoQueue(sqs, "inbox-dup");
    const [id] = await publish(queueUrl, [anEvent({ aggregateId: "order-dup" })]);
    const log = recorder();
    const handler = createInboxHandler(writeEffect, {
      pool: db.pool,
      schema: CONSUMER_SCHEMA,
      ...log,
    });
    const first = await pollOnce(sqs, queueUrl, handler);
    const [message] = first.messages;
    if (message === undefined) throw new Error("nothing received");

    // A new SQS message (new deduplication id), same outbox id: what SQS delivers when the relay republishes
    // a row more than 5 minutes after the first send.
    await sendAgain(sqs, queueUrl, message);
    const second = await pollOnce(sqs, queueUrl, handler);

    expect(second).toMatchObject({ received: 1, failed: 0 });
    expect(log.outcomes.map((outcome) => outcome.status)).toEqual(["processed", "duplicate"]);
    expect((await effects(db.pool)).filter((effect) => effect === id)).toEqual([id]);
    expect(log.logs).toContainEqual(
      expect.objectContaining({ level: "info", fields: expect.objectContaining({ outboxId: id }) }),
    );
  });

  it("has no second effect when the consumer died after commit and before acknowledging", async () => {
    const sqs = sqsClient();
    const queueUrl = await createFifoQueue(sqs, "inbox-crash");
    const ids = await publish(queueUrl, [
      anEvent({ aggregateId: "order-crash-1" }),
      anEvent({ aggregateId: "order-crash-2" }),
    ]);
    const log = recorder();
    const handler = createInboxHandler(writeEffect, { pool: db.pool, schema: CONSUMER_SCHEMA, ...log });

    const crashed = await pollOnce(sqs, queueUrl, handler, { acknowledge: false });
    expect(crashed.received).toBe(2);
    await makeVisibleAgain(sqs, queueUrl, crashed.messages);
    const redelivered = await pollOnce(sqs, queueUrl, handler);

    expect(redelivered).toMatchObject({ received: 2, failed: 0 });
    expect(redelivered.messages.map((message) => message.Attributes?.ApproximateReceiveCount)).toEqual([
      "2",
      "2",
    ]);
    expect(log.outcomes.map((outcome) => outcome.status)).toEqual([
      "processed",
      "processed",
      "duplicate",
      "duplicate",
    ]);
    const applied = await effects(db.pool);
    for (const id of ids) expect(applied.filter((effect) => effect === id)).toEqual([id]);
    const empty = await pollOnce(sqs, queueUrl, handler);
    expect(empty.received).toBe(0);
  });

  it("fails only the failing group's remaining records, unprocessed, and rolls the failed one back", async () => {
    const sqs = sqsClient();
    const queueUrl = await createFifoQueue(sqs, "inbox-groups");
    const [a1, a2, a3, b1, b2] = await publish(queueUrl, [
      anEvent({ aggregateId: "order-a" }),
      anEvent({ aggregateId: "order-a", eventType: "order.explodes" }),
      anEvent({ aggregateId: "order-a" }),
      anEvent({ aggregateId: "order-b" }),
      anEvent({ aggregateId: "order-b" }),
    ]);
    const ran: string[] = [];
    let explode = true;
    const handler = createInboxHandler(
      async (event, context) => {
        ran.push(event.id);
        await writeEffect(event, context);
        if (explode && event.eventType === "order.explodes")
          throw new Error("the handler failed after writing");
      },
      { pool: db.pool, schema: CONSUMER_SCHEMA },
    );

    const result = await pollOnce(sqs, queueUrl, handler, { retryFailedAfterSeconds: 0 });

    expect(result.received).toBe(5);
    const failedIds = result.messages
      .filter((message) => result.failedMessageIds.includes(message.MessageId ?? ""))
      .map(outboxIdOf);
    expect(failedIds.sort()).toEqual([a2, a3].sort());
    expect(ran).not.toContain(a3);
    const mine = new Set([a1, a2, a3, b1, b2]);
    expect((await effects(db.pool)).filter((id) => mine.has(id)).sort()).toEqual([a1, b1, b2].sort());
    expect(await inboxIds(db.pool)).not.toContain(a2);

    explode = false;
    const retry = await pollOnce(sqs, queueUrl, handler);
    expect(retry.messages.map(outboxIdOf)).toEqual([a2, a3]);
    expect((await effects(db.pool)).slice(-2)).toEqual([a2, a3]);
  });

  it("fails a message that is not an outbox event, names why in the log, and skips the rest of its group", async () => {
    const sqs = sqsClient();
    const queueUrl = await createFifoQueue(sqs, "inbox-malformed");
    await createConsumerTables(db.pool);
    const { SendMessageCommand } = await import("@aws-sdk/client-sqs");
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: queueUrl,
        MessageBody: "{}",
        MessageGroupId: "order-m",
        MessageDeduplicationId: "foreign-1",
      }),
    );
    const [m2, other] = await publish(queueUrl, [
      anEvent({ aggregateId: "order-m" }),
      anEvent({ aggregateId: "order-n" }),
    ]);
    const log = recorder();
    const handler = createInboxHandler(writeEffect, { pool: db.pool, schema: CONSUMER_SCHEMA, ...log });

    const result = await pollOnce(sqs, queueUrl, handler);

    expect(result.received).toBe(3);
    expect(result.failed).toBe(2);
    expect(log.outcomes.map((outcome) => outcome.status).sort()).toEqual(["failed", "processed", "skipped"]);
    const applied = await effects(db.pool);
    expect(applied).toContain(other);
    expect(applied).not.toContain(m2);
    expect(log.logs).toContainEqual(
      expect.objectContaining({
        level: "error",
        message: expect.stringMatching(/not an outbox event/),
        fields: expect.objectContaining({
          error: expect.stringMatching(/messageAttributes\.outboxId: is missing/),
        }),
      }),
    );
  });

  it("routes by event type; an unrouted type fails unless told to ignore it", async () => {
    const sqs = sqsClient();
    const queueUrl = await createFifoQueue(sqs, "inbox-routes");
    const [placed, cancelled] = await publish(queueUrl, [
      anEvent({ aggregateId: "order-r1", eventType: "order.placed" }),
      anEvent({ aggregateId: "order-r2", eventType: "order.cancelled" }),
    ]);
    const routed: string[] = [];
    const routes = { "order.placed": (event: InboxEvent) => void routed.push(event.id) };
    const strict = recorder();

    const failing = await pollOnce(
      sqs,
      queueUrl,
      createInboxHandler(routes, { pool: db.pool, schema: CONSUMER_SCHEMA, ...strict }),
      { retryFailedAfterSeconds: 0 },
    );
    expect(failing.failed).toBe(1);
    expect(strict.logs.find((line) => line.level === "error")?.fields.error).toMatch(
      /no handler for event type "order.cancelled"/,
    );

    const lenient = recorder();
    const ignoring = await pollOnce(
      sqs,
      queueUrl,
      createInboxHandler(routes, {
        pool: db.pool,
        schema: CONSUMER_SCHEMA,
        unknownEventTypes: "ignore",
        ...lenient,
      }),
    );
    expect(ignoring).toMatchObject({ received: 1, failed: 0 });
    expect(lenient.outcomes.map((outcome) => outcome.status)).toEqual(["ignored"]);
    expect(routed).toEqual([placed]);
    expect(await inboxIds(db.pool)).toContain(cancelled);
  });

  it("runs message groups side by side", async () => {
    const sqs = sqsClient();
    const queueUrl = await createFifoQueue(sqs, "inbox-concurrency");
    await publish(queueUrl, [anEvent({ aggregateId: "g1" }), anEvent({ aggregateId: "g2" })]);
    let active = 0;
    let twoRunning: () => void = () => {};
    const bothStarted = new Promise<void>((resolve) => {
      twoRunning = resolve;
    });
    // The first handler returns only once the other group's handler runs too: one group at a time would wait
    // out the 10 s and fail the record.
    const handler = createInboxHandler(
      async () => {
        if (++active === 2) twoRunning();
        await Promise.race([
          bothStarted,
          new Promise((_, reject) => setTimeout(() => reject(new Error("groups ran one at a time")), 10_000)),
        ]);
      },
      { pool: db.pool, schema: CONSUMER_SCHEMA, groupConcurrency: 2 },
    );

    const result = await pollOnce(sqs, queueUrl, handler);

    expect(result).toMatchObject({ received: 2, failed: 0 });
  });

  it("fails the invocation, loudly, when the inbox database is unreachable", async () => {
    const sqs = sqsClient();
    const queueUrl = await createFifoQueue(sqs, "inbox-down");
    await publish(queueUrl, [
      anEvent({ aggregateId: "order-down-1" }),
      anEvent({ aggregateId: "order-down-2" }),
    ]);
    const unreachable = new pg.Pool({
      connectionString: `postgres://nobody@127.0.0.1:${await freePort()}/none`,
    });
    const ran: string[] = [];
    const handler = createInboxHandler((event) => void ran.push(event.id), {
      pool: unreachable,
      schema: CONSUMER_SCHEMA,
    });
    try {
      const failure = pollOnce(sqs, queueUrl, handler);

      await expect(failure).rejects.toThrow(InboxUnavailableError);
      await expect(failure).rejects.toThrow(
        /all 2 records failed .*ECONNREFUSED.*the whole batch is retried/,
      );
      expect(ran).toEqual([]);
    } finally {
      await unreachable.end();
    }
  });

  it("reports a failing user handler per record instead of failing the invocation", async () => {
    const sqs = sqsClient();
    const queueUrl = await createFifoQueue(sqs, "inbox-all-fail");
    await publish(queueUrl, [anEvent({ aggregateId: "order-f1" }), anEvent({ aggregateId: "order-f2" })]);
    const handler = createInboxHandler(
      () => {
        throw new Error("every event fails");
      },
      { pool: db.pool, schema: CONSUMER_SCHEMA },
    );

    const result = await pollOnce(sqs, queueUrl, handler);

    expect(result).toMatchObject({ received: 2, failed: 2 });
  });
});
