import { randomBytes } from "node:crypto";
import { CreateStreamCommand, DescribeStreamCommand, KinesisClient } from "@aws-sdk/client-kinesis";
import { CreateTopicCommand, SNSClient, SubscribeCommand } from "@aws-sdk/client-sns";
import { CreateQueueCommand, type Message } from "@aws-sdk/client-sqs";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createDestination } from "../../functions/shared/destinations/create.ts";
import { destinationSettingFromEnv } from "../../functions/shared/destinations/setting.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { clearOutbox, publishedRow, rowStates, writeEvents } from "../support/outboxRows.ts";
import { drainUntilEmpty, testRelayOptions } from "../support/relay.ts";
import { attribute, expectGroupsInOrder, ids, queueArn, readStream } from "../support/routing.ts";
import { createFifoQueue, receiveAll, sqsClient } from "../support/sqs.ts";

const db = useTestDatabase();
const endpoint = inject("awsEndpoint");
const sqs = sqsClient();
const sns = new SNSClient({ ...LOCAL_AWS, endpoint });
const kinesis = new KinesisClient({ ...LOCAL_AWS, endpoint, requestHandler: new NodeHttpHandler({}) });
afterAll(() => {
  for (const client of [sqs, sns, kinesis]) client.destroy();
});

const suffix = () => randomBytes(4).toString("hex");
/** moto delivers through SNS and routes slowly under load: a timed-out request would only be sent again. */
const options = () => testRelayOptions("unused-with-routes", { publishTimeoutMs: 30_000 });

async function standardQueue() {
  const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: `routes-std-${suffix()}` }));
  return QueueUrl as string;
}

/** A FIFO topic with two FIFO queues subscribed with raw delivery (the body and attributes as published). */
async function fifoTopicWithTwoQueues() {
  const { TopicArn } = await sns.send(
    new CreateTopicCommand({ Name: `routes-${suffix()}.fifo`, Attributes: { FifoTopic: "true" } }),
  );
  const subscribers = [await createFifoQueue(sqs, "sub-a"), await createFifoQueue(sqs, "sub-b")];
  for (const queueUrl of subscribers) {
    await sns.send(
      new SubscribeCommand({
        TopicArn,
        Protocol: "sqs",
        Endpoint: await queueArn(sqs, queueUrl),
        Attributes: { RawMessageDelivery: "true" },
      }),
    );
  }
  return { topicArn: TopicArn as string, subscribers };
}

async function stream() {
  const name = `routes-${suffix()}`;
  await kinesis.send(new CreateStreamCommand({ StreamName: name, ShardCount: 2 }));
  const { StreamDescription } = await kinesis.send(new DescribeStreamCommand({ StreamName: name }));
  return { streamArn: StreamDescription?.StreamARN as string, name };
}

describe(`routing through the relay to queues, a FIFO topic and a stream (${inject("awsSource")})`, () => {
  let queueA: string;
  let queueB: string;
  let fallback: string;
  let audit: string;
  let topic: { topicArn: string; subscribers: string[] };
  let clicks: { streamArn: string; name: string };
  let routes: string;

  beforeAll(async () => {
    [queueA, queueB, fallback, audit, topic, clicks] = await Promise.all([
      createFifoQueue(sqs, "route-a"),
      createFifoQueue(sqs, "route-b"),
      createFifoQueue(sqs, "route-default"),
      standardQueue(),
      fifoTopicWithTwoQueues(),
      stream(),
    ]);
    routes = JSON.stringify([
      { match: { aggregateType: "order" }, destination: { kind: "sqs-fifo", queueUrl: queueA } },
      { match: { aggregateType: ["cart", "basket"] }, destination: { kind: "sqs-fifo", queueUrl: queueB } },
      { match: { eventType: "payment.*" }, destination: { kind: "sns-fifo", topicArn: topic.topicArn } },
      { match: { aggregateType: "audit" }, destination: { kind: "sqs", queueUrl: audit } },
      { match: { aggregateType: "click" }, destination: { kind: "kinesis", streamArn: clicks.streamArn } },
    ]);
  });

  it("every event lands where its route says, per group in seq order at each FIFO target and per key in the stream", async () => {
    await clearOutbox(db.pool);
    const events = [
      ...[1, 2, 3].flatMap(() => [
        anEvent({ aggregateType: "order", aggregateId: "order-1" }),
        anEvent({ aggregateType: "order", aggregateId: "order-2" }),
        anEvent({ aggregateType: "cart", aggregateId: "cart-1", eventType: "cart.updated" }),
        anEvent({ aggregateType: "click", aggregateId: "user-7", eventType: "click.recorded" }),
        anEvent({ aggregateType: "click", aggregateId: "user-8", eventType: "click.recorded" }),
      ]),
      // One group across destinations: its invoice events go to the default queue, its payments to the topic.
      anEvent({ aggregateType: "invoice", aggregateId: "inv-1", eventType: "invoice.created" }),
      anEvent({ aggregateType: "invoice", aggregateId: "inv-1", eventType: "payment.captured" }),
      anEvent({ aggregateType: "invoice", aggregateId: "inv-1", eventType: "payment.refunded" }),
      anEvent({ aggregateType: "invoice", aggregateId: "inv-1", eventType: "invoice.closed" }),
      anEvent({ aggregateType: "audit", aggregateId: "audit-1", eventType: "audit.logged" }),
      anEvent({ aggregateType: "audit", aggregateId: "audit-1", eventType: "audit.logged" }),
    ];
    const written = await writeEvents(db.pool, events);
    const setting = destinationSettingFromEnv({ OUTBOX_ROUTES: routes, OUTBOX_QUEUE_URL: fallback });
    const { destination, destroy } = await createDestination(setting, {
      sockets: 10,
      requestTimeoutMs: 30_000,
      endpoint,
      ...LOCAL_AWS,
    });
    try {
      await drainUntilEmpty(db.pool, destination, options());
    } finally {
      destroy();
    }

    expect(await rowStates(db.pool)).toEqual({ published: written.length, pending: 0, dead: 0 });
    const idsOf = (predicate: (event: (typeof events)[number]) => boolean) =>
      written.filter((_, index) => predicate(events[index] as (typeof events)[number])).map((row) => row.id);

    const [atA, atB, atDefault, atAudit, ...atSubscribers] = await Promise.all([
      receiveAll(sqs, queueA, 6),
      receiveAll(sqs, queueB, 3),
      receiveAll(sqs, fallback, 2),
      receiveAll(sqs, audit, 2),
      ...topic.subscribers.map((queue) => receiveAll(sqs, queue, 2)),
    ]);
    expect(ids(atA as Message[])).toEqual(idsOf((e) => e.aggregateType === "order").sort());
    expect(ids(atB as Message[])).toEqual(idsOf((e) => e.aggregateType === "cart").sort());
    expect(ids(atDefault as Message[])).toEqual(idsOf((e) => e.eventType.startsWith("invoice.")).sort());
    expect(ids(atAudit as Message[])).toEqual(idsOf((e) => e.aggregateType === "audit").sort());
    for (const received of atSubscribers) {
      expect(ids(received as Message[])).toEqual(idsOf((e) => e.eventType.startsWith("payment.")).sort());
      expectGroupsInOrder(received as Message[]);
      // FIFO ids as the SQS path sets them, carried by the topic.
      const first = (received as Message[])[0] as Message;
      expect(first.Attributes?.MessageGroupId).toBe("inv-1");
      expect(first.Attributes?.MessageDeduplicationId).toBe(attribute(first, "outboxId"));
      expect(attribute(first, "eventType")).toBe("payment.captured");
    }
    expect(expectGroupsInOrder(atA as Message[]).get("order-1")).toHaveLength(3);
    expectGroupsInOrder(atB as Message[]);
    expectGroupsInOrder(atDefault as Message[]);
    // The standard queue: the same attributes, no FIFO ids.
    const standard = (atAudit as Message[])[0] as Message;
    expect(standard.Attributes?.MessageGroupId).toBeUndefined();
    expect(attribute(standard, "aggregateType")).toBe("audit");

    const records = await readStream(kinesis, clicks.name);
    expect(records.map((record) => record.data.outboxId).sort()).toEqual(
      idsOf((e) => e.aggregateType === "click").sort(),
    );
    for (const key of ["user-7", "user-8"]) {
      const seqs = records.filter((r) => r.partitionKey === key).map((r) => Number(r.data.seq));
      expect(seqs, key).toHaveLength(3);
      expect(seqs, key).toEqual([...seqs].sort((a, b) => a - b));
    }
    expect(records[0]?.data).toMatchObject({
      aggregateType: "click",
      eventType: "click.recorded",
      payload: { total: 4200, currency: "EUR" },
      headers: {},
    });
  });

  it("without a default, an event no route matches is dead-lettered 'no route'; the others are published", async () => {
    await clearOutbox(db.pool);
    const [unrouted, routed] = await writeEvents(db.pool, [
      anEvent({ aggregateType: "user", aggregateId: "user-1", eventType: "user.created" }),
      anEvent({ aggregateType: "order", aggregateId: "order-9" }),
    ]);
    const { destination, destroy } = await createDestination(
      destinationSettingFromEnv({ OUTBOX_ROUTES: routes }),
      {
        sockets: 10,
        requestTimeoutMs: 30_000,
        endpoint,
        ...LOCAL_AWS,
      },
    );
    try {
      await drainUntilEmpty(db.pool, destination, options());
    } finally {
      destroy();
    }

    const { rows } = await db.pool.query(
      "select id, processed_at is not null as published, dead_lettered_at is not null as dead, last_error from outbox_events",
    );
    const byId = new Map(rows.map((row) => [row.id, row]));
    expect(byId.get(unrouted?.id)).toMatchObject({ published: false, dead: true });
    expect(byId.get(unrouted?.id)?.last_error).toMatch(
      /^no route: no route matches aggregate_type "user" and event_type "user.created"/,
    );
    expect(byId.get(routed?.id)).toEqual(publishedRow({ dead: false }));
    expect(ids(await receiveAll(sqs, queueA, 1))).toEqual([routed?.id]);
  });
});
