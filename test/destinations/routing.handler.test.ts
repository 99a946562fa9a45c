import { randomBytes } from "node:crypto";
import { CreateStreamCommand, DescribeStreamCommand, KinesisClient } from "@aws-sdk/client-kinesis";
import { CreateTopicCommand, SNSClient, SubscribeCommand } from "@aws-sdk/client-sns";
import { CreateQueueCommand, type Message } from "@aws-sdk/client-sqs";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import { afterAll, beforeAll, describe, expect, inject, it, vi } from "vitest";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";
import { type FaultProxy, startFaultProxy } from "../../local/fakes/faultProxy.ts";
import { useTestDatabase } from "../support/db.ts";
import { createBusToQueue, eventBridgeClient } from "../support/eventBridge.ts";
import { anEvent } from "../support/factories.ts";
import { lambdaContext, relayLambdaEnv } from "../support/lambda.ts";
import { rowStates, writeEvents } from "../support/outboxRows.ts";
import { expectGroupsInOrder, ids, queueArn, readStream } from "../support/routing.ts";
import { createFifoQueue, receiveAll, sqsClient } from "../support/sqs.ts";

/**
 * The end-to-end case, through the relay Lambda's handler (functions/relay/handler.ts, as Lambda runs it:
 * cold start from the environment, OUTBOX_ROUTES, the start check, the invocation's verdict): one outbox routed to
 * two FIFO queues, an SNS FIFO topic with two FIFO queue subscribers (raw delivery), a standard queue, a Kinesis
 * stream and a bus, with no default. routing.relay.test.ts proves the placement and order through the engine;
 * this adds the bus, the Lambda's own path, and one destination (Kinesis) down for 30 s across invocations.
 */
const db = useTestDatabase();
const endpoint = inject("awsEndpoint");
const sqs = sqsClient();
const sns = new SNSClient({ ...LOCAL_AWS, endpoint });
const kinesis = new KinesisClient({ ...LOCAL_AWS, endpoint, requestHandler: new NodeHttpHandler({}) });
const events = eventBridgeClient();
const SOURCE = "com.example.customers";
const suffix = () => randomBytes(4).toString("hex");

let proxy: FaultProxy;
/** The outage's clock: the test moves it on between invocations instead of waiting out 30 s. */
let clock = 0;
afterAll(async () => {
  for (const client of [sqs, sns, kinesis, events]) client.destroy();
  await proxy?.close();
});

describe(`relay Lambda with OUTBOX_ROUTES to queues, a FIFO topic, a stream and a bus (${inject("awsSource")})`, () => {
  let queues: { orders: string; carts: string; audit: string; subscribers: string[]; bus: string };
  let streamName: string;

  beforeAll(async () => {
    proxy = await startFaultProxy(endpoint, { now: () => clock });
    const { TopicArn } = await sns.send(
      new CreateTopicCommand({ Name: `e2e-${suffix()}.fifo`, Attributes: { FifoTopic: "true" } }),
    );
    const [orders, carts, subA, subB] = await Promise.all([
      createFifoQueue(sqs, "e2e-orders"),
      createFifoQueue(sqs, "e2e-carts"),
      createFifoQueue(sqs, "e2e-sub-a"),
      createFifoQueue(sqs, "e2e-sub-b"),
    ]);
    for (const queueUrl of [subA, subB]) {
      await sns.send(
        new SubscribeCommand({
          TopicArn,
          Protocol: "sqs",
          Endpoint: await queueArn(sqs, queueUrl),
          Attributes: { RawMessageDelivery: "true" },
        }),
      );
    }
    const { QueueUrl: audit } = await sqs.send(
      new CreateQueueCommand({ QueueName: `e2e-audit-${suffix()}` }),
    );
    const bus = await createBusToQueue(events, sqs, SOURCE, "e2e-bus");
    streamName = `e2e-${suffix()}`;
    await kinesis.send(new CreateStreamCommand({ StreamName: streamName, ShardCount: 2 }));
    const { StreamDescription } = await kinesis.send(new DescribeStreamCommand({ StreamName: streamName }));
    queues = { orders, carts, audit: audit as string, subscribers: [subA, subB], bus: bus.queueUrl };

    const routes = [
      { match: { aggregateType: "order" }, destination: { kind: "sqs-fifo", queueUrl: orders } },
      { match: { aggregateType: "cart" }, destination: { kind: "sqs-fifo", queueUrl: carts } },
      { match: { eventType: "payment.*" }, destination: { kind: "sns-fifo", topicArn: TopicArn } },
      { match: { aggregateType: "audit" }, destination: { kind: "sqs", queueUrl: audit } },
      {
        match: { aggregateType: "click" },
        destination: { kind: "kinesis", streamArn: StreamDescription?.StreamARN },
      },
      {
        match: { aggregateType: "customer" },
        destination: { kind: "eventbridge", busName: bus.busName, source: SOURCE },
      },
    ];
    vi.resetModules();
    Object.assign(
      process.env,
      relayLambdaEnv({
        DATABASE_URL: db.url,
        AWS_ENDPOINT_URL: endpoint,
        // Kinesis alone goes through the fault proxy (the SDK's per-service endpoint variable).
        AWS_ENDPOINT_URL_KINESIS: proxy.url,
        OUTBOX_ROUTES: JSON.stringify(routes),
        RELAY_MODE: "drain",
        // moto routes through SNS and EventBridge slowly under load: a timed-out request would only be resent.
        RELAY_PUBLISH_TIMEOUT_MS: "30000",
        RELAY_STATEMENT_TIMEOUT_MS: "5000",
        // A failed row waits a minute: an invocation ends when only those are left, as a scheduled one would.
        RELAY_BACKOFF_BASE_MS: "60000",
        RELAY_BACKOFF_MAX_MS: "60000",
      }),
    );
    delete process.env.OUTBOX_QUEUE_URL;
    delete process.env.OUTBOX_EVENT_BUS_NAME;
  });
  afterAll(() => {
    for (const name of [
      "AWS_ENDPOINT_URL_KINESIS",
      "OUTBOX_ROUTES",
      "RELAY_BACKOFF_BASE_MS",
      "RELAY_BACKOFF_MAX_MS",
    ]) {
      delete process.env[name];
    }
  });

  it("puts every event where its route says, in order, dead-letters the unrouted, and a 30 s Kinesis outage delays only the clicks", async () => {
    await db.pool.query("delete from outbox_events");
    const planned = [
      ...[1, 2, 3].flatMap(() => [
        anEvent({ aggregateType: "order", aggregateId: "order-1" }),
        anEvent({ aggregateType: "order", aggregateId: "order-2" }),
        anEvent({ aggregateType: "cart", aggregateId: "cart-1", eventType: "cart.updated" }),
        anEvent({ aggregateType: "click", aggregateId: "user-7", eventType: "click.recorded" }),
        anEvent({ aggregateType: "click", aggregateId: "user-8", eventType: "click.recorded" }),
        anEvent({ aggregateType: "invoice", aggregateId: "inv-1", eventType: "payment.captured" }),
        anEvent({ aggregateType: "customer", aggregateId: "cust-1", eventType: "customer.updated" }),
      ]),
      anEvent({ aggregateType: "audit", aggregateId: "audit-1", eventType: "audit.logged" }),
      anEvent({ aggregateType: "audit", aggregateId: "audit-1", eventType: "audit.logged" }),
      anEvent({ aggregateType: "user", aggregateId: "user-1", eventType: "user.created" }),
    ];
    const written = await writeEvents(db.pool, planned);
    const idsOf = (predicate: (event: (typeof planned)[number]) => boolean) =>
      written
        .filter((_, index) => predicate(planned[index] as (typeof planned)[number]))
        .map((row) => row.id)
        .sort();
    const clicks = idsOf((e) => e.aggregateType === "click");
    const { handler } = await import("../../functions/relay/handler.ts");
    // Kinesis answers 503 to everything for 30 s of the test's clock, from before the first invocation (whose
    // start check then cannot ask Kinesis: the other routes must go on regardless).
    proxy.failFor(30_000);

    const first = await handler({}, lambdaContext(120_000));

    // Everything but the clicks was published by the first invocation, and the unrouted event is a dead letter.
    expect(first).toMatchObject({ published: written.length - clicks.length - 1, deadLettered: 1 });
    const [atOrders, atCarts, atAudit, atBus, ...atSubscribers] = await Promise.all([
      receiveAll(sqs, queues.orders, 6),
      receiveAll(sqs, queues.carts, 3),
      receiveAll(sqs, queues.audit, 2),
      receiveAll(sqs, queues.bus, 3),
      ...queues.subscribers.map((queue) => receiveAll(sqs, queue, 3)),
    ]);
    expect(ids(atOrders as Message[])).toEqual(idsOf((e) => e.aggregateType === "order"));
    expect(ids(atCarts as Message[])).toEqual(idsOf((e) => e.aggregateType === "cart"));
    expect(ids(atAudit as Message[])).toEqual(idsOf((e) => e.aggregateType === "audit"));
    expect((atBus as Message[]).map((m) => JSON.parse(m.Body ?? "").detail.outboxId).sort()).toEqual(
      idsOf((e) => e.aggregateType === "customer"),
    );
    for (const received of atSubscribers) {
      expect(ids(received as Message[])).toEqual(idsOf((e) => e.eventType.startsWith("payment.")));
      expectGroupsInOrder(received as Message[]);
    }
    expectGroupsInOrder(atOrders as Message[]);
    expectGroupsInOrder(atCarts as Message[]);
    const unrouted = written.at(-1)?.id;
    const { rows: dead } = await db.pool.query(
      "select id, last_error from outbox_events where dead_lettered_at is not null",
    );
    expect(dead).toEqual([{ id: unrouted, last_error: expect.stringMatching(/^no route: /) }]);
    expect(await readStream(kinesis, streamName)).toEqual([]);

    // The outage goes on across invocations (each fails loudly: nothing published while clicks wait), and the
    // clicks never count towards dead-lettering.
    for (clock = 10_000; clock < 30_000; clock += 10_000) {
      await db.pool.query("update outbox_events set available_at = now() where processed_at is null");
      await expect(handler({}, lambdaContext(120_000))).rejects.toMatchObject({ name: "NoProgressError" });
    }
    const { rows: waiting } = await db.pool.query(
      "select attempts, transient_failures from outbox_events where processed_at is null and dead_lettered_at is null",
    );
    expect(waiting).toHaveLength(clicks.length);
    for (const row of waiting) expect(row.attempts).toBe(0);
    // Each key's head was tried in every invocation; its later clicks wait behind it, untried.
    expect(waiting.map((row) => row.transient_failures).sort()).toEqual([0, 0, 0, 0, 3, 3]);

    // 30 s on: Kinesis is back, and the next invocation delivers the clicks, per key in seq order.
    clock = 30_000;
    await db.pool.query("update outbox_events set available_at = now() where processed_at is null");
    const last = await handler({}, lambdaContext(120_000));

    expect(last).toMatchObject({ published: clicks.length, failed: 0 });
    expect(await rowStates(db.pool)).toEqual({ published: written.length - 1, pending: 0, dead: 1 });
    const records = await readStream(kinesis, streamName);
    expect(records.map((record) => record.data.outboxId).sort()).toEqual(clicks);
    for (const key of ["user-7", "user-8"]) {
      const seqs = records
        .filter((record) => record.partitionKey === key)
        .map((record) => Number(record.data.seq));
      expect(seqs, key).toHaveLength(3);
      expect(seqs, key).toEqual([...seqs].sort((a, b) => a - b));
    }
    expect(proxy.stats.refused).toBeGreaterThan(0);
  });
});
